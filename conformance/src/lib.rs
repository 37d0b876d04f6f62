//! The Daedalus runtime-contract conformance suite.
//!
//! It tests any runtime black-box over HTTP: each check has an id (`L1-HEALTH`), a level, and
//! a one-line reason when it does not pass. Required checks certify the contract itself;
//! advisory checks report on conventions beyond it (A2A v1 card shape, 413, error bodies) and
//! never fail a run. Every body received is validated against the contract's schemas.

pub mod acts;
pub mod check;
pub mod client;
pub mod level1;
pub mod level2;
pub mod level3;
pub mod report;

pub use check::{CheckId, CheckResult, Outcome, Severity};
pub use report::Report;

use std::time::Duration;

/// What to test and how.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// Base URL of the runtime (`http://127.0.0.1:8080`).
    pub url: String,
    /// Highest level to check.
    pub level: u8,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Text sent to provoke a failed task (a runtime that answers it otherwise is fine: the
    /// failed-task check is then skipped).
    pub failure_probe: String,
    /// Text sent to provoke an input-required task.
    pub input_probe: String,
    /// Level 2: the command that starts the runtime under test (run with `sh -c "exec CMD"`,
    /// `A2A_PORT` and `TERMINATION_GRACE_PERIOD` set). Without it, the checks that need the
    /// process are skipped, and level 2 is not certified.
    pub exec: Option<String>,
    /// Level 2: text that makes the runtime work for a while; `{duration}` is replaced by how
    /// long (`2s`).
    pub slow_probe: String,
    /// Level 2: the `TERMINATION_GRACE_PERIOD` the drain check runs the runtime with (the
    /// grace-period check uses a short one).
    pub grace: Duration,
    /// Level 3: the most text (bytes) the compaction check sends one context of a runtime
    /// whose manifest declares `contextCompaction`, waiting for it to compact.
    pub compaction_budget: usize,
}

impl SuiteOptions {
    /// Level-2 options that start the runtime with `command` (see [`SuiteOptions::exec`]).
    pub fn launching(command: impl Into<String>) -> Self {
        let mut options = Self::new("http://launched-by-the-suite");
        options.level = 2;
        options.exec = Some(command.into());
        options
    }

    /// Level-1 options for `url` with the defaults of the command line.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into().trim_end_matches('/').to_owned(),
            level: 1,
            timeout: Duration::from_secs(30),
            failure_probe: "***FAIL conformance probe: please fail this task".to_owned(),
            input_probe: "***INPUT conformance probe: what should I do next?".to_owned(),
            exec: None,
            slow_probe: "***SLEEP {duration} conformance probe: finished slowly".to_owned(),
            grace: Duration::from_secs(10),
            compaction_budget: level3::COMPACTION_BUDGET,
        }
    }
}

/// Why the suite could not run at all (distinct from checks failing).
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("there is no level {0}: the contract has levels 1, 2 and 3")]
    LevelNotAvailable(u8),
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("cannot start the runtime under test")]
    Launch(#[source] level2::LaunchError),
    #[error("cannot make a WORK_DIR for the runtime under test")]
    WorkDir(#[source] std::io::Error),
}

/// Runs every check up to `options.level` and reports. With `exec`, the suite launches the
/// runtime itself and tests that process (its URL replaces `options.url`).
pub async fn run(options: &SuiteOptions) -> Result<Report, SuiteError> {
    if !(1..=3).contains(&options.level) {
        return Err(SuiteError::LevelNotAvailable(options.level));
    }
    if options.level >= 2
        && let Some(command) = &options.exec
    {
        // One workspace for every start of the runtime, so a restart keeps it.
        let work_dir = tempfile::tempdir().map_err(SuiteError::WorkDir)?;
        let launched =
            level2::Launched::start(command, work_dir.path(), options.grace, options.timeout)
                .await
                .map_err(SuiteError::Launch)?;
        let url = launched.url().to_owned();
        let client = client::Probe::new(&url, options.timeout).map_err(SuiteError::Client)?;
        let mut results = level1::run(&client, options).await;
        let mut before_restart = None;
        if options.level >= 3 {
            // Before level 2's checks, which stop the process.
            results.extend(level3::run(&client, options.compaction_budget).await);
            before_restart = Some(level3::SessionBeforeRestart::send(&client).await);
        }
        results.extend(level2::run_launched(&client, launched, work_dir.path(), options).await);
        if let Some(before) = before_restart {
            let resumes = results
                .iter()
                .any(|r| r.check == CheckId::SessionResume && r.passed());
            let outcome = if resumes {
                after_restart(command, work_dir.path(), options, &before).await?
            } else {
                Outcome::Skip("needs L3-SESSION-RESUME to pass".to_owned())
            };
            results.push(CheckResult {
                check: CheckId::SessionRestart,
                outcome,
            });
        }
        return Ok(Report::new(&url, options.level, results));
    }
    let client = client::Probe::new(&options.url, options.timeout).map_err(SuiteError::Client)?;
    let mut results = level1::run(&client, options).await;
    if options.level >= 2 {
        results.extend(level2::run_without_process(&client).await);
    }
    if options.level >= 3 {
        results.extend(level3::run(&client, options.compaction_budget).await);
        results.push(CheckResult {
            check: CheckId::SessionRestart,
            outcome: Outcome::Skip(
                "needs --exec: the suite restarts the runtime it started, keeping WORK_DIR"
                    .to_owned(),
            ),
        });
    }
    Ok(Report::new(&options.url, options.level, results))
}

/// Starts the runtime again in the same `work_dir` and judges the context `before` began.
async fn after_restart(
    command: &str,
    work_dir: &std::path::Path,
    options: &SuiteOptions,
    before: &level3::SessionBeforeRestart,
) -> Result<Outcome, SuiteError> {
    let again =
        match level2::Launched::start(command, work_dir, options.grace, options.timeout).await {
            Ok(again) => again,
            Err(e) => {
                return Ok(Outcome::Fail(format!(
                    "could not start the runtime again: {e}"
                )));
            }
        };
    let client = client::Probe::new(again.url(), options.timeout).map_err(SuiteError::Client)?;
    Ok(before.judge_after_restart(&client).await)
}
