//! The official A2A Rust SDK's echo agent (`test-kit/peers/a2a-rs-echo`: `a2a-server-lf` 0.5.3,
//! `a2a-lf` 0.4.2): a benchmark peer. It is a cargo project of its own, outside the workspace,
//! so the workspace's builds and tests never compile it; [`RustSdkEcho::start`] builds it
//! (release, into `target/peers`) the first time a benchmark asks for it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::free_port;

/// The Rust SDK's echo agent, killed when dropped.
#[derive(Debug)]
pub struct RustSdkEcho {
    child: Child,
    port: u16,
}

/// The peer's project directory.
fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("peers/a2a-rs-echo")
}

/// Builds the peer (release; cargo does nothing when it is current) and answers its binary.
fn build() -> PathBuf {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/peers");
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(project().join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the a2a-rs echo peer does not build");
    target.join("release/a2a-rs-echo")
}

impl RustSdkEcho {
    /// Builds the peer if needed, starts it on a free port and waits until it serves.
    pub fn start() -> Self {
        let port = free_port();
        let mut child = Command::new(build())
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the a2a-rs echo peer starts");
        let stdout = child.stdout.take().expect("piped");
        let ready = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line == "ready");
        assert!(ready, "the a2a-rs echo peer stopped before it served");
        Self { child, port }
    }

    /// Its JSON-RPC endpoint (the card is under `/.well-known/agent-card.json`).
    pub fn jsonrpc_url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for RustSdkEcho {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
