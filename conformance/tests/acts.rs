//! ACTS, the official A2A corpus, against our runtime (the `tck` model) over JSON-RPC,
//! HTTP+JSON and gRPC, in the official kit's three passes: full (every level, the
//! push-delivery tests judged by the runner's own webhook receiver), reduced capabilities
//! (streaming, push and the extended card off) and auth (API keys enforced). No test fails:
//! each passes, or is skipped by the card's capabilities, not applicable (a client-parsing
//! test) or disputed. And broken variants of the runtime each fail the test named for their
//! defect, where the runtime itself passes it.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use daedalus_conformance::acts::corpus::{Binding, Corpus, Level};
use daedalus_conformance::acts::run::{ActsOptions, Pass, TestResult, Verdict, run};
use daedalus_test_kit::RuntimeProcess;
use support::acts_mutant::{ActsDefect, acts_mutant};

/// Runs the vendored corpus against `url` in `pass`, down to `level`.
async fn acts(url: &str, pass: Pass, level: Level) -> (ActsOptions, Vec<TestResult>) {
    let corpus = Corpus::vendored().expect("the vendored corpus");
    let mut options = ActsOptions::new(url);
    options.level = level;
    options.pass = pass;
    options.timeout = Duration::from_secs(15);
    options.stream_timeout = Duration::from_secs(15);
    if pass == Pass::Auth {
        options.other_user_token = Some("itk-other-user-token".to_owned());
    }
    let results = run(&corpus, &options).await.expect("the run starts");
    (options, results)
}

/// The tests that failed or could not run, with their bindings.
fn failing(results: &[TestResult]) -> BTreeSet<(String, Binding)> {
    results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Failed { .. } | Verdict::Error { .. }))
        .map(|r| (r.id.clone(), r.binding))
        .collect()
}

/// Whether `id` passed on every binding in `bindings`.
fn passed_on(results: &[TestResult], id: &str, bindings: &[Binding]) -> bool {
    bindings.iter().all(|b| {
        results
            .iter()
            .any(|r| r.id == id && r.binding == *b && r.verdict == Verdict::Passed)
    })
}

