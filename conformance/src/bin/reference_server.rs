//! `reference-server`: a minimal level-1 runtime, written apart from `daedalus-runtime`.
//!
//! It implements exactly the contract's level 1 and nothing more: no body-size limit, no
//! `supportedInterfaces` in its card, no memory of tasks. It echoes text, and obeys the same
//! `***FAIL <reason>` and `***INPUT <question>` directives so the suite can see a failed and
//! an input-required task. It proves the suite certifies the contract, not our runtime.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
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

async fn health() -> Response {
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

async fn send(headers: HeaderMap, body: Bytes) -> Response {
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
    let request: SendMessageRequest = match daedalus_contract::read::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let message = request.message;
    let id = message.effective_task_id().to_owned();
    let context_id = message
        .context_id
        .clone()
        .unwrap_or_else(|| format!("ctx-{id}"));
    let text = message.text();
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
    let app = Router::new()
        .route("/health", get(health))
        .route("/.well-known/agent-card.json", get(card))
        .route("/", post(send))
        .layer(DefaultBodyLimit::disable());
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    eprintln!(
        "reference-server listening on http://{}",
        listener.local_addr()?
    );
    axum::serve(listener, app).await
}
