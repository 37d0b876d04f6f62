//! Level 2 of the contract: the SIGTERM drain within the grace period, 503 while draining,
//! structured (JSON) logs, W3C trace context, and a manifest that says so.
//!
//! Most of it can only be seen from outside the process: the suite starts the runtime itself
//! (`--exec`), reads its stdout and signals it. How it asks for a slow task: the text of
//! [`SuiteOptions::slow_probe`], `{duration}` replaced (for `daedalus-runtime`, the
//! passthrough model's `***SLEEP` directive). Without `--exec`, those checks are skipped with
//! the reason, and a level-2 run is not certified.

mod launch;

use std::time::Duration;

use serde_json::{Value, json};

pub use launch::{LaunchError, Launched};

use crate::SuiteOptions;
use crate::check::{CheckId, CheckResult, Outcome};
use crate::client::Probe;

/// How long the in-flight task of the drain check works.
const SLOW_TASK: Duration = Duration::from_secs(2);
/// How long the suite lets a task get going before it signals.
const LET_IT_START: Duration = Duration::from_millis(500);
/// The grace period of the grace-period check.
const SHORT_GRACE: Duration = Duration::from_secs(1);
/// How long past the grace period a process may take to exit (cancellation settling).
const EXIT_MARGIN: Duration = Duration::from_secs(10);
/// How long after its answer the suite waits for a request's log lines.
const LOG_WAIT: Duration = Duration::from_secs(2);

const NEEDS_EXEC: &str =
    "needs --exec: the suite must start the runtime to signal it and read its stdout";

fn result(check: CheckId, outcome: Outcome) -> CheckResult {
    CheckResult { check, outcome }
}

/// Level 2 without a process: the manifest is judged; the rest is skipped.
pub async fn run_without_process(client: &Probe) -> Vec<CheckResult> {
    let mut results: Vec<CheckResult> = [
        CheckId::SigtermDrain,
        CheckId::GraceCancel,
        CheckId::JsonLogs,
        CheckId::TraceContext,
    ]
    .into_iter()
    .map(|check| result(check, Outcome::Skip(NEEDS_EXEC.to_owned())))
    .collect();
    results.push(result(CheckId::ManifestLevel2, manifest(client).await));
    results
}

/// Level 2 against the runtime the suite started: trace context, then the drain (which stops
/// it), then a second start for the grace period, then the logs of both.
pub async fn run_launched(
    client: &Probe,
    mut launched: Launched,
    work_dir: &std::path::Path,
    options: &SuiteOptions,
) -> Vec<CheckResult> {
    let manifest = manifest(client).await;
    let trace = trace_context(client, &launched).await;
    let drain = sigterm_drain(client, &mut launched, options).await;
    let mut lines = launched.lines();
    drop(launched);
    let grace = match &options.exec {
        Some(command) => {
            match Launched::start(command, work_dir, SHORT_GRACE, options.timeout).await {
                Ok(mut second) => {
                    let outcome = grace_cancel(&mut second, options).await;
                    lines.extend(second.lines());
                    outcome
                }
                Err(e) => Outcome::Fail(format!("could not start the runtime a second time: {e}")),
            }
        }
        None => Outcome::Skip(NEEDS_EXEC.to_owned()),
    };
    vec![
        result(CheckId::SigtermDrain, drain),
        result(CheckId::GraceCancel, grace),
        result(CheckId::JsonLogs, json_logs(&lines)),
        result(CheckId::TraceContext, trace),
        result(CheckId::ManifestLevel2, manifest),
    ]
}

fn task(text: &str) -> Value {
    json!({"message": {
        "messageId": format!("l2-{}", uuid::Uuid::new_v4()),
        "role": "user",
        "parts": [{"text": text}]
    }})
}

fn slow(options: &SuiteOptions, how_long: Duration) -> String {
    options.slow_probe.replace(
        "{duration}",
        &daedalus_contract::container::format_duration(how_long),
    )
}

