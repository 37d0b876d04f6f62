//! Each deliberately broken server fails exactly the check named for its defect.

mod support;

use daedalus_conformance::{CheckId, Outcome, Report, SuiteOptions, run};
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
