//! `daedalus-conformance --url URL --level 1`: certify a runtime against the contract.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use daedalus_conformance::{SuiteOptions, run};

/// Black-box conformance suite for the Daedalus runtime contract.
#[derive(Debug, Parser)]
#[command(name = "daedalus-conformance", version)]
struct Cli {
    /// Base URL of the runtime under test.
    #[arg(long, env = "CONFORMANCE_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Conformance level to certify.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=3))]
    level: u8,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also write a JUnit XML report to this file.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Per-request timeout, e.g. 30s.
    #[arg(long, default_value = "30s", value_parser = daedalus_contract::container::parse_duration)]
    timeout: Duration,
    /// Text sent to provoke a failed task.
    #[arg(long)]
    failure_probe: Option<String>,
    /// Text sent to provoke an input-required task.
    #[arg(long)]
    input_probe: Option<String>,
    /// Level 2: the command that starts the runtime under test. The suite runs it with
    /// `sh -c "exec CMD"` and sets A2A_PORT and TERMINATION_GRACE_PERIOD; it reads its
    /// stdout and sends it SIGTERM. Without it, level 2 cannot be certified.
    #[arg(long, value_name = "CMD")]
    exec: Option<String>,
    /// Level 2: text that makes the runtime work for a while; `{duration}` becomes how long
    /// (`2s`). Default: the passthrough directive `***SLEEP {duration} ...`.
    #[arg(long)]
    slow_probe: Option<String>,
    /// Level 2: the TERMINATION_GRACE_PERIOD the drain check starts the runtime with.
    #[arg(long, default_value = "10s", value_parser = daedalus_contract::container::parse_duration)]
    grace: Duration,
    /// Level 3: the most text one context is sent (bytes, or with a unit: 1MiB) to make a
    /// runtime whose manifest declares contextCompaction compact; one that does not by then
    /// fails L3-COMPACTION-METADATA.
    #[arg(long, default_value = "1MiB", value_parser = parse_bytes)]
    compaction_budget: usize,
}

/// `1048576`, `1MiB`, `512KiB`.
fn parse_bytes(value: &str) -> Result<usize, String> {
    let value = value.trim();
    let (number, unit) = value
        .find(|c: char| !c.is_ascii_digit())
        .map_or((value, ""), |i| value.split_at(i));
    let number: usize = number
        .parse()
        .map_err(|_| format!("{value:?} is not a size"))?;
    let unit = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        other => return Err(format!("{other:?} is not a unit (B, KiB, MiB)")),
    };
    number
        .checked_mul(unit)
        .ok_or_else(|| format!("{value:?} is too large"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut options = SuiteOptions::new(&cli.url);
    options.level = cli.level;
    options.timeout = cli.timeout;
    if let Some(p) = cli.failure_probe {
        options.failure_probe = p;
    }
    if let Some(p) = cli.input_probe {
        options.input_probe = p;
    }
    if let Some(p) = cli.slow_probe {
        options.slow_probe = p;
    }
    options.exec = cli.exec;
    options.grace = cli.grace;
    options.compaction_budget = cli.compaction_budget;
    let report = match run(&options).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("daedalus-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    #[expect(clippy::print_stdout, reason = "the report is the program's output")]
    if cli.json {
        println!("{:#}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    if let Some(path) = cli.junit
        && let Err(e) = std::fs::write(&path, report.to_junit())
    {
        eprintln!("daedalus-conformance: cannot write {}: {e}", path.display());
        return ExitCode::from(2);
    }
    if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