fn report(options: &ActsOptions, results: &[TestResult]) -> String {
    daedalus_conformance::acts::report::to_text(options, results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_runtime_passes_every_acts_test_of_the_full_pass_over_every_binding() {
    let runtime = RuntimeProcess::start_with(
        "agent",
        &[
            ("DEFAULT_MODEL", "tck"),
            ("PUSH_ALLOW_HOSTS", "127.0.0.1,localhost"),
        ],
    )
    .await;
    let (options, results) = acts(&runtime.url(), Pass::Full, Level::May).await;
    let report = report(&options, &results);

    let ran: BTreeSet<Binding> = results.iter().map(|r| r.binding).collect();
    assert_eq!(
        ran,
        Binding::ALL.into_iter().collect(),
        "every binding the card declares"
    );
    assert_eq!(failing(&results), BTreeSet::new(), "{report}");
    let passed = |binding| {
        results
            .iter()
            .filter(|r| r.binding == binding && r.verdict == Verdict::Passed)
            .count()
    };
    assert!(
        passed(Binding::Jsonrpc) >= 65
            && passed(Binding::Rest) >= 60
            && passed(Binding::Grpc) >= 60,
        "{report}"
    );
    // A reply streamed as that Message alone (A2A §3.1.2).
    assert!(
        passed_on(&results, "STREAM-MSG-001", &Binding::ALL),
        "{report}"
    );
    // What the server delivered to the runner's webhooks, judged.
    for id in [
        "PUSH-DELIV-001",
        "PUSH-DELIV-002",
        "PUSH-DELIV-003",
        "SEC-PUSH-001",
        "SEC-PUSH-002",
    ] {
        assert!(passed_on(&results, id, &Binding::ALL), "{id}:\n{report}");
    }
    let not_applicable = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::NotApplicable(_)))
        .count();
    assert_eq!(
        not_applicable,
        8 * 3,
        "the client-parsing tests, on each binding"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_streaming_push_and_the_extended_card_off_the_reduced_pass_passes() {
    let runtime = RuntimeProcess::start_with(
        "agent",
        &[
            ("DEFAULT_MODEL", "tck"),
            ("A2A_STREAMING", "off"),
            ("PUSH_NOTIFICATIONS", "off"),
        ],
    )
    .await;
    let (options, results) = acts(&runtime.url(), Pass::Reduced, Level::May).await;
    let report = report(&options, &results);
    assert_eq!(failing(&results), BTreeSet::new(), "{report}");
    // The tests of a server without them ran, and passed.
    for id in ["CORE-CAP-002", "SEC-EXTCARD-003"] {
        assert!(passed_on(&results, id, &Binding::ALL), "{id}:\n{report}");
    }
    // Those of a server with them were skipped, by the card.
    for id in ["STREAM-SSE-001", "PUSH-CFG-001", "SEC-EXTCARD-001"] {
        assert!(
            results
                .iter()
                .filter(|r| r.id == id)
                .all(|r| matches!(r.verdict, Verdict::Skipped(_))),
            "{id}:\n{report}"
        );
    }
}

/// `token`'s entry in an API key file: its SHA-256, its principal, its scopes.
fn key_entry(token: &str, principal: &str, scopes: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(token.as_bytes());
    let hex = digest.iter().fold(String::new(), |mut hex, b| {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
        hex
    });
    format!("  - sha256: {hex}\n    principal: {principal}\n    scopes: [{scopes}]\n")
}

/// The official kit's credentials as an API key file in `dir`: `itk-valid-token` holds the
/// scope every caller needs, `itk-insufficient-token` does not, `itk-other-user-token` is a
/// second user.
fn kit_credentials(dir: &tempfile::TempDir) -> String {
    let keys = dir.path().join("keys.yaml");
    let file = format!(
        "keys:\n{}{}{}",
        key_entry("itk-valid-token", "itk", "a2a"),
        key_entry("itk-insufficient-token", "itk-low", ""),
        key_entry("itk-other-user-token", "itk-other", "a2a"),
    );
    std::fs::write(&keys, file).expect("the key file");
    keys.to_str().expect("a path").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_authentication_enforced_the_auth_pass_passes() {
    let dir = tempfile::tempdir().expect("a dir");
    let keys = kit_credentials(&dir);
    let runtime = RuntimeProcess::start_with(
        "agent",
        &[
            ("DEFAULT_MODEL", "tck"),
            ("PUSH_ALLOW_HOSTS", "127.0.0.1,localhost"),
            ("AUTH_API_KEYS_FILE", &keys),
            ("AUTH_REQUIRED_SCOPES", "a2a"),
        ],
    )
    .await;
    let (options, results) = acts(&runtime.url(), Pass::Auth, Level::Should).await;
    let report = report(&options, &results);
    assert_eq!(failing(&results), BTreeSet::new(), "{report}");
    for id in [
        "SEC-AUTH-001",
        "SEC-AUTH-002",
        "SEC-AUTH-003",
        "SEC-AUTH-004",
        "SEC-EXTCARD-001",
        "SEC-EXTCARD-002",
        "SEC-EXTCARD-004",
    ] {
        assert!(
            results
                .iter()
                .any(|r| r.id == id && r.verdict == Verdict::Passed),
            "{id} ran and passed:\n{report}"
        );
    }
}

/// The environment of a runtime behind a mutant: the kit's credentials when it needs them.
fn mutant_env(defect: ActsDefect, keys: &str) -> Vec<(&str, &str)> {
    if defect.needs_auth() {
        vec![
            ("AUTH_API_KEYS_FILE", keys),
            ("AUTH_REQUIRED_SCOPES", "a2a"),
        ]
    } else {
        Vec::new()
    }
}

/// The one test named for `defect`, on its binding, against `url`.
async fn judge_named(url: &str, defect: ActsDefect) -> (Verdict, String) {
    let (id, binding) = defect.caught_by();
    let corpus = Corpus::vendored().expect("the vendored corpus");
    let mut options = ActsOptions::new(url);
    options.only = vec![id.to_owned()];
    options.bindings = vec![match binding {
        "rest" => Binding::Rest,
        _ => Binding::Jsonrpc,
    }];
    options.pass = if defect.needs_auth() {
        Pass::Auth
    } else {
        Pass::Full
    };
    options.timeout = Duration::from_secs(10);
    options.stream_timeout = Duration::from_secs(10);
    let results = run(&corpus, &options).await.expect("the run starts");
    let verdict = results
        .iter()
        .find(|r| r.id == id)
        .map_or_else(|| panic!("{id} ran: {results:?}"), |r| r.verdict.clone());
    (verdict, report(&options, &results))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_runtime_fails_the_acts_test_named_for_its_defect() {
    let dir = tempfile::tempdir().expect("a dir");
    let keys = kit_credentials(&dir);
    // The proxy breaking nothing: each named test passes through it, so a failure below is
    // the defect's, not the proxy's.
    for auth in [false, true] {
        let baseline_env = if auth {
            mutant_env(ActsDefect::ExtendedCardToAnyone, &keys)
        } else {
            Vec::new()
        };
        let baseline = acts_mutant(ActsDefect::None, &baseline_env).await;
        for defect in ActsDefect::MUTANTS
            .into_iter()
            .filter(|d| d.needs_auth() == auth)
        {
            let (verdict, report) = judge_named(&baseline.url, defect).await;
            assert_eq!(
                verdict,
                Verdict::Passed,
                "unbroken, {defect:?}'s test:\n{report}"
            );
        }
    }
    for defect in ActsDefect::MUTANTS {
        let mutant = acts_mutant(defect, &mutant_env(defect, &keys)).await;
        let (verdict, report) = judge_named(&mutant.url, defect).await;
        assert!(
            matches!(verdict, Verdict::Failed { .. }),
            "{defect:?} is caught by {}:\n{report}",
            defect.caught_by().0
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_acts_command_reports_as_junit_and_says_by_its_exit_code() {
    let runtime = RuntimeProcess::start_with("agent", &[("DEFAULT_MODEL", "tck")]).await;
    let dir = tempfile::tempdir().expect("a dir");
    let junit = dir.path().join("acts.xml");
    let acts = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_daedalus-conformance"))
            .arg("acts")
            .args(args)
            .output()
            .expect("the command runs")
    };
    let url = runtime.url();
    let junit_path = junit.to_str().expect("a path");
    let passed = acts(&[
        "--url",
        &url,
        "--binding",
        "rest",
        "--only",
        "CORE-SEND-001,CORE-GET",
        "--junit",
        junit_path,
    ]);
    let text = String::from_utf8_lossy(&passed.stdout);
    assert_eq!(passed.status.code(), Some(0), "{text}");
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report");
    assert!(
        xml.contains("testsuite name=\"acts rest (full pass)"),
        "{xml}"
    );
    assert!(xml.contains("name=\"CORE-SEND-001\""), "{xml}");
    assert!(!xml.contains("<failure"), "{xml}");

    // A broken server fails the run, and the report says which test and why.
    let broken = acts_mutant(ActsDefect::NotFoundIsInternal, &[]).await;
    let failed = acts(&[
        "--url",
        &broken.url,
        "--binding",
        "jsonrpc",
        "--only",
        "CORE-ERR-001",
        "--junit",
        junit_path,
    ]);
    let text = String::from_utf8_lossy(&failed.stdout);
    assert_eq!(failed.status.code(), Some(1), "{text}");
    assert!(text.contains("CORE-ERR-001"), "{text}");
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report");
    assert!(xml.contains("<failure"), "{xml}");

    // No card at the URL: the run cannot start.
    let nowhere = format!("http://127.0.0.1:{}", daedalus_test_kit::free_port());
    let refused = acts(&["--url", &nowhere, "--timeout", "2s"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("daedalus-conformance:"));
}
