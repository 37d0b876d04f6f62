//! A real runtime for integration tests: `agents.yaml` written to a temp dir, served in-process
//! on port 0, ready (`/health` 200) before the test goes on, stopped when dropped.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use daedalus_runtime::config::Launch;
use tokio_util::sync::CancellationToken;

pub struct Runtime {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Runtime {
    /// Serves `yaml` (sessions in memory, logs at warn).
    pub async fn start(yaml: &str) -> Self {
        Self::serving(yaml, None).await
    }

    /// [`Runtime::start`], with `agent` on the contract face (needed when several could be).
    pub async fn serving(yaml: &str, agent: Option<&str>) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::write(dir.path().join("agents.yaml"), yaml).expect("agents.yaml written");
        let args = [
            "daedalus-runtime",
            "--port",
            "0",
            "--sessions-db",
            ":memory:",
            "--log-level",
            "warn",
        ]
        .map(std::ffi::OsString::from);
        let env = |k: &str| {
            (k == "AGENT_NAME")
                .then(|| agent.map(str::to_owned))
                .flatten()
        };
        let config = match Launch::from_sources(args, &env, dir.path()) {
            Ok(Launch::Run(c)) => c,
            other => panic!("the configuration loads: {other:?}"),
        };
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("binds");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let stop = CancellationToken::new();
        let shutdown = stop.clone().cancelled_owned();
        tokio::spawn(async move { daedalus_runtime::run(listener, config, shutdown).await });
        let deadline = Instant::now() + Duration::from_secs(10);
        while reqwest::get(format!("{url}/health"))
            .await
            .map_or(true, |r| r.status() != 200)
        {
            assert!(Instant::now() < deadline, "the runtime became ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Self {
            url,
            stop,
            _dir: dir,
        }
    }

    /// `agent`'s MCP endpoint on the main port.
    pub fn mcp(&self, agent: &str) -> String {
        format!("{}/agents/{agent}/mcp", self.url)
    }

    /// The main port.
    pub fn port(&self) -> u16 {
        self.url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("the URL ends in a port")
    }
}

/// An agents.yaml on the fake LLM's OpenAI face (`model`, a vision model): `servers` is YAML for
/// `mcp.servers` (indented four spaces, `    {}` for none), `agents` for the `agents:` map.
pub fn on_fake_openai(
    base_url: &str,
    key: &str,
    model: &str,
    servers: &str,
    agents: &str,
) -> String {
    let servers = if servers.trim() == "{}" {
        "  servers: {}".to_owned()
    } else {
        format!("  servers:\n{servers}")
    };
    format!(
        "default_model: openai.{model}\nmodel_capabilities: {{ vision: true }}\n\
         openai: {{ api_key: {key}, base_url: \"{base_url}\" }}\nmcp:\n{servers}\nagents:\n{agents}"
    )
}
