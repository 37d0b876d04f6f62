//! The Daedalus runtime-contract conformance suite.
//!
//! It tests any runtime black-box over HTTP: each check has an id (`L1-HEALTH`), a level, and
//! a one-line reason when it does not pass. Required checks certify the contract itself;
//! advisory checks report on conventions beyond it (A2A v1 card shape, 413, error bodies) and
//! never fail a run. Every body received is validated against the contract's schemas.

pub mod check;
pub mod client;
pub mod level1;
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
}

impl SuiteOptions {
    /// Level-1 options for `url` with the defaults of the command line.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into().trim_end_matches('/').to_owned(),
            level: 1,
            timeout: Duration::from_secs(30),
            failure_probe: "***FAIL conformance probe: please fail this task".to_owned(),
            input_probe: "***INPUT conformance probe: what should I do next?".to_owned(),
        }
    }
}

/// Why the suite could not run at all (distinct from checks failing).
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("level {0} checks are not part of this build; use --level 1")]
    LevelNotAvailable(u8),
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
}

/// Runs every check up to `options.level` and reports.
pub async fn run(options: &SuiteOptions) -> Result<Report, SuiteError> {
    if options.level != 1 {
        return Err(SuiteError::LevelNotAvailable(options.level));
    }
    let client = client::Probe::new(&options.url, options.timeout).map_err(SuiteError::Client)?;
    let results = level1::run(&client, options).await;
    Ok(Report::new(&options.url, options.level, results))
}
