//! The suite's report: readable text, JSON, and JUnit XML.

use std::fmt::Write as _;

use serde::Serialize;

use crate::check::{CheckId, CheckResult, Outcome, Severity};

/// The results of one run.
#[derive(Debug, Clone)]
pub struct Report {
    pub url: String,
    pub level: u8,
    pub results: Vec<CheckResult>,
}

/// Counts of one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    pub advisories_passed: usize,
    pub advisories_failed: usize,
}

impl Report {
    pub fn new(url: &str, level: u8, results: Vec<CheckResult>) -> Self {
        Self {
            url: url.to_owned(),
            level,
            results,
        }
    }

    /// The result of `check`.
    pub fn result(&self, check: CheckId) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.check == check)
    }

    /// Whether the level is certified: no required check at or below it failed, and every
    /// required level-2 check that needs the process was judged (a level-1 check may be
    /// skipped when the runtime gave it nothing to inspect; level 2 cannot be taken on trust).
    pub fn passed(&self) -> bool {
        !self.results.iter().any(|r| {
            let required =
                r.check.severity() == Severity::Required && r.check.level() <= self.level;
            // Compaction cannot be forced on a foreign runtime: not seen is not a failure.
            let unjudged = r.check.level() >= 2
                && r.check != CheckId::ManifestLevel2
                && r.check != CheckId::CompactionMetadata
                && matches!(r.outcome, Outcome::Skip(_));
            required && (r.failed() || unjudged)
        })
    }

    /// Ids of the checks that failed (required and advisory).
    pub fn failed_ids(&self) -> Vec<&'static str> {
        self.results
            .iter()
            .filter(|r| r.failed())
            .map(|r| r.check.id())
            .collect()
    }

    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for r in &self.results {
            match (r.check.severity(), &r.outcome) {
                (Severity::Required, Outcome::Pass) => s.passed += 1,
                (Severity::Required, Outcome::Fail(_)) => s.failed += 1,
                (_, Outcome::Skip(_)) => s.skipped += 1,
                (Severity::Advisory, Outcome::Pass) => s.advisories_passed += 1,
                (Severity::Advisory, Outcome::Fail(_)) => s.advisories_failed += 1,
            }
        }
        s
    }

    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "daedalus-conformance: {} (level {})\n\n",
            self.url, self.level
        );
        let width = self
            .results
            .iter()
            .map(|r| r.check.id().len())
            .max()
            .unwrap_or(0);
        for r in &self.results {
            let advisory = r.check.severity() == Severity::Advisory;
            let tag = match (&r.outcome, advisory) {
                (Outcome::Pass, _) => "PASS",
                (Outcome::Fail(_), false) => "FAIL",
                (Outcome::Fail(_), true) => "WARN",
                (Outcome::Skip(_), _) => "SKIP",
            };
            let kind = if advisory { " (advisory)" } else { "" };
            let _ = write!(
                out,
                "  {tag}  {:width$}  {}{kind}",
                r.check.id(),
                r.check.title()
            );
            if let Some(reason) = r.reason() {
                let _ = write!(out, "\n        {:width$}  -> {reason}", "");
            }
            out.push('\n');
        }
        let s = self.summary();
        let verdict = if self.passed() { "PASSED" } else { "FAILED" };
        let _ = write!(
            out,
            "\nlevel {} {verdict}: {} passed, {} failed, {} skipped; advisories: {} passed, {} warned\n",
            self.level, s.passed, s.failed, s.skipped, s.advisories_passed, s.advisories_failed
        );
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        #[derive(Serialize)]
        struct Check<'a> {
            id: &'static str,
            level: u8,
            severity: Severity,
            title: &'static str,
            outcome: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            reason: Option<&'a str>,
        }
        #[derive(Serialize)]
        struct Json<'a> {
            url: &'a str,
            level: u8,
            passed: bool,
            summary: Summary,
            checks: Vec<Check<'a>>,
        }
        let checks = self
            .results
            .iter()
            .map(|r| Check {
                id: r.check.id(),
                level: r.check.level(),
                severity: r.check.severity(),
                title: r.check.title(),
                outcome: match r.outcome {
                    Outcome::Pass => "pass",
                    Outcome::Fail(_) => "fail",
                    Outcome::Skip(_) => "skip",
                },
                reason: r.reason(),
            })
            .collect();
        let json = Json {
            url: &self.url,
            level: self.level,
            passed: self.passed(),
            summary: self.summary(),
            checks,
        };
        serde_json::to_value(json).expect("the report serializes")
    }

    /// The report as JUnit XML: one test case per check; advisory failures are reported in
    /// `system-out`, not as failures.
    pub fn to_junit(&self) -> String {
        let s = self.summary();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites name=\"daedalus-conformance\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
            self.results.len(),
            s.failed,
            s.skipped
        );
        let _ = writeln!(
            out,
            "  <testsuite name=\"level {} at {}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
            self.level,
            xml_escape(&self.url),
            self.results.len(),
            s.failed,
            s.skipped
        );
        for r in &self.results {
            let class = match r.check.severity() {
                Severity::Required => "required",
                Severity::Advisory => "advisory",
            };
            let _ = write!(
                out,
                "    <testcase classname=\"L{}.{class}\" name=\"{}\">",
                r.check.level(),
                r.check.id()
            );
            match (&r.outcome, r.check.severity()) {
                (Outcome::Pass, _) => {}
                (Outcome::Fail(reason), Severity::Required) => {
                    let _ = write!(out, "<failure message=\"{}\"/>", xml_escape(reason));
                }
                (Outcome::Fail(reason), Severity::Advisory) => {
                    let _ = write!(
                        out,
                        "<system-out>advisory: {}</system-out>",
                        xml_escape(reason)
                    );
                }
                (Outcome::Skip(reason), _) => {
                    let _ = write!(out, "<skipped message=\"{}\"/>", xml_escape(reason));
                }
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("  </testsuite>\n</testsuites>\n");
        out
    }
}

