//! Level 1 of the contract: the three endpoints, the task rules and the response codes.
//!
//! The suite first sends its probes (health, card, a handful of `POST /` requests built to
//! exercise one rule each, and the malformed ones), keeping every exchange; then each check
//! judges the evidence it needs. A check whose evidence is missing because another check
//! already failed is skipped, so one defect fails one check.

mod discovery;
mod errors;
mod tasks;

use serde_json::{Value, json};

use crate::SuiteOptions;
use crate::check::{CheckId, CheckResult, Outcome};
use crate::client::{Exchange, Probe};

/// A `POST /` the suite sent, with the ids it chose.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    pub(crate) message_id: String,
    pub(crate) task_id: Option<String>,
    pub(crate) context_id: Option<String>,
    pub(crate) exchange: Exchange,
}

/// Everything the probes brought back.
#[derive(Debug)]
pub(crate) struct Evidence {
    pub(crate) health: Exchange,
    pub(crate) card: Exchange,
    /// The key sets the card's signatures name (each `jku`, else `/.well-known/jwks.json`),
    /// by URL; none when the card is not signed.
    pub(crate) card_keys: Vec<(String, Exchange)>,
    pub(crate) manifest: Exchange,
    /// A plain message with messageId, taskId and contextId.
    pub(crate) ping: Sent,
    /// A plain message with only a messageId.
    pub(crate) bare: Sent,
    /// The failure probe.
    pub(crate) failure: Sent,
    /// The input probe, and the answer sent if it asked for input.
    pub(crate) input: Sent,
    pub(crate) input_answer: Option<Sent>,
    pub(crate) malformed: Exchange,
    pub(crate) not_a_request: Exchange,
    pub(crate) text_plain: Exchange,
    pub(crate) charset: Exchange,
    pub(crate) oversized: Exchange,
}

/// Bytes in the oversized probe: over the 16 MiB a runtime typically accepts.
const OVERSIZED_BYTES: usize = 17 * 1024 * 1024;

fn new_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

fn request(message_id: &str, task_id: Option<&str>, context_id: Option<&str>, text: &str) -> Value {
    let mut message = json!({"messageId": message_id, "role": "user", "parts": [{"text": text}]});
    if let Some(t) = task_id {
        message["taskId"] = json!(t);
    }
    if let Some(c) = context_id {
        message["contextId"] = json!(c);
    }
    json!({ "message": message })
}

/// A valid request whose one text part makes it [`OVERSIZED_BYTES`] long.
fn oversized_request() -> Vec<u8> {
    let head = format!(
        r#"{{"message":{{"messageId":"{}","role":"user","parts":[{{"text":""#,
        new_id("conformance-big")
    );
    let tail = r#""}]}}"#;
    let mut body = Vec::with_capacity(OVERSIZED_BYTES + head.len() + tail.len());
    body.extend_from_slice(head.as_bytes());
    body.resize(body.len() + OVERSIZED_BYTES, b'x');
    body.extend_from_slice(tail.as_bytes());
    body
}

async fn send(
    probe: &Probe,
    task_id: Option<String>,
    context_id: Option<String>,
    text: &str,
) -> Sent {
    let message_id = new_id("conformance-msg");
    let body = request(&message_id, task_id.as_deref(), context_id.as_deref(), text);
    let exchange = probe.post_json(&body).await;
    Sent {
        message_id,
        task_id,
        context_id,
        exchange,
    }
}

async fn gather(probe: &Probe, options: &SuiteOptions) -> Evidence {
    let health = probe.get("/health").await;
    let card = probe.get("/.well-known/agent-card.json").await;
    let card_keys = discovery::gather_card_keys(probe, &card).await;
    let manifest = probe.get("/.well-known/runtime-contract.json").await;
    let ping = send(
        probe,
        Some(new_id("conformance-task")),
        Some(new_id("conformance-ctx")),
        "conformance ping: reply with anything",
    )
    .await;
    let bare = send(probe, None, None, "conformance ping without a task id").await;
    let failure = send(
        probe,
        Some(new_id("conformance-fail")),
        None,
        &options.failure_probe,
    )
    .await;
    let input = send(
        probe,
        Some(new_id("conformance-input")),
        None,
        &options.input_probe,
    )
    .await;
    let input_answer = match tasks::read_task(&input.exchange) {
        Ok(task) if task.status.state == daedalus_contract::TaskState::InputRequired => {
            Some(send(probe, input.task_id.clone(), None, "conformance answer").await)
        }
        _ => None,
    };
    let valid = request(&new_id("conformance-msg"), None, None, "content type probe").to_string();
    let malformed = probe
        .post("{\"message\": {\"messageId\": ", Some("application/json"))
        .await;
    let not_a_request = probe.post_json(&json!({"hello": "world"})).await;
    let text_plain = probe.post(valid.clone(), Some("text/plain")).await;
    let charset = probe
        .post(valid, Some("application/json; charset=utf-8"))
        .await;
    let oversized = probe
        .post(oversized_request(), Some("application/json"))
        .await;
    Evidence {
        health,
        card,
        card_keys,
        manifest,
        ping,
        bare,
        failure,
        input,
        input_answer,
        malformed,
        not_a_request,
        text_plain,
        charset,
        oversized,
    }
}

