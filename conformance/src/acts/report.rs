//! An ACTS run written out: text for a person, JSON for a program, JUnit XML for CI (one
//! suite per binding; a failed or errored MAY test is reported in `system-out`, not as a
//! failure, since a MAY never fails certification).

use std::fmt::Write as _;

use serde_json::json;

use super::corpus::{Binding, Level};
use super::run::{ActsOptions, TestResult, Verdict, certifies};
use crate::report::xml_escape;

fn why(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Passed => String::new(),
        Verdict::Failed { step, why } | Verdict::Error { step, why } => match step {
            Some(step) => format!("step {step}: {why}"),
            None => why.clone(),
        },
        Verdict::Skipped(why) | Verdict::NotApplicable(why) => why.clone(),
        Verdict::Disputed { section, why } => format!("{section}: {why}"),
    }
}

/// The run as text: a line per test that did not pass, and the counts per binding and level.
pub fn to_text(options: &ActsOptions, results: &[TestResult]) -> String {
    let mut out = format!(
        "ACTS ({} corpus, pass {}) against {}\n",
        super::corpus::CORPUS_COMMIT,
        options.pass.as_str(),
        options.url
    );
    for binding in Binding::ALL {
        let mine: Vec<&TestResult> = results.iter().filter(|r| r.binding == binding).collect();
        if mine.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{}:", binding.as_str());
        for r in mine.iter().filter(|r| r.verdict != Verdict::Passed) {
            let _ = writeln!(
                out,
                "  {:<16} {:<5} {:<15} {}",
                r.id,
                r.level.as_str(),
                r.verdict.label(),
                why(&r.verdict)
            );
        }
        for level in [Level::Must, Level::Should, Level::May] {
            let at: Vec<&&TestResult> = mine.iter().filter(|r| r.level == level).collect();
            if at.is_empty() {
                continue;
            }
            let count = |label: &str| at.iter().filter(|r| r.verdict.label() == label).count();
            let _ = writeln!(
                out,
                "  {:<6} {} passed, {} failed, {} errors, {} skipped, {} not applicable, {} disputed",
                level.as_str(),
                count("passed"),
                count("failed"),
                count("error"),
                count("skipped"),
                count("not applicable"),
                count("disputed")
            );
        }
    }
    let _ = writeln!(
        out,
        "\n{}",
        if certifies(results) {
            "every MUST and SHOULD test passed, or is skipped, not applicable or disputed"
        } else {
            "NOT conformant: a MUST or SHOULD test failed or could not run"
        }
    );
    out
}

/// The run as JSON.
pub fn to_json(options: &ActsOptions, results: &[TestResult]) -> serde_json::Value {
    json!({
        "corpus": super::corpus::CORPUS_COMMIT,
        "url": options.url,
        "pass": options.pass.as_str(),
        "conformant": certifies(results),
        "tests": results.iter().map(|r| json!({
            "id": r.id,
            "name": r.name,
            "level": r.level.as_str(),
            "binding": r.binding.as_str(),
            "result": r.verdict.label(),
            "reason": why(&r.verdict),
            "seconds": r.duration.as_secs_f64(),
        })).collect::<Vec<_>>(),
    })
}

/// A failure of certification: a MUST or SHOULD test failed or could not run.
fn failing(r: &TestResult) -> bool {
    r.level != Level::May && matches!(r.verdict, Verdict::Failed { .. } | Verdict::Error { .. })
}

/// The run as JUnit XML.
pub fn to_junit(options: &ActsOptions, results: &[TestResult]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"acts\" tests=\"{}\" failures=\"{}\">",
        results.len(),
        results.iter().filter(|r| failing(r)).count()
    );
    for binding in Binding::ALL {
        let mine: Vec<&TestResult> = results.iter().filter(|r| r.binding == binding).collect();
        if mine.is_empty() {
            continue;
        }
        let skipped = mine
            .iter()
            .filter(|r| {
                matches!(
                    r.verdict,
                    Verdict::Skipped(_) | Verdict::NotApplicable(_) | Verdict::Disputed { .. }
                )
            })
            .count();
        let _ = writeln!(
            out,
            "  <testsuite name=\"acts {} ({} pass) at {}\" tests=\"{}\" failures=\"{}\" skipped=\"{skipped}\">",
            binding.as_str(),
            options.pass.as_str(),
            xml_escape(&options.url),
            mine.len(),
            mine.iter().filter(|r| failing(r)).count(),
        );
        for r in &mine {
            let _ = write!(
                out,
                "    <testcase classname=\"acts.{}.{}\" name=\"{}\" time=\"{:.3}\">",
                binding.as_str(),
                r.level.as_str(),
                xml_escape(&r.id),
                r.duration.as_secs_f64()
            );
            let reason = xml_escape(&why(&r.verdict));
            match &r.verdict {
                Verdict::Passed => {}
                Verdict::Failed { .. } | Verdict::Error { .. } if r.level == Level::May => {
                    let _ = write!(
                        out,
                        "<system-out>MAY, {}: {reason}</system-out>",
                        r.verdict.label()
                    );
                }
                Verdict::Failed { .. } => {
                    let _ = write!(out, "<failure message=\"{reason}\"/>");
                }
                Verdict::Error { .. } => {
                    let _ = write!(out, "<error message=\"{reason}\"/>");
                }
                other => {
                    let _ = write!(out, "<skipped message=\"{}: {reason}\"/>", other.label());
                }
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
