//! The `daedalus-runtime` binary as a child process on a fixed loopback port: started, SIGKILLed
//! and started again on the same port, as a crash-looping container would be.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{free_port, runtime_binary};

/// A zero-config runtime (passthrough model) serving one agent, killed when dropped.
#[derive(Debug)]
pub struct RuntimeProcess {
    agent: String,
    /// Extra environment variables (name, value).
    env: Vec<(String, String)>,
    port: u16,
    work_dir: tempfile::TempDir,
    binary: PathBuf,
    child: Option<Child>,
}

impl RuntimeProcess {
    /// Starts the runtime for `agent` on a free port and waits until `/health` answers 200.
    pub async fn start(agent: &str) -> Self {
        Self::start_with(agent, &[]).await
    }

    /// [`RuntimeProcess::start`] with extra environment variables.
    pub async fn start_with(agent: &str, env: &[(&str, &str)]) -> Self {
        let mut runtime = Self {
            agent: agent.to_owned(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            port: free_port(),
            work_dir: tempfile::tempdir().expect("a work dir"),
            binary: runtime_binary(),
            child: None,
        };
        runtime.launch().await;
        runtime
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: no drain, no goodbye; connections to it are refused until it starts again.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and waits until it is healthy.
    pub async fn launch(&mut self) {
        self.relaunch().await;
    }

    /// [`RuntimeProcess::launch`], answering how long it took from the spawn to the first
    /// healthy answer (asked every millisecond).
    pub async fn relaunch(&mut self) -> Duration {
        self.kill();
        let spawned = std::time::Instant::now();
        let child = Command::new(&self.binary)
            .current_dir(self.work_dir.path())
            .env_clear()
            .env("A2A_PORT", self.port.to_string())
            .env("A2A_HOST", "127.0.0.1")
            .env("AGENT_NAME", &self.agent)
            .env("WORK_DIR", self.work_dir.path())
            .env("LOG_LEVEL", "warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the runtime binary starts");
        self.child = Some(child);
        let health = format!("{}/health", self.url());
        let client = reqwest::Client::new();
        let deadline = spawned + Duration::from_secs(30);
        loop {
            if client
                .get(&health)
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
            {
                return spawned.elapsed();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "waited 30 s for the runtime to answer /health"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

impl Drop for RuntimeProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
