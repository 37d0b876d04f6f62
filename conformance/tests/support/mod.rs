//! Test support: servers for the suite to judge.
//!
//! [`mutant`] starts a small, correct level-1 runtime with exactly one deliberate defect; the
//! suite must name that defect's check and no other.

#![allow(
    dead_code,
    reason = "each test file uses a different part of the support module"
)]

pub(crate) mod acts_mutant;

use std::net::SocketAddr;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use daedalus_contract::card_signing;
use serde_json::{Value, json};

/// One deliberate departure from the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Defect {
    /// No defect: the baseline every mutant departs from.
    None,
    /// The Task id is always the messageId, even when a taskId was sent.
    IgnoresTaskId,
    /// Without a taskId, the Task id is a fresh id instead of the messageId.
    InventsTaskId,
    /// Completed tasks come back without artifacts.
    NoArtifact,
    /// Failed tasks come back without status.message.
    FailedWithoutMessage,
    /// The card has no skills.
    CardWithoutSkills,
    /// The card has no version (a schema violation).
    CardWithoutVersion,
    /// Malformed JSON gets 200.
    AcceptsMalformedJson,
    /// A text/plain body is accepted.
    AcceptsAnyContentType,
    /// The health body is plain text.
    HealthNotJson,
    /// The health check answers 503.
    HealthUnavailable,
    /// The Task body is not JSON.
    TaskNotJson,
    /// Tasks come back `submitted` instead of finished.
    TaskStillSubmitted,
    /// The card was changed after it was signed: its signature does not verify.
    CardSignatureBroken,
    /// The card is not signed (an advisory, not a failure).
    CardUnsigned,
}

impl Defect {
    pub(crate) const MUTANTS: [Defect; 13] = [
        Defect::IgnoresTaskId,
        Defect::InventsTaskId,
        Defect::NoArtifact,
        Defect::FailedWithoutMessage,
        Defect::CardWithoutSkills,
        Defect::CardWithoutVersion,
        Defect::AcceptsMalformedJson,
        Defect::AcceptsAnyContentType,
        Defect::HealthNotJson,
        Defect::HealthUnavailable,
        Defect::TaskNotJson,
        Defect::TaskStillSubmitted,
        Defect::CardSignatureBroken,
    ];
}

/// Starts a mutant on a free port and returns its base URL. The server lives as long as the
/// test's runtime.
pub(crate) async fn mutant(defect: Defect) -> String {
    let app = Router::new()
        .route("/health", get(health))
        .route("/.well-known/agent-card.json", get(card))
        .route("/.well-known/jwks.json", get(jwks))
        .route("/", post(send))
        .layer(DefaultBodyLimit::disable())
        .with_state(defect);
    serve(app).await
}

/// Serves `app` on a free loopback port; returns the base URL.
pub(crate) async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("binds a free port");
    let addr = listener.local_addr().expect("has an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, message: &str) -> Response {
    json_response(
        status,
        &json!({"error": {"code": status.as_u16(), "message": message}}),
    )
}

async fn health(State(defect): State<Defect>) -> Response {
    match defect {
        Defect::HealthNotJson => "ok".into_response(),
        Defect::HealthUnavailable => error(StatusCode::SERVICE_UNAVAILABLE, "not ready"),
        _ => json_response(StatusCode::OK, &json!({"status": "ok"})),
    }
}

async fn card(State(defect): State<Defect>) -> Response {
    let mut card = json!({
        "name": "mutant",
        "description": "a runtime with one defect",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://127.0.0.1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": false},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "echo", "name": "Echo", "description": "Echoes", "tags": ["echo"]}]
    });
    let object = card.as_object_mut().expect("the card is an object");
    match defect {
        Defect::CardWithoutSkills => drop(object.remove("skills")),
        Defect::CardWithoutVersion => drop(object.remove("version")),
        _ => {}
    }
    if defect == Defect::CardUnsigned {
        return json_response(StatusCode::OK, &card);
    }
    let key = signing_key();
    let mut signed = card_signing::sign_card(&card, &[&key]).expect("the card signs");
    if defect == Defect::CardSignatureBroken {
        signed["description"] = json!("changed after it was signed");
    }
    json_response(StatusCode::OK, &signed)
}

/// The key the mutants sign their cards with (a test key of the contract crate).
fn signing_key() -> card_signing::SigningKey {
    let pem = include_bytes!("../../../schemas/tests/card_keys/es256.pem");
    card_signing::SigningKey::read(pem, Some("mutant"), None).expect("the test key reads")
}

async fn jwks() -> Response {
    let key = signing_key();
    json_response(
        StatusCode::OK,
        &serde_json::to_value(card_signing::jwks(&[&key])).expect("a JWKS"),
    )
}

async fn send(State(defect): State<Defect>, headers: HeaderMap, body: Bytes) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let json_type = content_type.is_some_and(|ct| ct.starts_with("application/json"));
    if !json_type && defect != Defect::AcceptsAnyContentType {
        return error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "send application/json");
    }
    if body.len() > 1024 * 1024 {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "over the 1 MiB limit");
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(_) if defect == Defect::AcceptsMalformedJson => {
            return json_response(StatusCode::OK, &json!({"ok": true}));
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("malformed JSON: {e}")),
    };
    let Some(message) = request.get("message") else {
        return error(StatusCode::BAD_REQUEST, "missing message");
    };
    let message_id = message["messageId"].as_str().unwrap_or_default().to_owned();
    let task_id = match (defect, message["taskId"].as_str()) {
        (Defect::IgnoresTaskId, _) => message_id.clone(),
        (Defect::InventsTaskId, None) => format!("invented-{message_id}"),
        (_, Some(t)) => t.to_owned(),
        (_, None) => message_id.clone(),
    };
    let context_id = message["contextId"]
        .as_str()
        .map_or_else(|| format!("ctx-{task_id}"), str::to_owned);
    let text = message["parts"][0]["text"].as_str().unwrap_or_default();
    let reply = |t: &str| json!({"messageId": format!("r-{message_id}"), "role": "agent", "parts": [{"text": t}]});
    let mut task = json!({"id": task_id, "contextId": context_id});
    if let Some(reason) = text.strip_prefix("***FAIL") {
        task["status"] = json!({"state": "failed", "message": reply(reason.trim())});
        if defect == Defect::FailedWithoutMessage {
            task["status"] = json!({"state": "failed"});
        }
    } else if let Some(question) = text.strip_prefix("***INPUT") {
        task["status"] = json!({"state": "input-required", "message": reply(question.trim())});
    } else {
        task["status"] = json!({"state": "completed"});
        if defect != Defect::NoArtifact {
            task["artifacts"] = json!([{"artifactId": "a1", "parts": [{"text": text}]}]);
        }
    }
    if defect == Defect::TaskStillSubmitted {
        task["status"] = json!({"state": "submitted"});
        task.as_object_mut().expect("object").remove("artifacts");
    }
    if defect == Defect::TaskNotJson {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain")],
            "done",
        )
            .into_response();
    }
    json_response(StatusCode::OK, &task)
}
