//! Level 3 of the contract: SSE streaming (`Accept: text/event-stream`), a card that says so,
//! session resume, and compaction reported in `metadata.compaction`.
//!
//! How each is triggered black-box:
//!
//! - **SSE**: one plain message sent with `Accept: text/event-stream`; the whole stream is kept
//!   and judged for its content type ([`CheckId::SseContentType`]), its order (`task` first,
//!   one `statusUpdate` with `final: true`, last: [`CheckId::SseOrder`]) and every event's
//!   schema ([`CheckId::SseSchema`]). The same request (a fresh `messageId`) is then sent
//!   without streaming, and the stream, rebuilt with the contract's rules
//!   ([`daedalus_contract::TaskRebuilder`]), must give its state and artifacts' parts
//!   ([`CheckId::SseRebuild`]; ids are the runtime's own and are not compared).
//! - **The card** says `capabilities.streaming: true` exactly when the SSE answer was one
//!   ([`CheckId::CardStreaming`]).
//! - **Session resume**: two tasks in one new context, the second asking for
//!   `configuration.historyLength: 10`; its `history` must hold the first task's message (by
//!   `messageId`, or by its text) ([`CheckId::SessionResume`]).
//! - **Across a restart** (`--exec` only): the first task of another context goes to the runtime
//!   before level 2's checks stop it; the suite then starts it again with the same `WORK_DIR`
//!   and sends the second ([`CheckId::SessionRestart`], [`SessionBeforeRestart`]).
//! - **Compaction** ([`CheckId::CompactionMetadata`]): when the manifest declares
//!   `capabilities.contextCompaction: true`, one new context is sent messages of
//!   [`COMPACTION_CHUNK`] bytes of text, up to the budget ([`COMPACTION_BUDGET`] by default),
//!   until a Task reports `metadata.compaction`; a runtime that declares compaction and never
//!   reports it within the budget fails. Every report seen (the drive's, and any the other
//!   probes brought back) must have its five fields right: `strategy` `summarize` or
//!   `truncate`, and four integer counts. A runtime that does not declare compaction is judged
//!   on the reports it happens to give; none is a skip that says so.

use std::fmt::Write as _;

use daedalus_contract::{Schema, StreamEvent, Task, TaskRebuilder, read};
use serde_json::{Value, json};

use crate::check::{CheckId, CheckResult, Outcome};
use crate::client::{Exchange, Probe};

const PROBE_TEXT: &str = "conformance stream probe: reply with anything";

/// The text of each message that drives a context toward compaction, in bytes.
pub const COMPACTION_CHUNK: usize = 32 * 1024;
/// The most text one context is sent by default before a runtime that declares compaction
/// must have compacted it.
pub const COMPACTION_BUDGET: usize = 1 << 20;

