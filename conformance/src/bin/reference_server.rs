//! `reference-server`: a minimal level-1 runtime, written apart from `daedalus-runtime`.
//!
//! It implements exactly the contract's level 1 and nothing more: no body-size limit, no
//! `supportedInterfaces` in its card, no memory of tasks. It echoes text, and obeys the same
//! `***FAIL <reason>` and `***INPUT <question>` directives so the suite can see a failed and
//! an input-required task. It proves the suite certifies the contract, not our runtime.
//!
//! With `REFERENCE_LEVEL=2` it also does level 2, minimally: JSON lines on stdout (with the
//! trace id of a request's `traceparent`), `***SLEEP <duration> <text>`, and the SIGTERM drain
//! (503 for new work, in-flight work finishes, canceled at `TERMINATION_GRACE_PERIOD`, exit 0).
//! `DEFECT` then breaks one level-2 rule on purpose, for the suite's mutant tests:
//! `exit-nonzero` (after a drain), `drop-in-flight`, `serve-during-drain`, `non-json-line`,
//! `ignore-traceparent`.
//!
//! With `REFERENCE_LEVEL=3` it also does level 3, minimally: `Accept: text/event-stream` gets
//! the whole answer as one SSE body (the task, `working`, the text in two chunks, the final
//! status), the card says `streaming: true`, and each context's messages are kept (in
//! `$WORK_DIR/reference-sessions.json`, so a restart keeps them) and shown in `history` when
//! `configuration.historyLength` asks. Its manifest declares `contextCompaction: true`: a
//! context whose text passes [`COMPACT_AT`] bytes keeps only its last [`KEPT_AFTER`] messages,
//! and the task that made it so reports the compaction in `metadata.compaction`. Its level-3
//! defects: `no-sse` (JSON for an SSE request, and a card that says so), `card-not-streaming`,
//! `no-final` (the last status update is not `final`), `bad-event` (a status update outside the
//! schema), `stream-differs` (a chunk sent twice), `no-resume` (`history` holds only the new
//! message), `forget-on-restart` (contexts kept in memory only), `bad-compaction` (a strategy
//! the contract does not know), `compaction-strings` (counts as strings, and no strategy),
//! `never-compacts` (declares compaction, and never reports one).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use daedalus_contract::{
    AgentCapabilities, AgentCard, AgentSkill, Artifact, ErrorBody, Message, Part, Role,
    SendMessageRequest, Task, TaskState, TaskStatus,
};

fn json(status: StatusCode, body: &impl serde::Serialize) -> Response {
    let bytes = serde_json::to_vec(body).expect("serializes");
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    json(status, &ErrorBody::new(status.as_u16(), message))
}

/// A deliberate level-2 or level-3 defect (`DEFECT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    None,
    ExitNonZero,
    DropInFlight,
    ServeDuringDrain,
    NonJsonLine,
    IgnoreTraceparent,
    NoSse,
    CardNotStreaming,
    NoFinal,
    BadEvent,
    StreamDiffers,
    NoResume,
    ForgetOnRestart,
    BadCompaction,
    CompactionStrings,
    NeverCompacts,
}

/// Bytes of text a context holds before it is compacted (level 3).
const COMPACT_AT: usize = 48 * 1024;
/// Messages a compacted context keeps.
const KEPT_AFTER: usize = 4;

impl Defect {
    fn from_env() -> Self {
        match std::env::var("DEFECT").as_deref() {
            Ok("exit-nonzero") => Defect::ExitNonZero,
            Ok("drop-in-flight") => Defect::DropInFlight,
            Ok("serve-during-drain") => Defect::ServeDuringDrain,
            Ok("non-json-line") => Defect::NonJsonLine,
            Ok("ignore-traceparent") => Defect::IgnoreTraceparent,
            Ok("no-sse") => Defect::NoSse,
            Ok("card-not-streaming") => Defect::CardNotStreaming,
            Ok("no-final") => Defect::NoFinal,
            Ok("bad-event") => Defect::BadEvent,
            Ok("stream-differs") => Defect::StreamDiffers,
            Ok("no-resume") => Defect::NoResume,
            Ok("forget-on-restart") => Defect::ForgetOnRestart,
            Ok("bad-compaction") => Defect::BadCompaction,
            Ok("compaction-strings") => Defect::CompactionStrings,
            Ok("never-compacts") => Defect::NeverCompacts,
            _ => Defect::None,
        }
    }
}

