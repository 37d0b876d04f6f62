//! The real `daedalus-runtime` binary as a child process on an OS-chosen port: started with
//! its environment cleared and a `WORK_DIR` of its own (its default task store lives there),
//! ready once it logs "runtime ready", killed and reaped on drop.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A runtime child process, started on an OS-chosen port.
pub struct Runtime {
    pub child: Child,
    pub addr: SocketAddr,
    logs: mpsc::Receiver<String>,
    /// The lines logged before "runtime ready".
    startup: Vec<Value>,
    _work_dir: tempfile::TempDir,
}

pub struct RuntimeBuilder {
    command: Command,
    work_dir: tempfile::TempDir,
}

/// The binary under test: this build's, or the one `DAEDALUS_RUNTIME_UNDER_TEST` names (to run
/// the same drills against another build, such as the one before a fix).
pub fn runtime_binary() -> String {
    std::env::var("DAEDALUS_RUNTIME_UNDER_TEST")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_daedalus-runtime").to_owned())
}

pub fn runtime() -> RuntimeBuilder {
    let work_dir = tempfile::tempdir().expect("a work dir");
    let mut command = Command::new(runtime_binary());
    command
        .env_clear()
        .env("WORK_DIR", work_dir.path())
        .env("A2A_PORT", "0")
        .env("A2A_HOST", "127.0.0.1")
        .env("AGENT_NAME", "proc-test")
        .env("SESSIONS_DB", ":memory:")
        .env("LOG_LEVEL", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    RuntimeBuilder { command, work_dir }
}

impl RuntimeBuilder {
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.command.env(key, value);
        self
    }

    pub fn env_remove(mut self, key: &str) -> Self {
        self.command.env_remove(key);
        self
    }

    #[expect(
        clippy::zombie_processes,
        reason = "Runtime owns the child; its Drop kills and reaps it"
    )]
    pub fn start(mut self) -> Runtime {
        let mut child = self.command.spawn().expect("the runtime binary starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, logs) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut startup = Vec::new();
        loop {
            let line = logs
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the runtime logs that it is ready");
            let entry: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {line}"));
            if entry["message"] == "runtime ready" {
                let addr = entry["addr"].as_str().expect("ready line has addr");
                return Runtime {
                    child,
                    addr: addr.parse().expect("addr parses"),
                    logs,
                    startup,
                    _work_dir: self.work_dir,
                };
            }
            startup.push(entry);
        }
    }
}

impl Runtime {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The value of the `/metrics` sample named `sample` (labels and all, as printed).
    pub async fn metric(&self, sample: &str) -> u64 {
        let metrics = reqwest::get(self.url("/metrics"))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("text");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{sample} in:\n{metrics}"))
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the runtime did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The first log line from now on that `matches`; panics after `within`.
    pub fn wait_for_log(&self, within: Duration, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let line = self
                .logs
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the awaited log line within the time");
            let entry: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            if matches(&entry) {
                return entry;
            }
        }
    }

    /// The lines logged before the runtime was ready.
    pub fn startup_logs(&self) -> &[Value] {
        &self.startup
    }

    /// Every remaining log line, parsed.
    pub fn drain_logs(&self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Ok(line) = self.logs.recv_timeout(Duration::from_millis(200)) {
            out.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
        }
        out
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