/// Runs every level-1 check against the runtime behind `probe`.
pub async fn run(probe: &Probe, options: &SuiteOptions) -> Vec<CheckResult> {
    let evidence = gather(probe, options).await;
    let mut results: Vec<CheckResult> = Vec::new();
    for check in CheckId::ALL.into_iter().filter(|c| c.level() == 1) {
        let outcome = judge(check, &evidence, &results);
        results.push(CheckResult { check, outcome });
    }
    results
}

fn judge(check: CheckId, e: &Evidence, earlier: &[CheckResult]) -> Outcome {
    let passed = |id: CheckId| earlier.iter().any(|r| r.check == id && r.passed());
    let verdict = match check {
        CheckId::Health => discovery::health(e),
        CheckId::CardFetch => discovery::card_fetch(e),
        CheckId::CardSchema => discovery::card_schema(e),
        CheckId::CardSkill => discovery::card_skill(e),
        CheckId::CardA2aV1 => discovery::card_a2a_v1(e),
        CheckId::CardSignature => discovery::card_signature(e),
        CheckId::CardSigned => discovery::card_signed(e),
        CheckId::Manifest => discovery::manifest(e),
        CheckId::TaskSchema => tasks::schema(e),
        CheckId::TaskState => tasks::state(e),
        CheckId::TaskIdFromTaskId => tasks::id_from_task_id(e),
        CheckId::TaskIdFromMessageId => tasks::id_from_message_id(e),
        CheckId::CompletedArtifact => tasks::completed_artifact(e),
        CheckId::FailedMessage => tasks::failed_message(e),
        CheckId::ContextId => tasks::context_id(e),
        CheckId::InputContinue if !passed(CheckId::TaskIdFromTaskId) => Err(Outcome::Skip(
            "needs L1-TASK-ID-FROM-TASKID to pass".to_owned(),
        )),
        CheckId::InputContinue => tasks::input_continue(e),
        CheckId::Malformed400 => errors::status_is(&e.malformed, 400),
        CheckId::ContentType415 => errors::status_is(&e.text_plain, 415),
        CheckId::NotARequest400 => errors::status_is(&e.not_a_request, 400),
        CheckId::Charset => errors::status_is(&e.charset, 200),
        CheckId::BodyLimit413 => errors::status_is(&e.oversized, 413),
        CheckId::ErrorBody => errors::error_bodies(e),
        CheckId::SigtermDrain
        | CheckId::GraceCancel
        | CheckId::JsonLogs
        | CheckId::TraceContext
        | CheckId::ManifestLevel2 => Err(skip("a level-2 check; level 2 judges it")),
        CheckId::SseContentType
        | CheckId::SseOrder
        | CheckId::SseSchema
        | CheckId::SseRebuild
        | CheckId::CardStreaming
        | CheckId::SessionResume
        | CheckId::SessionRestart
        | CheckId::CompactionMetadata => Err(skip("a level-3 check; level 3 judges it")),
    };
    match verdict {
        Ok(()) => Outcome::Pass,
        Err(outcome) => outcome,
    }
}

/// A check's verdict: `Ok` passes; `Err` carries a failure or a skip.
pub(crate) type Verdict = Result<(), Outcome>;

pub(crate) fn fail(reason: impl Into<String>) -> Outcome {
    Outcome::Fail(reason.into())
}

pub(crate) fn skip(reason: impl Into<String>) -> Outcome {
    Outcome::Skip(reason.into())
}