/// Each context's messages, as JSON (level 3), and where they are kept.
#[derive(Debug, Default)]
struct Contexts {
    messages: HashMap<String, Vec<serde_json::Value>>,
    file: Option<PathBuf>,
}

impl Contexts {
    /// The contexts kept in `file`, if it holds any.
    fn load(file: Option<PathBuf>) -> Self {
        let messages = file
            .as_ref()
            .and_then(|f| std::fs::read(f).ok())
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Self { messages, file }
    }

    /// Adds `new` to `context` and writes the file again; returns what the context held before.
    /// Adds `new` to `context`: the messages it held before, and the compaction this made,
    /// if its text passed [`COMPACT_AT`] (`compact`: whether it may compact).
    fn record(
        &mut self,
        context: &str,
        new: Vec<serde_json::Value>,
        compact: bool,
    ) -> (Vec<serde_json::Value>, Option<Compacted>) {
        let kept = self.messages.entry(context.to_owned()).or_default();
        let before = kept.clone();
        kept.extend(new);
        let bytes = |messages: &[serde_json::Value]| -> usize {
            messages.iter().map(|m| m.to_string().len()).sum()
        };
        let mut compacted = None;
        let size = bytes(kept);
        if compact && size > COMPACT_AT && kept.len() > KEPT_AFTER {
            let messages_before = kept.len();
            kept.drain(..kept.len() - KEPT_AFTER);
            compacted = Some(Compacted {
                messages_before,
                messages_after: kept.len(),
                tokens_before: size / 4,
                tokens_after: bytes(kept) / 4,
            });
        }
        if let Some(file) = &self.file
            && let Ok(bytes) = serde_json::to_vec(&self.messages)
            && let Err(e) = std::fs::write(file, bytes)
        {
            eprintln!("cannot keep the contexts in {}: {e}", file.display());
        }
        (before, compacted)
    }
}

/// What a compaction did.
#[derive(Debug, Clone, Copy)]
struct Compacted {
    messages_before: usize,
    messages_after: usize,
    tokens_before: usize,
    tokens_after: usize,
}

/// What the handlers share.
#[derive(Debug, Clone)]
struct Shared {
    /// Level 2 is on.
    level2: bool,
    /// Level 3 is on.
    level3: bool,
    contexts: Arc<Mutex<Contexts>>,
    defect: Defect,
    draining: Arc<AtomicBool>,
    in_flight: Arc<AtomicUsize>,
    /// Fired when the grace period is over.
    give_up: tokio_util::sync::CancellationToken,
}

/// One JSON log line on stdout (level 2 only).
fn log(shared: &Shared, message: &str, trace_id: Option<&str>) {
    if !shared.level2 {
        return;
    }
    let line = serde_json::json!({
        "timestamp": chrono::Utc::now().to_rfc3339(),
        "level": "info",
        "message": message,
        "trace_id": trace_id,
    });
    #[expect(
        clippy::print_stdout,
        reason = "level 2's logs are JSON lines on stdout"
    )]
    {
        println!("{line}");
    }
}

