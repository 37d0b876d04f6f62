//! Each deliberately broken server fails exactly the check named for its defect.

mod support;

use daedalus_conformance::{CheckId, Outcome, Report, Severity, SuiteOptions, run};
use support::{Defect, mutant};

async fn judge(defect: Defect) -> Report {
    let url = mutant(defect).await;
    run(&SuiteOptions::new(url)).await.expect("the suite runs")
}

fn expected_check(defect: Defect) -> CheckId {
    match defect {
        Defect::None => unreachable!("the baseline has no defect"),
        Defect::IgnoresTaskId => CheckId::TaskIdFromTaskId,
        Defect::InventsTaskId => CheckId::TaskIdFromMessageId,
        Defect::NoArtifact => CheckId::CompletedArtifact,
        Defect::FailedWithoutMessage => CheckId::FailedMessage,
        Defect::CardWithoutSkills => CheckId::CardSkill,
        Defect::CardWithoutVersion => CheckId::CardSchema,
        Defect::AcceptsMalformedJson => CheckId::Malformed400,
        Defect::AcceptsAnyContentType => CheckId::ContentType415,
        Defect::HealthNotJson | Defect::HealthUnavailable => CheckId::Health,
        Defect::TaskNotJson => CheckId::TaskSchema,
        Defect::TaskStillSubmitted => CheckId::TaskState,
        Defect::CardSignatureBroken => CheckId::CardSignature,
        Defect::CardUnsigned => CheckId::CardSigned,
    }
}

#[tokio::test]
async fn the_baseline_mutant_passes_everything_even_the_advisories() {
    let report = judge(Defect::None).await;
    assert!(report.passed(), "{}", report.to_text());
    assert_eq!(
        report.failed_ids(),
        Vec::<&str>::new(),
        "{}",
        report.to_text()
    );
}

#[tokio::test]
async fn an_unsigned_card_fails_only_its_advisory_and_the_run_passes() {
    let report = judge(Defect::CardUnsigned).await;
    assert!(report.passed(), "{}", report.to_text());
    assert_eq!(
        report.failed_ids(),
        vec![expected_check(Defect::CardUnsigned).id()],
        "{}",
        report.to_text()
    );
    assert_eq!(
        report
            .result(CheckId::CardSigned)
            .expect("ran")
            .check
            .severity(),
        Severity::Advisory
    );
    assert!(
        matches!(
            report.result(CheckId::CardSignature).expect("ran").outcome,
            Outcome::Skip(_)
        ),
        "nothing to verify"
    );
}

#[tokio::test]
async fn every_mutant_fails_exactly_the_check_named_for_its_defect() {
    for defect in Defect::MUTANTS {
        let report = judge(defect).await;
        let expected = expected_check(defect);
        assert_eq!(
            report.failed_ids(),
            vec![expected.id()],
            "{defect:?} should fail only {expected}:\n{}",
            report.to_text()
        );
        assert!(!report.passed(), "{defect:?} must fail the run");
        let result = report.result(expected).expect("the check ran");
        match &result.outcome {
            Outcome::Fail(reason) => assert!(!reason.is_empty(), "{defect:?}: empty reason"),
            other => panic!("{defect:?}: {other:?}"),
        }
    }
}

/// The reports of `runs`, in order, [`AT_ONCE`] of them at a time beside the baseline's.
///
/// Each run is a process of its own on a port of its own, so they may overlap; but eleven
/// debug builds each reading a 17 MiB body on two cores (with CI's image build beside them)
/// wait past the suite's 30 s per request, which failed required checks of the baseline.
async fn a_few_at_once(runs: impl Iterator<Item = impl Future<Output = Report>>) -> Vec<Report> {
    use futures::StreamExt as _;
    futures::stream::iter(runs)
        .buffered(AT_ONCE)
        .collect()
        .await
}

/// How many mutants run at once.
const AT_ONCE: usize = 3;