fn result(check: CheckId, outcome: Outcome) -> CheckResult {
    CheckResult { check, outcome }
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

fn message(message_id: &str, context_id: Option<&str>, text: &str) -> Value {
    let mut message = json!({"messageId": message_id, "role": "user", "parts": [{"text": text}]});
    if let Some(context) = context_id {
        message["contextId"] = json!(context);
    }
    message
}

/// Sends the level-3 probes and judges them; `compaction_budget` bounds the text the compaction
/// check sends one context.
pub async fn run(probe: &Probe, compaction_budget: usize) -> Vec<CheckResult> {
    let streamed = probe
        .post_stream(&json!({"message": message(&new_id("conformance-sse"), None, PROBE_TEXT)}))
        .await;
    let plain = probe
        .post_json(&json!({"message": message(&new_id("conformance-sse"), None, PROBE_TEXT)}))
        .await;
    let card = probe.get("/.well-known/agent-card.json").await;
    let context = new_id("conformance-resume");
    let first_id = new_id("conformance-first");
    let first_text = format!("conformance resume: remember {first_id}");
    let first = probe
        .post_json(&json!({"message": message(&first_id, Some(&context), &first_text)}))
        .await;
    let second = second_task(probe, &context).await;

    let content_type = sse_content_type(&streamed);
    let streams = matches!(content_type, Outcome::Pass);
    let events = parsed_events(&streamed);
    let mut results = vec![result(CheckId::SseContentType, content_type)];
    results.push(result(CheckId::SseOrder, order(streams, &events)));
    results.push(result(CheckId::SseSchema, schema(streams, &events)));
    results.push(result(
        CheckId::SseRebuild,
        rebuild(streams, &events, &plain),
    ));
    results.push(result(
        CheckId::CardStreaming,
        card_streaming(&card, streams),
    ));
    results.push(result(
        CheckId::SessionResume,
        session_resume(answered(&first), &second, &first_id, &first_text),
    ));
    let mut seen = events
        .iter()
        .filter_map(|e| e.as_ref().ok())
        .cloned()
        .collect::<Vec<_>>();
    seen.extend(
        [&plain, &first, &second]
            .iter()
            .filter_map(|e| e.json_200().ok()),
    );
    let drive = if declares_compaction(probe).await {
        Some(drive_compaction(probe, compaction_budget).await)
    } else {
        None
    };
    results.push(result(
        CheckId::CompactionMetadata,
        compaction(&seen, drive),
    ));
    results
}

/// Whether the runtime's manifest declares `capabilities.contextCompaction: true`.
async fn declares_compaction(probe: &Probe) -> bool {
    probe
        .get("/.well-known/runtime-contract.json")
        .await
        .json_200()
        .is_ok_and(|m| m["capabilities"]["contextCompaction"] == true)
}

/// `n`-th filler of [`COMPACTION_CHUNK`] bytes: distinct words, so no runtime can fold it.
fn filler(n: usize) -> String {
    let mut text = format!("conformance compaction filler {n}:");
    let mut word = 0usize;
    while text.len() < COMPACTION_CHUNK {
        let _ = write!(text, " w{n}x{word}");
        word += 1;
    }
    text
}

/// Sends one new context messages until a Task reports `metadata.compaction` (the Task), or
/// `budget` bytes went without one (why that fails).
async fn drive_compaction(probe: &Probe, budget: usize) -> Result<Value, String> {
    let context = new_id("conformance-compaction");
    let messages = budget.div_ceil(COMPACTION_CHUNK).max(1);
    for n in 0..messages {
        let sent = probe
            .post_json(&json!({"message": message(&new_id("conformance-compact"), Some(&context), &filler(n))}))
            .await;
        let task = sent
            .json_200()
            .map_err(|e| format!("message {} of the compaction drive: {e}", n + 1))?;
        if task["metadata"].get("compaction").is_some() {
            return Ok(task);
        }
    }
    Err(format!(
        "the manifest declares contextCompaction, but {messages} messages ({} KiB of text) in          one context brought no metadata.compaction",
        messages * COMPACTION_CHUNK / 1024
    ))
}

fn sse_content_type(streamed: &Exchange) -> Outcome {
    let answer = match streamed.answer() {
        Ok(a) => a,
        Err(e) => return Outcome::Fail(e),
    };
    if answer.status != 200 {
        return Outcome::Fail(format!("{} answered {}", streamed.request, answer.status));
    }
    if !answer.is_event_stream() {
        return Outcome::Fail(format!(
            "{} answered Content-Type {:?}",
            streamed.request,
            answer.content_type.as_deref().unwrap_or("(none)")
        ));
    }
    Outcome::Pass
}

/// Each event's data, parsed as JSON (or why not).
fn parsed_events(streamed: &Exchange) -> Vec<Result<Value, String>> {
    let Ok(answer) = streamed.answer() else {
        return Vec::new();
    };
    if !answer.is_event_stream() {
        return Vec::new();
    }
    answer
        .sse_data()
        .into_iter()
        .map(|data| serde_json::from_str(&data).map_err(|e| format!("{e}: {data:.60}")))
        .collect()
}

const NO_STREAM: &str = "no stream to judge (L3-SSE-CONTENT-TYPE failed)";

fn order(streams: bool, events: &[Result<Value, String>]) -> Outcome {
    if !streams {
        return Outcome::Skip(NO_STREAM.to_owned());
    }
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            Ok(v) if v.get("task").is_some() => "task",
            Ok(v) if v["statusUpdate"]["final"] == true => "final",
            Ok(v) if v.get("statusUpdate").is_some() => "status",
            Ok(v) if v.get("artifactUpdate").is_some() => "artifact",
            _ => "other",
        })
        .collect();
    if kinds.first() != Some(&"task") {
        return Outcome::Fail(format!(
            "the first event is {:?}, not a task",
            kinds.first()
        ));
    }
    let finals = kinds.iter().filter(|k| **k == "final").count();
    if finals != 1 {
        return Outcome::Fail(format!(
            "{finals} statusUpdate events with final: true, not 1"
        ));
    }
    if kinds.last() != Some(&"final") {
        return Outcome::Fail(format!(
            "events came after the final statusUpdate: {:?}",
            &kinds[kinds.iter().position(|k| *k == "final").unwrap_or(0) + 1..]
        ));
    }
    Outcome::Pass
}