async fn health(State(shared): State<Shared>) -> Response {
    if shared.draining.load(Ordering::SeqCst) {
        return error(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    }
    json(StatusCode::OK, &serde_json::json!({"status": "ok"}))
}

async fn card(State(shared): State<Shared>) -> Response {
    let card = AgentCard {
        name: "reference-server".into(),
        description: "Minimal level-1 runtime for conformance testing; echoes text.".into(),
        supported_interfaces: Vec::new(),
        provider: None,
        version: env!("CARGO_PKG_VERSION").into(),
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(
                shared.level3 && !matches!(shared.defect, Defect::NoSse | Defect::CardNotStreaming),
            ),
            ..Default::default()
        },
        security_schemes: None,
        security_requirements: None,
        default_input_modes: vec!["text".into()],
        default_output_modes: vec!["text".into()],
        skills: vec![AgentSkill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "Echoes the text it is sent.".into(),
            tags: vec!["echo".into()],
            examples: None,
            input_modes: None,
            output_modes: None,
        }],
        icon_url: None,
        signatures: Vec::new(),
    };
    json(StatusCode::OK, &card)
}

/// The manifest, at level 3 only (a level-1 runtime serves none, and need not): the level it
/// reaches and `contextCompaction: true`.
async fn manifest(State(shared): State<Shared>) -> Response {
    if !shared.level3 {
        return error(StatusCode::NOT_FOUND, "no manifest");
    }
    let manifest = daedalus_contract::RuntimeContract {
        contract_version: daedalus_contract::CONTRACT_VERSION.to_owned(),
        runtime: daedalus_contract::ManifestRuntime {
            name: "reference-server".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            description: None,
        },
        server: None,
        capabilities: daedalus_contract::ManifestCapabilities {
            streaming: true,
            trace_context: true,
            graceful_shutdown: true,
            context_compaction: true,
        },
        conformance_level: 3,
    };
    json(StatusCode::OK, &manifest)
}

async fn send(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    if shared.draining.load(Ordering::SeqCst) && shared.defect != Defect::ServeDuringDrain {
        return error(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    }
    shared.in_flight.fetch_add(1, Ordering::SeqCst);
    let response = answer(&shared, &headers, &body).await;
    shared.in_flight.fetch_sub(1, Ordering::SeqCst);
    response
}

async fn answer(shared: &Shared, headers: &HeaderMap, body: &Bytes) -> Response {
    let trace_id = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(|tp| tp.split('-').nth(1))
        .filter(|_| shared.defect != Defect::IgnoreTraceparent);
    log(shared, "task received", trace_id);
    if !is_json(headers) {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        );
    }
    let request: SendMessageRequest = match daedalus_contract::read::from_slice(body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let message = request.message.clone();
    let id = message.effective_task_id().to_owned();
    let context_id = message
        .context_id
        .clone()
        .unwrap_or_else(|| format!("ctx-{id}"));
    let text = match played(shared, message.text()).await {
        Ok(text) => text,
        Err(canceled) => return canceled,
    };
    let mut task = task_for(&id, &context_id, &text);
    if !shared.level3 {
        return json(StatusCode::OK, &task);
    }
    let reply_text = task
        .artifacts
        .first()
        .map(|a| a.parts.iter().filter_map(Part::as_text).collect::<String>())
        .or_else(|| task.status.message.as_ref().map(Message::text))
        .unwrap_or_default();
    remember(
        shared,
        &mut task,
        &message,
        &reply_text,
        request.history_length(),
    );
    let wants_stream = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"));
    if wants_stream && shared.defect != Defect::NoSse {
        return stream(shared.defect, &task);
    }
    json(StatusCode::OK, &task)
}

/// Whether the request's body is JSON, as its `Content-Type` says.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
}

/// Level 2 plays `***SLEEP <duration> <rest>`: the text is `rest`, once the sleep is over; a
/// sleep cut by the end of the grace period answers 503.
async fn played(shared: &Shared, text: String) -> Result<String, Response> {
    let Some(rest) = text.strip_prefix("***SLEEP ").filter(|_| shared.level2) else {
        return Ok(text);
    };
    let (how_long, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let how_long = daedalus_contract::container::parse_duration(how_long).unwrap_or_default();
    tokio::select! {
        () = tokio::time::sleep(how_long) => Ok(rest.to_owned()),
        () = shared.give_up.cancelled() => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "canceled at the end of the grace period",
        )),
    }
}