pub(crate) fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && !matches!(c, '\n' | '\t') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report::new(
            "http://x",
            1,
            vec![
                CheckResult {
                    check: CheckId::Health,
                    outcome: Outcome::Pass,
                },
                CheckResult {
                    check: CheckId::TaskSchema,
                    outcome: Outcome::Fail("bad <task> & \"id\"".into()),
                },
                CheckResult {
                    check: CheckId::BodyLimit413,
                    outcome: Outcome::Fail("200".into()),
                },
                CheckResult {
                    check: CheckId::FailedMessage,
                    outcome: Outcome::Skip("none".into()),
                },
            ],
        )
    }

    #[test]
    fn a_required_failure_fails_the_run_an_advisory_does_not() {
        let r = report();
        assert!(!r.passed());
        let only_advisory = Report::new("u", 1, vec![r.results[2].clone()]);
        assert!(only_advisory.passed());
    }

    #[test]
    fn junit_escapes_and_keeps_advisories_out_of_failures() {
        let xml = report().to_junit();
        assert!(xml.contains("failures=\"1\""), "{xml}");
        assert!(
            xml.contains("bad &lt;task&gt; &amp; &quot;id&quot;"),
            "{xml}"
        );
        assert!(
            xml.contains("<system-out>advisory: 200</system-out>"),
            "{xml}"
        );
        assert!(xml.contains("<skipped message=\"none\"/>"), "{xml}");
    }

    #[test]
    fn text_and_json_agree() {
        let r = report();
        let text = r.to_text();
        assert!(text.contains("FAIL  L1-TASK-SCHEMA"), "{text}");
        assert!(text.contains("WARN  L1-413-BODY-LIMIT"), "{text}");
        assert!(
            text.contains("level 1 FAILED: 1 passed, 1 failed, 1 skipped"),
            "{text}"
        );
        let json = r.to_json();
        assert_eq!(json["passed"], false);
        assert_eq!(json["checks"][1]["outcome"], "fail");
        assert_eq!(json["summary"]["advisories_failed"], 1);
    }
}
