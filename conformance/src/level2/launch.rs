//! The runtime under test as a child process: started with `sh -c "exec CMD"` on a port the
//! suite picked (`A2A_PORT`), a grace period it chose (`TERMINATION_GRACE_PERIOD`) and a
//! workspace it made (`WORK_DIR`, the same for every start of one run, so a restart keeps it),
//! its stdout read line by line, signaled with `kill`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use daedalus_contract::container::format_duration;

/// Why the runtime under test could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot pick a free port")]
    Port(#[source] std::io::Error),
    #[error("cannot start `sh -c \"exec {command}\"`")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the runtime did not answer GET /health with 200 within {}", format_duration(*.0))]
    NotReady(Duration),
    #[error("the runtime exited before it was ready ({0})")]
    Exited(ExitStatus),
}

/// A runtime the suite started.
#[derive(Debug)]
pub struct Launched {
    child: Child,
    url: String,
    lines: Arc<Mutex<Vec<String>>>,
    /// Reads stdout until it closes.
    reader: Option<std::thread::JoinHandle<()>>,
    /// The `TERMINATION_GRACE_PERIOD` it runs with.
    pub grace: Duration,
}

impl Launched {
    /// Starts `command` in `work_dir` and waits until `/health` answers 200 (within `startup`).
    pub async fn start(
        command: &str,
        work_dir: &std::path::Path,
        grace: Duration,
        startup: Duration,
    ) -> Result<Self, LaunchError> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(LaunchError::Port)?
            .port();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("exec {command}"))
            .env("A2A_PORT", port.to_string())
            .env("TERMINATION_GRACE_PERIOD", format_duration(grace))
            .env("WORK_DIR", work_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| LaunchError::Spawn {
                command: command.to_owned(),
                source,
            })?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = child.stdout.take().map(|stdout| {
            let lines = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    lines
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(line);
                }
            })
        });
        let mut launched = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            lines,
            reader,
            grace,
        };
        launched.wait_ready(startup).await?;
        Ok(launched)
    }

    async fn wait_ready(&mut self, within: Duration) -> Result<(), LaunchError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap_or_default();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let health = http.get(format!("{}/health", self.url)).send().await;
            if health.is_ok_and(|r| r.status() == 200) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(LaunchError::Exited(status));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(LaunchError::NotReady(within));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every stdout line so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Sends SIGTERM (with `kill`, so the suite needs no signal library).
    pub fn terminate(&self) -> bool {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Waits for the process to exit, up to `within`; `None` if it is still running (it is then
    /// killed).
    pub async fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Its stdout is closed now: take the last lines.
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return Some(status);
            }
            if tokio::time::Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
