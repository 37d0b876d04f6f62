//! ACTS against another server: the official A2A Python SDK (a2a-sdk 1.3.0) serving the test
//! kit's echo agent over JSON-RPC and gRPC (it serves no HTTP+JSON). It plays none of the
//! corpus's behaviours: it completes every task with an echo of its text. So the tests that
//! need no behaviour (`--no-behaviours`: discovery, errors, wire format, version negotiation)
//! all pass, and run whole the corpus fails only tests that need a behaviour, each because the
//! echo does something else (docs/conformance.md records which and why).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use daedalus_conformance::acts::corpus::{Binding, Corpus};
use daedalus_conformance::acts::run::{ActsOptions, TestResult, Verdict, run};
use daedalus_test_kit::EchoAgent;

async fn acts(url: &str, no_behaviours: bool) -> (ActsOptions, Vec<TestResult>) {
    let corpus = Corpus::vendored().expect("the vendored corpus");
    let mut options = ActsOptions::new(url);
    options.no_behaviours = no_behaviours;
    options.timeout = Duration::from_secs(10);
    options.stream_timeout = Duration::from_secs(10);
    let results = run(&corpus, &options).await.expect("the run starts");
    (options, results)
}

/// How many tests came to `verdict` (by its label) on each binding.
fn count(results: &[TestResult], label: &str) -> BTreeMap<Binding, usize> {
    let mut counts = BTreeMap::new();
    for result in results.iter().filter(|r| r.verdict.label() == label) {
        *counts.entry(result.binding).or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdks_echo_agent_passes_every_test_that_needs_no_behaviour() {
    let agent = EchoAgent::start_with_grpc();
    let (options, results) = acts(&agent.url(), true).await;
    let report = daedalus_conformance::acts::report::to_text(&options, &results);
    assert!(
        daedalus_conformance::acts::run::certifies(&results),
        "{report}"
    );
    assert_eq!(count(&results, "failed"), BTreeMap::new(), "{report}");
    assert_eq!(count(&results, "error"), BTreeMap::new(), "{report}");
    // What it passes, as recorded in docs/conformance.md.
    assert_eq!(
        count(&results, "passed"),
        BTreeMap::from([(Binding::Jsonrpc, 19), (Binding::Grpc, 14)]),
        "{report}"
    );
    assert!(
        results
            .iter()
            .filter(|r| r.binding == Binding::Rest)
            .all(|r| matches!(r.verdict, Verdict::Skipped(_))),
        "its card declares no HTTP+JSON interface"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_whole_against_the_echo_agent_only_tests_that_need_a_behaviour_fail() {
    let agent = EchoAgent::start_with_grpc();
    let (options, results) = acts(&agent.url(), false).await;
    let report = daedalus_conformance::acts::report::to_text(&options, &results);
    let corpus = Corpus::vendored().expect("the vendored corpus");
    let needs_a_behaviour = |id: &str| {
        corpus
            .tests
            .iter()
            .any(|t| t.test.id == id && !t.test.requires_behaviors.is_empty())
    };
    assert_eq!(count(&results, "error"), BTreeMap::new(), "{report}");
    let failed: Vec<&TestResult> = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Failed { .. }))
        .collect();
    assert!(!failed.is_empty(), "the echo plays no behaviour:\n{report}");
    for result in failed {
        assert!(
            needs_a_behaviour(&result.id),
            "{} failed on {:?} though it needs no behaviour:\n{report}",
            result.id,
            result.binding
        );
    }
    // As recorded in docs/conformance.md: the tests needing a behaviour the echo never plays
    // fail on every run; those needing a task that runs long enough to be seen working,
    // cancelled or subscribed to pass or fail with the machine's speed (the echo answers at
    // once, so a slow runner may still catch its task), and are not counted.
    let always_failing: BTreeMap<Binding, BTreeSet<&str>> = results
        .iter()
        .filter(|r| matches!(r.verdict, Verdict::Failed { .. }))
        .filter(|r| !RACES_THE_ECHO.contains(&r.id.as_str()))
        .fold(BTreeMap::new(), |mut by_binding, r| {
            by_binding
                .entry(r.binding)
                .or_default()
                .insert(r.id.as_str());
            by_binding
        });
    let on_both: BTreeSet<&str> = NEVER_PLAYED.iter().copied().collect();
    assert_eq!(
        always_failing,
        BTreeMap::from([
            (Binding::Jsonrpc, on_both.clone()),
            (Binding::Grpc, on_both)
        ]),
        "{report}"
    );
}

/// Tests needing a behaviour the echo agent never plays: each fails on every run.
const NEVER_PLAYED: [&str; 11] = [
    "CORE-SEND-003",
    "DM-FMT-002",
    "STREAM-MSG-001",
    "CORE-FAIL-001",
    "CORE-MULTI-001",
    "CORE-MULTI-005",
    "CORE-MULTI-006",
    "CORE-HIST-002",
    "CORE-HIST-006",
    "SEC-AUTH-005",
    "DM-ART-002",
];

/// Tests needing a task still running when the next step reaches it; the echo's tasks end at
/// once, so these race it.
const RACES_THE_ECHO: [&str; 6] = [
    "CORE-CANCEL-001",
    "CORE-EXEC-002",
    "STREAM-SUB-001",
    "STREAM-SSE-004",
    "STREAM-RESUB-001",
    "GRPC-STREAM-002",
];
