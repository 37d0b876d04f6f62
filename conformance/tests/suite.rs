//! The suite against real runtimes: `daedalus-runtime` and the independent `reference-server`,
//! through the library and through the `daedalus-conformance` command line.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use daedalus_conformance::{CheckId, Outcome, SuiteOptions, run};
use tokio_util::sync::CancellationToken;

/// Starts `daedalus-runtime` in-process on a free port; returns its URL and a stop token.
/// Our runtime, its cards signed (so that every advisory has something to pass).
async fn start_daedalus_runtime() -> (String, CancellationToken) {
    daedalus_test_kit::Runtime::passthrough_with("conformance-target", |config| {
        config.card_signing = Some(daedalus_test_kit::card_signing_plan());
    })
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
        ["L1-413-BODY-LIMIT", "L1-CARD-A2A-V1", "L1-CARD-SIGNED"],
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
        CheckId::ALL.iter().filter(|c| c.level() == 1).count()
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
        .args(["--url", &broken, "--level", "4"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "a level the contract does not have is a usage error"
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

/// The command that starts `daedalus-runtime` for the suite (`--exec`).
fn our_runtime_command() -> String {
    format!(
        "env AGENT_NAME=conformance-target CARD_SIGNING_KEY={} {}",
        daedalus_test_kit::card_signing_key_file().display(),
        daedalus_test_kit::runtime_binary().display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_runtime_passes_level_two_when_the_suite_starts_it() {
    let command = our_runtime_command();
    let report = run(&SuiteOptions::launching(command)).await.unwrap();
    assert!(report.passed(), "{}", report.to_text());
    assert_eq!(
        report.failed_ids(),
        Vec::<&str>::new(),
        "{}",
        report.to_text()
    );
    for check in CheckId::ALL.into_iter().filter(|c| c.level() == 2) {
        let result = report.result(check).expect("every level-2 check ran");
        assert_eq!(result.outcome, Outcome::Pass, "{check}: {result:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_fails_level_two_on_the_checks_it_lacks() {
    let command = env!("CARGO_BIN_EXE_reference-server").to_owned();
    let report = run(&SuiteOptions::launching(command)).await.unwrap();
    assert!(!report.passed());
    let mut failed: Vec<&str> = report
        .failed_ids()
        .into_iter()
        .filter(|id| id.starts_with("L2-"))
        .collect();
    failed.sort_unstable();
    assert_eq!(
        failed,
        [
            "L2-GRACE-CANCEL",
            "L2-JSON-LOGS",
            "L2-SIGTERM-DRAIN",
            "L2-TRACE-CONTEXT"
        ],
        "{}",
        report.to_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_runtime_passes_level_three_when_the_suite_starts_it() {
    let command = our_runtime_command();
    let mut options = SuiteOptions::launching(command);
    options.level = 3;
    let report = run(&options).await.unwrap();
    assert!(report.passed(), "{}", report.to_text());
    assert_eq!(
        report.failed_ids(),
        Vec::<&str>::new(),
        "{}",
        report.to_text()
    );
    for check in CheckId::ALL.into_iter().filter(|c| c.level() == 3) {
        let result = report.result(check).expect("every level-3 check ran");
        let expected = if check == CheckId::CompactionMetadata {
            // A passthrough runtime never compacts: the report says what was not checked.
            matches!(result.outcome, Outcome::Skip(_))
        } else {
            result.outcome == Outcome::Pass
        };
        assert!(expected, "{check}: {result:?}");
    }
}

#[tokio::test]
async fn the_reference_server_fails_level_three_on_the_checks_it_lacks() {
    let server = ReferenceServer::start();
    let mut options = SuiteOptions::new(&server.url);
    options.level = 3;
    let report = run(&options).await.unwrap();
    assert!(!report.passed());
    let mut failed: Vec<&str> = report
        .failed_ids()
        .into_iter()
        .filter(|id| id.starts_with("L3-"))
        .collect();
    failed.sort_unstable();
    assert_eq!(
        failed,
        ["L3-SESSION-RESUME", "L3-SSE-CONTENT-TYPE"],
        "{}",
        report.to_text()
    );
}

#[tokio::test]
async fn without_exec_level_two_is_skipped_with_the_reason_and_not_certified() {
    let (url, stop) = start_daedalus_runtime().await;
    let mut options = SuiteOptions::new(&url);
    options.level = 2;
    let report = run(&options).await.unwrap();
    assert!(!report.passed(), "{}", report.to_text());
    for check in [
        CheckId::SigtermDrain,
        CheckId::GraceCancel,
        CheckId::JsonLogs,
        CheckId::TraceContext,
    ] {
        let result = report.result(check).expect("reported");
        match &result.outcome {
            Outcome::Skip(why) => assert!(why.contains("--exec"), "{check}: {why}"),
            other => panic!("{check}: {other:?}"),
        }
    }
    assert_eq!(
        report.result(CheckId::ManifestLevel2).map(|r| &r.outcome),
        Some(&Outcome::Pass)
    );
    stop.cancel();
}

/// The compaction check is not vacuous on our runtime: on a model's agent (the strict fake
/// LLM) with a small context window, the manifest declares compaction, and the suite's drive
/// of one context makes it compact and report it, five fields right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_runtime_on_a_model_compacts_when_the_suite_drives_a_context() {
    use daedalus_fake_llm::{AutoReply, FakeLlm};
    let fake = FakeLlm::start("sk-conformance", &["gpt-small"]).await;
    fake.auto(AutoReply {
        tools: Vec::new(),
        text: "noted".to_owned(),
        ..AutoReply::default()
    });
    let yaml = format!(
        "default_model: openai.gpt-small\n\
         model_capabilities: {{ context_window: 32768, max_output_tokens: 512 }}\n\
         openai: {{ api_key: sk-conformance, base_url: \"{}\" }}\n\
         agents:\n  talker:\n    instruction: Answer.\n    compaction: {{ strategy: truncate }}\n",
        fake.openai_base_url
    );
    let rt = daedalus_test_kit::Runtime::start(&yaml).await;
    let mut options = SuiteOptions::new(&rt.url);
    options.level = 3;
    let report = run(&options).await.unwrap();
    let judged = report.result(CheckId::CompactionMetadata).unwrap();
    assert_eq!(judged.outcome, Outcome::Pass, "{}", report.to_text());
}
