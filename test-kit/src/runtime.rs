//! The real runtime in-process: served on port 0, ready (`/health` 200) before the test goes
//! on, stopped when dropped.

use std::net::SocketAddr;
use std::time::Duration;

use daedalus_runtime::config::{Config, Launch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::runtime_config;

/// How long a runtime may take to become ready.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// A runtime serving in this process.
#[derive(Debug)]
pub struct Runtime {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    stop: CancellationToken,
    serving: Option<JoinHandle<Result<(), daedalus_runtime::RunError>>>,
    /// A directory kept as long as the runtime (its configuration files).
    kept_dir: Option<tempfile::TempDir>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Runtime {
    /// Serves the deployment `yaml` (sessions and tasks in memory, logs at warn).
    pub async fn start(yaml: &str) -> Self {
        Self::serving(yaml, None).await
    }

    /// [`Runtime::start`], with `agent` on the A2A face (needed when several could be).
    pub async fn serving(yaml: &str, agent: Option<&str>) -> Self {
        Self::serving_with(yaml, agent, |_| {}).await
    }

    /// [`Runtime::serving`], its configuration changed by `tweak` first (a short grace
    /// period, say).
    pub async fn serving_with(
        yaml: &str,
        agent: Option<&str>,
        tweak: impl FnOnce(&mut Config),
    ) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        std::fs::write(dir.path().join("agents.yaml"), yaml).expect("agents.yaml written");
        let args = [
            "daedalus-runtime",
            "--port",
            "0",
            "--sessions-db",
            ":memory:",
            "--tasks-db",
            "memory",
            "--log-level",
            "warn",
        ]
        .map(std::ffi::OsString::from);
        let env = |k: &str| {
            (k == "AGENT_NAME")
                .then(|| agent.map(str::to_owned))
                .flatten()
        };
        let mut config = match Launch::from_sources(args, &env, dir.path()) {
            Ok(Launch::Run(c)) => c,
            other => panic!("the configuration loads: {other:?}"),
        };
        tweak(&mut config);
        Self::with_config(config).await.holding(dir)
    }

    /// One passthrough agent named `agent`, with the contract's defaults.
    pub async fn passthrough(agent: &str) -> Self {
        Self::passthrough_with(agent, |_| {}).await
    }

    /// [`Runtime::passthrough`], its configuration changed by `tweak` first.
    pub async fn passthrough_with(agent: &str, tweak: impl FnOnce(&mut Config)) -> Self {
        let mut config = runtime_config(agent, SocketAddr::from(([127, 0, 0, 1], 0)));
        tweak(&mut config);
        Self::with_config(config).await
    }

    /// Serves `config` on a free loopback port and waits until it is ready.
    pub async fn with_config(config: Config) -> Self {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .expect("binds");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let stop = CancellationToken::new();
        let shutdown = stop.clone().cancelled_owned();
        let serving = tokio::spawn(daedalus_runtime::run(listener, config, shutdown));
        wait_ready(&url, &serving).await;
        Self {
            url,
            stop,
            serving: Some(serving),
            kept_dir: None,
        }
    }

    /// Keeps `dir` (say, the directory the configuration was read from) until the runtime
    /// is dropped.
    #[must_use]
    pub fn holding(mut self, dir: tempfile::TempDir) -> Self {
        self.kept_dir = Some(dir);
        self
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

    /// Starts the shutdown sequence (drain, then stop).
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Shuts the runtime down and waits until it has stopped (its session store closed, its
    /// ports released).
    pub async fn shut_down(mut self) {
        self.stop.cancel();
        if let Some(serving) = self.serving.take() {
            let ran = serving.await.expect("the runtime's task ran to its end");
            ran.expect("the runtime stopped cleanly");
        }
    }

    /// The URL and the token that stops the runtime; it keeps serving until the token fires.
    pub fn detach(mut self) -> (String, CancellationToken) {
        let stop = std::mem::take(&mut self.stop);
        let url = std::mem::take(&mut self.url);
        if let Some(dir) = self.kept_dir.take() {
            // The deployment file was read at startup; the directory may outlive the test.
            let _ = dir.keep();
        }
        (url, stop)
    }
}

/// Polls `/health` until it answers 200; panics if the runtime stopped first or never did.
async fn wait_ready(url: &str, serving: &JoinHandle<Result<(), daedalus_runtime::RunError>>) {
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        let health = reqwest::get(format!("{url}/health")).await;
        if health.is_ok_and(|r| r.status() == 200) {
            return;
        }
        assert!(
            !serving.is_finished(),
            "the runtime stopped before it was ready"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "the runtime was not ready within {READY_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
