//! The Python programs of the runtime's tests (`tests/py/*.py`, run by the `.venv` that
//! `.ci/setup` installs, or `.venv-mcp1`): a server, started and its port read from the
//! `LISTENING <port>` line it prints; and a client script driven line by line
//! ([`PythonClient`]). Both are killed on drop. The official A2A SDK's scripts run on
//! `.venv-a2a` ([`a2a_steps`]).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A Python server listening on loopback.
pub struct PythonServer {
    _child: Child,
    pub port: u16,
}

/// The Python of `.venv` (mcp 2.x, joserfc), or the one `MCP_PYTHON` names.
pub fn python() -> PathBuf {
    std::env::var_os("MCP_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"),
        PathBuf::from,
    )
}

/// The Python of `.venv-a2a` (the official A2A SDK), or the one `A2A_PYTHON` names.
pub fn a2a_python() -> PathBuf {
    std::env::var_os("A2A_PYTHON").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv-a2a/bin/python"),
        PathBuf::from,
    )
}

/// Runs `tests/py/<script>` with `args` on the A2A SDK's Python (for two minutes at most),
/// and answers the JSON lines it printed, by their `step`.
///
/// # Panics
/// When the script fails, or prints a line that is not JSON.
pub async fn a2a_steps(
    script: &str,
    args: &[&str],
) -> std::collections::HashMap<String, serde_json::Value> {
    let python = a2a_python();
    assert!(
        python.is_file(),
        "{} is missing: run .ci/setup",
        python.display()
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(script);
    let run = Command::new(&python)
        .arg(script)
        .args(args)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_mins(2), run)
        .await
        .expect("the SDK client finished")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| {
            let step: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            (step["step"].as_str().unwrap_or_default().to_owned(), step)
        })
        .collect()
}

impl PythonServer {
    /// Runs `tests/py/<script>` with `args` and waits (a minute at most) until it listens.
    /// Whatever else it prints is read and dropped, so its output never blocks it.
    pub async fn start(script: &str, args: &[&str]) -> Self {
        let python = python();
        assert!(
            python.is_file(),
            "{} is missing: run .ci/setup",
            python.display()
        );
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/py")
            .join(script);
        let mut child = Command::new(&python)
            .arg(&script)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("python starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let port = tokio::time::timeout(Duration::from_mins(1), async {
            while let Some(line) = lines.next_line().await.expect("reads") {
                if let Some(port) = line.strip_prefix("LISTENING ") {
                    return port.parse::<u16>().expect("a port number");
                }
            }
            panic!("{} exited before it listened", script.display());
        })
        .await
        .expect("the server listens within a minute");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            _child: child,
            port,
        }
    }

    /// Its MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// What a driven client script said.
pub enum Heard {
    /// A word asking the driver to act; the script waits for [`PythonClient::ok`].
    Asks(String),
    /// `RESULT <json>`: every check passed.
    Result(serde_json::Value),
}

/// A Python client script of the tests (`tests/py/<script>`, using `tests/py/driven.py`),
/// driven line by line on its stdin and stdout; killed on drop.
pub struct PythonClient {
    child: Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl PythonClient {
    /// Runs `tests/py/<script>` with `args` under `python` (its stderr goes to the test's).
    pub fn start(python: &std::path::Path, script: &str, args: &[&str]) -> Self {
        assert!(
            python.is_file(),
            "{} is missing: run .ci/setup",
            python.display()
        );
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/py")
            .join(script);
        let mut child = Command::new(python)
            .arg(&script)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("python starts");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self {
            child,
            stdin,
            lines,
        }
    }

    /// The next word or the result; a failed check or an early end fails the test.
    pub async fn next(&mut self) -> Heard {
        while let Some(line) = self.lines.next_line().await.expect("reads") {
            if let Some(json) = line.strip_prefix("RESULT ") {
                return Heard::Result(serde_json::from_str(json).expect("JSON"));
            }
            assert!(!line.starts_with("FAILED "), "the Python client: {line}");
            if !line.is_empty() && line.chars().all(|c| c.is_ascii_uppercase()) {
                return Heard::Asks(line);
            }
            // Anything else it prints on stdout is not for the driver (its stderr is the
            // test's).
        }
        panic!("the Python client ended without a result");
    }

    /// Tells the script the driver has done what it asked.
    pub async fn ok(&mut self) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(b"ok\n").await.expect("answers");
        self.stdin.flush().await.expect("flushes");
    }

    /// Waits for the script to exit, successfully.
    pub async fn finish(mut self) {
        let status = self.child.wait().await.expect("exits");
        assert!(status.success(), "{status}");
    }
}