/// The task `text` makes: `***FAIL <reason>` fails, `***INPUT <question>` asks, anything
/// else completes with its echo.
fn task_for(id: &str, context_id: &str, text: &str) -> Task {
    let reply = |text: &str| {
        let mut m = Message::new(format!("reply-{id}"), Role::Agent, vec![Part::text(text)]);
        m.task_id = Some(id.to_owned());
        m.context_id = Some(context_id.to_owned());
        m
    };
    let (state, status_message, artifacts) = if let Some(reason) = text.strip_prefix("***FAIL") {
        (TaskState::Failed, Some(reply(reason.trim())), Vec::new())
    } else if let Some(question) = text.strip_prefix("***INPUT") {
        (
            TaskState::InputRequired,
            Some(reply(question.trim())),
            Vec::new(),
        )
    } else {
        let artifact = Artifact::text(format!("echo-{id}"), text).named("echo");
        (TaskState::Completed, None, vec![artifact])
    };
    Task {
        id: id.to_owned(),
        context_id: Some(context_id.to_owned()),
        status: TaskStatus {
            state,
            message: status_message,
            timestamp: None,
        },
        artifacts,
        history: None,
        metadata: None,
    }
}

/// Level 3: keeps the exchange in its context, fills `history` when asked, and reports the
/// compaction of a context that outgrew [`COMPACT_AT`].
fn remember(
    shared: &Shared,
    task: &mut Task,
    message: &Message,
    reply_text: &str,
    history_length: Option<u32>,
) {
    let context = task.context_id.clone().unwrap_or_default();
    let sent = serde_json::to_value(message).unwrap_or_default();
    let reply = serde_json::json!({
        "messageId": format!("reply-{}", task.id), "role": "agent",
        "parts": [{"text": reply_text}], "contextId": context,
    });
    let (before, compacted) = shared
        .contexts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .record(
            &context,
            vec![sent.clone(), reply],
            shared.defect != Defect::NeverCompacts,
        );
    if let Some(n) = history_length {
        let mut history = if shared.defect == Defect::NoResume {
            Vec::new()
        } else {
            before.clone()
        };
        history.push(sent);
        let skip = history
            .len()
            .saturating_sub(usize::try_from(n).unwrap_or(usize::MAX));
        task.history =
            serde_json::from_value(serde_json::Value::Array(history.split_off(skip))).ok();
    }
    if let Some(c) = compacted {
        let report = match shared.defect {
            Defect::BadCompaction => serde_json::json!({"strategy": "squash",
                "messagesBefore": c.messages_before, "messagesAfter": c.messages_after,
                "tokensBefore": c.tokens_before, "tokensAfter": c.tokens_after}),
            Defect::CompactionStrings => serde_json::json!({
                "messagesBefore": c.messages_before.to_string(),
                "messagesAfter": c.messages_after.to_string(),
                "tokensBefore": c.tokens_before.to_string(),
                "tokensAfter": c.tokens_after.to_string()}),
            _ => serde_json::json!({"strategy": "truncate",
                "messagesBefore": c.messages_before, "messagesAfter": c.messages_after,
                "tokensBefore": c.tokens_before, "tokensAfter": c.tokens_after}),
        };
        let mut metadata = daedalus_contract::Metadata::new();
        metadata.insert("compaction".into(), report);
        task.metadata = Some(metadata);
    }
}

