//! The suite against real runtimes: `daedalus-runtime` and the independent `reference-server`,
//! through the library and through the `daedalus-conformance` command line.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use daedalus_conformance::{CheckId, Outcome, SuiteOptions, run};
use tokio_util::sync::CancellationToken;

/// Starts `daedalus-runtime` in-process on a free port; returns its URL and a stop token.
async fn start_daedalus_runtime() -> (String, CancellationToken) {
    daedalus_test_kit::Runtime::passthrough("conformance-target")
        .await
        .detach()
}

/// The `reference-server` binary on a free port.
struct ReferenceServer {
    child: Child,
    url: String,
}

impl ReferenceServer {
    fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_reference-server"))
            .env("A2A_PORT", "0")
            .stderr(Stdio::piped())
            .spawn()
            .expect("reference-server starts");
        let stderr = child.stderr.take().expect("piped");
        let mut line = String::new();
        BufReader::new(stderr)
            .read_line(&mut line)
            .expect("it announces its address");
        let url = line
            .trim()
            .rsplit(' ')
            .next()
            .expect("the line ends with the URL")
            .to_owned();
        Self { child, url }
    }
}

impl Drop for ReferenceServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn daedalus_runtime_passes_level_one_with_every_advisory() {
    let (url, stop) = start_daedalus_runtime().await;
    let report = run(&SuiteOptions::new(&url)).await.unwrap();
    assert!(report.passed(), "{}", report.to_text());
    assert_eq!(
        report.failed_ids(),
        Vec::<&str>::new(),
        "{}",
        report.to_text()
    );
    let skipped: Vec<_> = report
        .results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Skip(_)))
        .collect();
    assert!(skipped.is_empty(), "every check had evidence: {skipped:?}");
    stop.cancel();
}

#[tokio::test]
async fn the_reference_server_passes_level_one_without_our_extensions() {
    let server = ReferenceServer::start();
    let report = run(&SuiteOptions::new(&server.url)).await.unwrap();
    assert!(report.passed(), "{}", report.to_text());
    // It has no supportedInterfaces and no body limit: those are advisories, not failures.
    let mut failed = report.failed_ids();
    failed.sort_unstable();
    assert_eq!(
        failed,
        ["L1-413-BODY-LIMIT", "L1-CARD-A2A-V1"],
        "{}",
        report.to_text()
    );
    let manifest = report.result(CheckId::Manifest).unwrap();
    assert!(matches!(manifest.outcome, Outcome::Skip(_)), "{manifest:?}");
}

#[test]
fn the_command_line_reports_text_json_and_junit_and_exits_by_verdict() {
    let server = ReferenceServer::start();
    let junit = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_daedalus-conformance"))
        .args(["--url", &server.url, "--level", "1", "--json", "--junit"])
        .arg(junit.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], true);
    assert_eq!(
        report["checks"].as_array().unwrap().len(),
        CheckId::ALL.len()
    );
    let xml = std::fs::read_to_string(junit.path()).unwrap();
    assert!(xml.contains("name=\"L1-TASK-ID-FROM-TASKID\""), "{xml}");
    assert!(xml.contains("failures=\"0\""), "{xml}");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let broken = rt.block_on(support::mutant(support::Defect::NoArtifact));
    let out = Command::new(env!("CARGO_BIN_EXE_daedalus-conformance"))
        .args(["--url", &broken])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("FAIL  L1-COMPLETED-ARTIFACT"), "{text}");

    let out = Command::new(env!("CARGO_BIN_EXE_daedalus-conformance"))
        .args(["--url", &broken, "--level", "2"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "levels not built yet are a usage error"
    );
}

#[tokio::test]
async fn an_unreachable_runtime_fails_with_a_reason() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let report = run(&SuiteOptions::new(&url)).await.unwrap();
    assert!(!report.passed());
    let health = report.result(CheckId::Health).unwrap();
    assert!(health.reason().unwrap().contains("no answer"), "{health:?}");
}
