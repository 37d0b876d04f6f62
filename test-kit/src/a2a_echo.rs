//! The official A2A Python SDK's server (a2a-sdk 1.3.0 on uvicorn, from `.venv-a2a`) running
//! the echo agent of `test-kit/py/a2a_echo_agent.py`: what our runtime calls as another agent,
//! and the baseline the A2A benchmark measures against.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::free_port;

/// The echo agent, killed when dropped.
#[derive(Debug)]
pub struct EchoAgent {
    child: Child,
    port: u16,
    /// The port of its gRPC binding, when it serves one.
    grpc_port: Option<u16>,
    lines: Arc<Mutex<Vec<Value>>>,
}

/// The interpreter of `.venv-a2a`, or the one `A2A_PYTHON` names.
pub fn a2a_python() -> PathBuf {
    std::env::var_os("A2A_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv-a2a/bin/python"),
        PathBuf::from,
    )
}

impl EchoAgent {
    /// Starts the agent on a free port and waits until it serves.
    pub fn start() -> Self {
        Self::spawn(None)
    }

    /// Starts the agent serving the SDK's gRPC binding too, on a port of its own.
    pub fn start_with_grpc() -> Self {
        Self::spawn(Some(free_port()))
    }

    fn spawn(grpc_port: Option<u16>) -> Self {
        let python = a2a_python();
        assert!(
            python.is_file(),
            "{} is missing: run .ci/setup",
            python.display()
        );
        let port = free_port();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("py/a2a_echo_agent.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .args(grpc_port.map(|p| p.to_string()))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the echo agent starts");
        let stdout = child.stdout.take().expect("piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    sink.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(value);
                }
            }
        });
        let agent = Self {
            child,
            port,
            grpc_port,
            lines,
        };
        agent.wait_for(Duration::from_secs(30), |l| l["ready"] == true);
        agent
    }

    /// Its base URL (the card is under `/.well-known/agent-card.json`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its gRPC endpoint (`http://127.0.0.1:port`, for a tonic channel), if it serves one.
    pub fn grpc_url(&self) -> Option<String> {
        self.grpc_port.map(|p| format!("http://127.0.0.1:{p}"))
    }

    /// Its JSON-RPC endpoint.
    pub fn jsonrpc_url(&self) -> String {
        format!("{}/a2a/jsonrpc", self.url())
    }

    /// The `traceparent` of every POST it received (`None` where there was none).
    pub fn traceparents(&self) -> Vec<Option<String>> {
        self.lines()
            .iter()
            .filter(|l| l.get("traceparent").is_some())
            .map(|l| l["traceparent"].as_str().map(str::to_owned))
            .collect()
    }

    /// The task ids it was told to cancel.
    pub fn canceled(&self) -> Vec<String> {
        self.lines()
            .iter()
            .filter_map(|l| l["canceled"].as_str().map(str::to_owned))
            .collect()
    }

    fn lines(&self) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until a line it printed matches, under `within`.
    pub fn wait_for(&self, within: Duration, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        loop {
            if let Some(line) = self.lines().into_iter().find(|l| matches(l)) {
                return line;
            }
            assert!(
                Instant::now() < deadline,
                "the echo agent never printed the line: {:?}",
                self.lines()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for EchoAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