/// Level 3: the task as one SSE body: the task submitted, `working`, the text of each artifact
/// in two chunks, the final status.
fn stream(defect: Defect, task: &Task) -> Response {
    let (id, context) = (&task.id, task.context_id.clone().unwrap_or_default());
    let status_update = |status: serde_json::Value, last: bool| {
        serde_json::json!({"statusUpdate": {"taskId": id, "contextId": context,
            "status": status, "final": last}})
    };
    let mut events = vec![
        serde_json::json!({"task": {"id": id, "contextId": context,
            "status": {"state": "submitted"}}}),
        status_update(serde_json::json!({"state": "working"}), false),
    ];
    if defect == Defect::BadEvent {
        events.push(status_update(
            serde_json::json!({"state": "thinking"}),
            false,
        ));
    }
    for artifact in &task.artifacts {
        let text: String = artifact.parts.iter().filter_map(Part::as_text).collect();
        let middle = text
            .char_indices()
            .nth(text.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        let (head, tail) = text.split_at(middle);
        let mut chunks = vec![(head, false, false), (tail, true, true)];
        if defect == Defect::StreamDiffers {
            chunks.insert(1, (head, true, false));
        }
        for (part, append, last_chunk) in chunks {
            events.push(serde_json::json!({"artifactUpdate": {"taskId": id,
                "contextId": context, "append": append, "lastChunk": last_chunk,
                "artifact": {"artifactId": artifact.artifact_id, "name": artifact.name,
                    "parts": [{"text": part}]}}}));
        }
    }
    let mut last = status_update(
        serde_json::to_value(&task.status).unwrap_or_default(),
        defect != Defect::NoFinal,
    );
    if let Some(metadata) = &task.metadata {
        last["statusUpdate"]["metadata"] = serde_json::Value::Object(metadata.clone());
    }
    events.push(last);
    let mut body = String::new();
    for event in &events {
        let _ = write!(body, "data: {event}\n\n");
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/event-stream")],
        body,
    )
        .into_response()
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("A2A_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(8080);
    let level: u8 = std::env::var("REFERENCE_LEVEL")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or(1);
    let defect = Defect::from_env();
    let kept_in = std::env::var_os("WORK_DIR")
        .filter(|_| level >= 3 && defect != Defect::ForgetOnRestart)
        .map(|dir| PathBuf::from(dir).join("reference-sessions.json"));
    let shared = Shared {
        level2: level >= 2,
        level3: level >= 3,
        contexts: Arc::new(Mutex::new(Contexts::load(kept_in))),
        defect,
        draining: Arc::default(),
        in_flight: Arc::default(),
        give_up: tokio_util::sync::CancellationToken::new(),
    };
    let app = Router::new()
        .route("/health", get(health))
        .route("/.well-known/agent-card.json", get(card))
        .route("/.well-known/runtime-contract.json", get(manifest))
        .route("/", post(send))
        .layer(DefaultBodyLimit::disable())
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    eprintln!(
        "reference-server listening on http://{}",
        listener.local_addr()?
    );
    if !shared.level2 {
        return axum::serve(listener, app).await;
    }
    if shared.defect == Defect::NonJsonLine {
        #[expect(
            clippy::print_stdout,
            reason = "the defect: a plain line among the JSON ones"
        )]
        {
            println!("reference-server starting (plain text)");
        }
    }
    log(&shared, "ready", None);
    tokio::spawn(async move { axum::serve(listener, app).await });
    std::process::exit(drain_on_sigterm(&shared).await)
}

/// Level 2's shutdown: on SIGTERM, refuse new work, let in-flight work finish within
/// `TERMINATION_GRACE_PERIOD`, cancel the rest, and answer the exit code.
async fn drain_on_sigterm(shared: &Shared) -> i32 {
    let grace = std::env::var("TERMINATION_GRACE_PERIOD")
        .ok()
        .and_then(|g| daedalus_contract::container::parse_duration(&g).ok())
        .unwrap_or(Duration::from_secs(30));
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        term.recv().await;
    }
    log(shared, "draining", None);
    if shared.defect == Defect::DropInFlight {
        return 0;
    }
    shared.draining.store(true, Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + grace;
    let mut finished = true;
    while shared.in_flight.load(Ordering::SeqCst) > 0 {
        if tokio::time::Instant::now() >= deadline {
            shared.give_up.cancel();
            finished = false;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Let the last answers leave.
    tokio::time::sleep(Duration::from_millis(200)).await;
    log(shared, "stopped", None);
    // The `exit-nonzero` defect fails a drain that went well.
    i32::from(finished && shared.defect == Defect::ExitNonZero)
}
