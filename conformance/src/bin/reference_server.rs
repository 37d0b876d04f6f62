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

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// A deliberate level-2 defect (`DEFECT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    None,
    ExitNonZero,
    DropInFlight,
    ServeDuringDrain,
    NonJsonLine,
    IgnoreTraceparent,
}

impl Defect {
    fn from_env() -> Self {
        match std::env::var("DEFECT").as_deref() {
            Ok("exit-nonzero") => Defect::ExitNonZero,
            Ok("drop-in-flight") => Defect::DropInFlight,
            Ok("serve-during-drain") => Defect::ServeDuringDrain,
            Ok("non-json-line") => Defect::NonJsonLine,
            Ok("ignore-traceparent") => Defect::IgnoreTraceparent,
            _ => Defect::None,
        }
    }
}

/// What the handlers share.
#[derive(Debug, Clone)]
struct Shared {
    /// Level 2 is on.
    level2: bool,
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

async fn card() -> Response {
    let card = AgentCard {
        name: "reference-server".into(),
        description: "Minimal level-1 runtime for conformance testing; echoes text.".into(),
        supported_interfaces: Vec::new(),
        provider: None,
        version: env!("CARGO_PKG_VERSION").into(),
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(false),
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
    };
    json(StatusCode::OK, &card)
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
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let is_json = content_type
        .and_then(|ct| ct.split(';').next())
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        );
    }
    let request: SendMessageRequest = match daedalus_contract::read::from_slice(body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let message = request.message;
    let id = message.effective_task_id().to_owned();
    let context_id = message
        .context_id
        .clone()
        .unwrap_or_else(|| format!("ctx-{id}"));
    let mut text = message.text();
    if shared.level2
        && let Some(rest) = text.strip_prefix("***SLEEP ")
    {
        let (how_long, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let how_long = daedalus_contract::container::parse_duration(how_long).unwrap_or_default();
        tokio::select! {
            () = tokio::time::sleep(how_long) => {}
            () = shared.give_up.cancelled() => {
                return error(StatusCode::SERVICE_UNAVAILABLE, "canceled at the end of the grace period");
            }
        }
        text = rest.to_owned();
    }
    let reply = |text: &str| {
        let mut m = Message::new(format!("reply-{id}"), Role::Agent, vec![Part::text(text)]);
        m.task_id = Some(id.clone());
        m.context_id = Some(context_id.clone());
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
        let artifact = Artifact {
            artifact_id: format!("echo-{id}"),
            name: Some("echo".into()),
            description: None,
            parts: vec![Part::text(text)],
            extensions: None,
            metadata: None,
        };
        (TaskState::Completed, None, vec![artifact])
    };
    let task = Task {
        id: id.clone(),
        context_id: Some(context_id.clone()),
        status: TaskStatus {
            state,
            message: status_message,
            timestamp: None,
        },
        artifacts,
        history: None,
        metadata: None,
    };
    json(StatusCode::OK, &task)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("A2A_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(8080);
    let shared = Shared {
        level2: std::env::var("REFERENCE_LEVEL").as_deref() == Ok("2"),
        defect: Defect::from_env(),
        draining: Arc::default(),
        in_flight: Arc::default(),
        give_up: tokio_util::sync::CancellationToken::new(),
    };
    let app = Router::new()
        .route("/health", get(health))
        .route("/.well-known/agent-card.json", get(card))
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
