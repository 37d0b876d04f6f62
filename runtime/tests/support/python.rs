//! A Python server of the runtime's tests (`tests/py/*.py`, run by the `.venv` that `.ci/setup`
//! installs): started, its port read from the `LISTENING <port>` line it prints, killed on
//! drop.

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