/// `reference-server` at level 2, broken by `defect` (`none` for the baseline).
async fn judge_level_two(defect: &str) -> Report {
    let command = format!(
        "env REFERENCE_LEVEL=2 DEFECT={defect} {}",
        env!("CARGO_BIN_EXE_reference-server")
    );
    run(&SuiteOptions::launching(command))
        .await
        .expect("the suite runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn level_two_mutants_each_fail_exactly_their_check() {
    let level_two_failures = |report: &Report| -> Vec<&'static str> {
        report
            .failed_ids()
            .into_iter()
            .filter(|id| id.starts_with("L2-"))
            .collect()
    };
    let mutants = [
        ("exit-nonzero", CheckId::SigtermDrain, "exited with"),
        ("drop-in-flight", CheckId::SigtermDrain, "dropped"),
        (
            "serve-during-drain",
            CheckId::SigtermDrain,
            "instead of 503",
        ),
        ("non-json-line", CheckId::JsonLogs, "not a JSON object"),
        ("ignore-traceparent", CheckId::TraceContext, "trace id"),
    ];
    let (baseline, reports) = tokio::join!(
        judge_level_two("none"),
        a_few_at_once(mutants.iter().map(|(defect, ..)| judge_level_two(defect)))
    );
    assert!(baseline.passed(), "{}", baseline.to_text());
    assert!(level_two_failures(&baseline).is_empty());
    for ((defect, check, why), report) in mutants.iter().zip(&reports) {
        assert_eq!(
            level_two_failures(report),
            [check.id()],
            "{defect} should fail only {check}:\n{}",
            report.to_text()
        );
        assert!(!report.passed(), "{defect} must fail the run");
        let reason = report.result(*check).and_then(|r| r.reason()).unwrap_or("");
        assert!(reason.contains(why), "{defect}: {reason}");
    }
}

/// The level-3 defects of `reference-server`, each with the one required check it fails and
/// a word of the reason.
fn level_three_mutants() -> [(&'static str, CheckId, &'static str); 10] {
    [
        ("no-sse", CheckId::SseContentType, "Content-Type"),
        ("card-not-streaming", CheckId::CardStreaming, "does not say"),
        ("no-final", CheckId::SseOrder, "final: true"),
        ("bad-event", CheckId::SseSchema, "not a valid stream event"),
        (
            "stream-differs",
            CheckId::SseRebuild,
            "rebuilds to artifacts",
        ),
        ("no-resume", CheckId::SessionResume, "does not hold"),
        (
            "forget-on-restart",
            CheckId::SessionRestart,
            "does not hold",
        ),
        ("bad-compaction", CheckId::CompactionMetadata, "squash"),
        (
            "compaction-strings",
            CheckId::CompactionMetadata,
            "(integers)",
        ),
        (
            "never-compacts",
            CheckId::CompactionMetadata,
            "brought no metadata.compaction",
        ),
    ]
}

/// `reference-server` at level 3, started by the suite, broken by `defect`, with a compaction
/// budget its compaction fits in.
async fn judge_level_three(defect: &str) -> Report {
    let command = format!(
        "env REFERENCE_LEVEL=3 DEFECT={defect} {}",
        env!("CARGO_BIN_EXE_reference-server")
    );
    let mut options = SuiteOptions::launching(command);
    options.level = 3;
    // The reference server compacts a context past 48 KiB: four chunks see it do so, and
    // spare the mutant that never compacts the default megabyte of text.
    options.compaction_budget = 4 * daedalus_conformance::level3::COMPACTION_CHUNK;
    run(&options).await.expect("the suite runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn level_three_mutants_each_fail_exactly_their_check() {
    // The advisories the reference server does not follow (the A2A v1 card, 413) are not
    // requirements; every required check is.
    let required_failures = |report: &Report| -> Vec<&'static str> {
        report
            .failed_ids()
            .into_iter()
            .filter(|id| CheckId::from_id(id).is_some_and(|c| c.severity() == Severity::Required))
            .collect()
    };
    let mutants = level_three_mutants();
    let (baseline, reports) = tokio::join!(
        judge_level_three("none"),
        a_few_at_once(mutants.iter().map(|(defect, ..)| judge_level_three(defect)))
    );
    assert!(baseline.passed(), "{}", baseline.to_text());
    assert!(
        required_failures(&baseline).is_empty(),
        "{}",
        baseline.to_text()
    );
    for check in [CheckId::CompactionMetadata, CheckId::SessionRestart] {
        assert_eq!(
            baseline.result(check).map(|r| &r.outcome),
            Some(&Outcome::Pass),
            "the baseline gives {check} something to judge:\n{}",
            baseline.to_text()
        );
    }
    for ((defect, check, why), report) in mutants.iter().zip(&reports) {
        assert_eq!(
            required_failures(report),
            [check.id()],
            "{defect} should fail only {check}:\n{}",
            report.to_text()
        );
        assert!(!report.passed(), "{defect} must fail the run");
        let reason = report.result(*check).and_then(|r| r.reason()).unwrap_or("");
        assert!(reason.contains(why), "{defect}: {reason}");
    }
}