fn schema(streams: bool, events: &[Result<Value, String>]) -> Outcome {
    if !streams {
        return Outcome::Skip(NO_STREAM.to_owned());
    }
    if events.is_empty() {
        return Outcome::Fail("the stream held no event".to_owned());
    }
    for (i, event) in events.iter().enumerate() {
        let event = match event {
            Ok(v) => v,
            Err(e) => return Outcome::Fail(format!("event {i} is not JSON: {e}")),
        };
        if let Err(e) = Schema::StreamEvent.validate(event) {
            return Outcome::Fail(format!("event {i} is not a valid stream event: {e}"));
        }
    }
    Outcome::Pass
}

fn rebuild(streams: bool, events: &[Result<Value, String>], plain: &Exchange) -> Outcome {
    if !streams {
        return Outcome::Skip(NO_STREAM.to_owned());
    }
    let mut rebuilder = TaskRebuilder::new();
    for event in events.iter().filter_map(|e| e.as_ref().ok()) {
        let Ok(event) = read::from_value::<StreamEvent>(event.clone()) else {
            return Outcome::Skip("an event is not a stream event (L3-SSE-SCHEMA)".to_owned());
        };
        if let Err(e) = rebuilder.apply(&event) {
            return Outcome::Fail(format!("the stream does not rebuild to one task: {e}"));
        }
    }
    let Some(rebuilt) = rebuilder.into_task() else {
        return Outcome::Skip("the stream held no task (L3-SSE-ORDER)".to_owned());
    };
    let plain: Task = match plain.json_200().map(read::from_value::<Task>) {
        Ok(Ok(task)) => task,
        Ok(Err(e)) => return Outcome::Skip(format!("the plain answer is not a Task: {e}")),
        Err(e) => return Outcome::Skip(format!("no plain answer to compare: {e}")),
    };
    if rebuilt.status.state != plain.status.state {
        return Outcome::Fail(format!(
            "the stream ends {} but the same request without streaming ends {}",
            rebuilt.status.state, plain.status.state
        ));
    }
    let parts = |task: &Task| -> Vec<Vec<daedalus_contract::Part>> {
        task.artifacts.iter().map(|a| a.parts.clone()).collect()
    };
    if parts(&rebuilt) != parts(&plain) {
        return Outcome::Fail(format!(
            "the stream rebuilds to artifacts {:?}, the plain answer has {:?}",
            parts(&rebuilt),
            parts(&plain)
        ));
    }
    Outcome::Pass
}

fn card_streaming(card: &Exchange, streams: bool) -> Outcome {
    let card = match card.json_200() {
        Ok(c) => c,
        Err(e) => return Outcome::Skip(format!("no card to read (L1-CARD-FETCH): {e}")),
    };
    let says = card["capabilities"]["streaming"] == true;
    match (says, streams) {
        (true, true) | (false, false) => Outcome::Pass,
        (true, false) => {
            Outcome::Fail("the card says streaming: true, but POST / did not stream".to_owned())
        }
        (false, true) => Outcome::Fail(
            "POST / streams, but the card does not say capabilities.streaming: true".to_owned(),
        ),
    }
}

/// Whether a task was answered with a Task (or why not).
fn answered(exchange: &Exchange) -> Result<(), String> {
    exchange.json_200().map(|_| ())
}

/// A context's second task, asking for its history.
async fn second_task(probe: &Probe, context: &str) -> Exchange {
    probe
        .post_json(&json!({
            "message": message(&new_id("conformance-second"), Some(context), "what did I say?"),
            "configuration": {"historyLength": 10},
        }))
        .await
}

/// The first task of a context, sent before the suite restarts the runtime it started.
#[derive(Debug)]
pub struct SessionBeforeRestart {
    context: String,
    first_id: String,
    first_text: String,
    answered: Result<(), String>,
}

impl SessionBeforeRestart {
    /// Sends the first task of a new context.
    pub async fn send(probe: &Probe) -> Self {
        let context = new_id("conformance-restart");
        let first_id = new_id("conformance-before-restart");
        let first_text = format!("conformance restart: remember {first_id}");
        let first = probe
            .post_json(&json!({"message": message(&first_id, Some(&context), &first_text)}))
            .await;
        Self {
            context,
            first_id,
            first_text,
            answered: answered(&first),
        }
    }

    /// Sends the second task to the runtime started again, and judges its history.
    pub async fn judge_after_restart(&self, probe: &Probe) -> Outcome {
        let second = second_task(probe, &self.context).await;
        session_resume(
            self.answered.clone(),
            &second,
            &self.first_id,
            &self.first_text,
        )
    }
}