/// A `POST /` with a fresh `traceparent`; then its trace id must show up on stdout.
async fn trace_context(client: &Probe, launched: &Launched) -> Outcome {
    let trace_id = uuid::Uuid::new_v4().simple().to_string();
    let span_id = &uuid::Uuid::new_v4().simple().to_string()[..16];
    let traceparent = format!("00-{trace_id}-{span_id}-01");
    let answer = client
        .post_json_with(
            &task("conformance probe: trace me"),
            &[("traceparent", &traceparent)],
        )
        .await;
    if let Err(why) = answer.json_200() {
        return Outcome::Skip(format!("the traced task was not answered: {why}"));
    }
    let deadline = tokio::time::Instant::now() + LOG_WAIT;
    loop {
        if launched.lines().iter().any(|l| l.contains(&trace_id)) {
            return Outcome::Pass;
        }
        if tokio::time::Instant::now() >= deadline {
            return Outcome::Fail(format!(
                "no line on stdout carries the trace id {trace_id} of the request's traceparent"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A slow task in flight, SIGTERM, a new task (503), the slow one's answer, exit 0 in time.
async fn sigterm_drain(client: &Probe, launched: &mut Launched, options: &SuiteOptions) -> Outcome {
    let in_flight = {
        let client = client.clone();
        let body = task(&slow(options, SLOW_TASK));
        tokio::spawn(async move { client.post_json(&body).await })
    };
    tokio::time::sleep(LET_IT_START).await;
    if !launched.terminate() {
        return Outcome::Fail("could not send SIGTERM".to_owned());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let late = client.post_json(&task("conformance probe: too late")).await;
    let finished = match in_flight.await {
        Ok(exchange) => exchange,
        Err(e) => return Outcome::Fail(format!("the suite lost its in-flight request: {e}")),
    };
    let exit = launched.wait_exit(launched.grace + EXIT_MARGIN).await;
    match finished.json_200() {
        Ok(task) if task["status"]["state"] == "completed" => {}
        Ok(task) => {
            return Outcome::Fail(format!(
                "the in-flight task ended {} instead of completing",
                task["status"]["state"]
            ));
        }
        Err(why) => return Outcome::Fail(format!("the in-flight task was dropped: {why}")),
    }
    match late.answer() {
        Ok(answer) if answer.status == 503 => {}
        Ok(answer) => {
            return Outcome::Fail(format!(
                "a new task during the drain got {} instead of 503",
                answer.status
            ));
        }
        Err(why) => {
            return Outcome::Fail(format!("a new task during the drain got no 503: {why}"));
        }
    }
    match exit {
        Some(status) if status.success() => Outcome::Pass,
        Some(status) => Outcome::Fail(format!("the process exited with {status} after SIGTERM")),
        None => Outcome::Fail(format!(
            "the process had not exited {} after SIGTERM",
            daedalus_contract::container::format_duration(launched.grace + EXIT_MARGIN)
        )),
    }
}

/// A task longer than the grace period, SIGTERM: the process still exits 0, soon after it.
async fn grace_cancel(launched: &mut Launched, options: &SuiteOptions) -> Outcome {
    let client = match Probe::new(launched.url(), options.timeout) {
        Ok(c) => c,
        Err(e) => return Outcome::Fail(format!("cannot build the HTTP client: {e}")),
    };
    let long = task(&slow(options, Duration::from_mins(2)));
    let stuck = tokio::spawn(async move { client.post_json(&long).await });
    tokio::time::sleep(LET_IT_START).await;
    if !launched.terminate() {
        return Outcome::Fail("could not send SIGTERM".to_owned());
    }
    let limit = launched.grace + EXIT_MARGIN;
    let exit = launched.wait_exit(limit).await;
    stuck.abort();
    match exit {
        Some(status) if status.success() => Outcome::Pass,
        Some(status) => Outcome::Fail(format!(
            "with work left past the grace period the process exited with {status}"
        )),
        None => Outcome::Fail(format!(
            "with work left past the grace period the process had not exited after {}",
            daedalus_contract::container::format_duration(limit)
        )),
    }
}

/// Every stdout line is a JSON object, and there is at least one.
fn json_logs(lines: &[String]) -> Outcome {
    if lines.is_empty() {
        return Outcome::Fail("nothing was written to stdout".to_owned());
    }
    for (i, line) in lines.iter().enumerate() {
        if !serde_json::from_str::<Value>(line).is_ok_and(|v| v.is_object()) {
            let shown: String = line.chars().take(120).collect();
            return Outcome::Fail(format!(
                "stdout line {} is not a JSON object: {shown}",
                i + 1
            ));
        }
    }
    Outcome::Pass
}

/// The manifest, when served, claims level 2 or more and trace context.
async fn manifest(client: &Probe) -> Outcome {
    let exchange = client.get("/.well-known/runtime-contract.json").await;
    let answer = match exchange.answer() {
        Ok(a) => a,
        Err(why) => return Outcome::Skip(format!("no manifest: {why}")),
    };
    if answer.status == 404 {
        return Outcome::Skip("no manifest is served".to_owned());
    }
    let manifest = match exchange.json_200() {
        Ok(m) => m,
        Err(why) => return Outcome::Fail(why),
    };
    let level = manifest["conformanceLevel"].as_u64().unwrap_or(0);
    if level < 2 {
        return Outcome::Fail(format!("the manifest declares conformanceLevel {level}"));
    }
    if manifest["capabilities"]["traceContext"] != true {
        return Outcome::Fail("the manifest does not declare capabilities.traceContext".to_owned());
    }
    Outcome::Pass
}