fn session_resume(
    first: Result<(), String>,
    second: &Exchange,
    first_id: &str,
    first_text: &str,
) -> Outcome {
    if let Err(e) = first {
        return Outcome::Skip(format!("the first task of the context got no Task: {e}"));
    }
    let second = match second.json_200() {
        Ok(t) => t,
        Err(e) => return Outcome::Fail(format!("the second task of the context: {e}")),
    };
    let Some(history) = second["history"].as_array() else {
        return Outcome::Fail(
            "the second task of a context carries no history (configuration.historyLength: 10)"
                .to_owned(),
        );
    };
    let has_first = history.iter().any(|m| {
        m["messageId"] == first_id
            || m["parts"]
                .as_array()
                .is_some_and(|parts| parts.iter().any(|p| p["text"] == first_text))
    });
    if has_first {
        Outcome::Pass
    } else {
        Outcome::Fail(format!(
            "the second task's history ({} messages) does not hold the first task's message",
            history.len()
        ))
    }
}

/// Judges every compaction report seen, and the drive's when the manifest declared compaction
/// (`drive`: `None` when it did not).
fn compaction(seen: &[Value], drive: Option<Result<Value, String>>) -> Outcome {
    let mut seen = seen.to_vec();
    match drive {
        Some(Ok(task)) => seen.push(task),
        Some(Err(why)) => return Outcome::Fail(why),
        None => {}
    }
    let found: Vec<&Value> = seen
        .iter()
        .filter_map(|v| {
            let metadata = v
                .get("task")
                .map(|t| &t["metadata"])
                .or_else(|| v.get("statusUpdate").map(|u| &u["metadata"]))
                .unwrap_or(&v["metadata"]);
            metadata.get("compaction")
        })
        .collect();
    if found.is_empty() {
        return Outcome::Skip(
            "no metadata.compaction was seen: a black-box suite cannot make a foreign runtime \
             compact; what would be checked is its five fields wherever it appears"
                .to_owned(),
        );
    }
    for compaction in found {
        let strategy_ok = matches!(
            compaction["strategy"].as_str(),
            Some("summarize" | "truncate")
        );
        let counts_ok = [
            "messagesBefore",
            "messagesAfter",
            "tokensBefore",
            "tokensAfter",
        ]
        .iter()
        .all(|k| compaction[*k].as_u64().is_some());
        if !strategy_ok || !counts_ok {
            return Outcome::Fail(format!(
                "metadata.compaction is not {{strategy: summarize|truncate, messagesBefore, \
                 messagesAfter, tokensBefore, tokensAfter (integers)}}: {compaction}"
            ));
        }
    }
    Outcome::Pass
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(values: &[&Value]) -> Vec<Result<Value, String>> {
        values.iter().map(|v| Ok((*v).clone())).collect()
    }

    #[test]
    fn the_order_check_wants_the_task_first_and_one_final_last() {
        let task = json!({"task": {"id": "t", "contextId": "c", "status": {"state": "submitted"}}});
        let last = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "completed"}, "final": true}});
        let working = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "working"}, "final": false}});
        assert_eq!(order(true, &events(&[&task, &last])), Outcome::Pass);
        assert!(matches!(
            order(true, &events(&[&working, &last])),
            Outcome::Fail(_)
        ));
        assert!(matches!(
            order(true, &events(&[&task, &last, &working])),
            Outcome::Fail(_)
        ));
        assert!(matches!(order(true, &events(&[&task])), Outcome::Fail(_)));
        assert!(matches!(order(false, &[]), Outcome::Skip(_)));
    }

    #[test]
    fn compaction_metadata_is_judged_where_it_appears_and_skipped_when_absent() {
        let good = json!({"metadata": {"compaction": {"strategy": "truncate", "messagesBefore": 9, "messagesAfter": 4, "tokensBefore": 900, "tokensAfter": 400}}});
        let bad = json!({"metadata": {"compaction": {"strategy": "forget", "messagesBefore": 9}}});
        assert_eq!(compaction(std::slice::from_ref(&good), None), Outcome::Pass);
        assert!(matches!(compaction(&[bad], None), Outcome::Fail(_)));
        assert!(matches!(
            compaction(&[json!({"id": "t"})], None),
            Outcome::Skip(_)
        ));
        // Declared: the drive's report is judged, and none at all fails.
        assert_eq!(compaction(&[], Some(Ok(good))), Outcome::Pass);
        let strings = json!({"metadata": {"compaction": {"messagesBefore": "9",
            "messagesAfter": "4", "tokensBefore": "900", "tokensAfter": "400"}}});
        assert!(matches!(
            compaction(&[], Some(Ok(strings))),
            Outcome::Fail(_)
        ));
        assert!(matches!(
            compaction(&[], Some(Err("never".into()))),
            Outcome::Fail(why) if why == "never"
        ));
    }
}
