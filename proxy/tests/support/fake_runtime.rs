//! A controllable runtime: echoes by default, or answers with a status, hangs, is slow, fails
//! a number of times first, goes unhealthy or away. It records every call (task id, trace
//! headers, start and end) so tests can check what reached it and whether a task ever ran on
//! two workers at once.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use daedalus_contract::{SendMessageRequest, read};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// How the fake answers `POST /`.
#[derive(Debug, Clone)]
pub enum Mode {
    /// A completed task echoing the text (text `sleep:<ms>` sleeps first; `***FAIL x` fails;
    /// `***INPUT q` asks).
    Echo,
    /// Every task gets this status with an error body.
    Status(u16),
    /// Never answers.
    Hang,
    /// Answers like `Echo` after this long.
    Slow(Duration),
    /// The first `n` calls get `status`, then `Echo`.
    FailFirst(usize, u16),
    /// Every task gets 200 with this body, `{task_id}` replaced by the task's id.
    Body(&'static str),
    /// The first `n` calls are refused for a spent budget (429, `Retry-After: 1`), then
    /// `Echo`; `usize::MAX` refuses every call.
    OverBudgetFirst(usize),
}

/// One `POST /` as the fake saw it.
#[derive(Debug, Clone)]
pub struct Call {
    pub task_id: String,
    pub message_id: String,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
    pub started: Instant,
    pub ended: Option<Instant>,
}

#[derive(Debug)]
pub struct FakeState {
    pub mode: Mutex<Mode>,
    pub healthy: AtomicBool,
    /// `GET /health` requests answered.
    pub health_probes: AtomicUsize,
    pub card: Mutex<Value>,
    pub manifest: Mutex<Option<Value>>,
    pub calls: Mutex<Vec<Call>>,
    active: Mutex<HashSet<String>>,
    /// Times a task id was started while already running.
    pub overlaps: AtomicUsize,
    failures_left: AtomicUsize,
}

pub struct FakeRuntime {
    pub url: String,
    pub state: Arc<FakeState>,
    addr: SocketAddr,
    server: Option<JoinHandle<()>>,
}

impl FakeRuntime {
    pub async fn start(mode: Mode) -> Self {
        let failures = if let Mode::FailFirst(n, _) = mode {
            n
        } else {
            0
        };
        let state = Arc::new(FakeState {
            mode: Mutex::new(mode),
            healthy: AtomicBool::new(true),
            health_probes: AtomicUsize::new(0),
            card: Mutex::new(json!({
                "name": "fake", "description": "a fake runtime", "version": "1",
                "capabilities": {}, "defaultInputModes": ["text"], "defaultOutputModes": ["text"],
                "skills": [{"id": "echo", "name": "Echo", "description": "Echoes", "tags": ["echo"]}]
            })),
            manifest: Mutex::new(None),
            calls: Mutex::new(Vec::new()),
            active: Mutex::new(HashSet::new()),
            overlaps: AtomicUsize::new(0),
            failures_left: AtomicUsize::new(failures),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let addr = listener.local_addr().expect("addr");
        let mut fake = Self {
            url: format!("http://{addr}"),
            state,
            addr,
            server: None,
        };
        fake.serve(listener);
        fake
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let app = Router::new()
            .route("/health", get(health))
            .route("/.well-known/agent-card.json", get(card))
            .route("/.well-known/runtime-contract.json", get(manifest))
            .route("/", post(send))
            .with_state(Arc::clone(&self.state));
        self.server = Some(tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }));
    }

    /// Stops listening: connections are refused until [`FakeRuntime::come_back`].
    pub fn go_away(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }

    /// Listens again on the same port.
    pub async fn come_back(&mut self) {
        let mut tries = 0;
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if tries < 50 => {
                    tries += 1;
                    tracing::debug!(error = %e, "port not free yet");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("cannot listen on {} again: {e}", self.addr),
            }
        };
        self.serve(listener);
    }

    pub fn set_mode(&self, mode: Mode) {
        if let Mode::FailFirst(n, _) = mode {
            self.state.failures_left.store(n, Ordering::SeqCst);
        }
        *self.state.mode.lock().expect("lock") = mode;
    }

    /// Waits until the proxy has probed `/health` `n` more times.
    pub async fn wait_health_probes(&self, n: usize) {
        let target = self.state.health_probes.load(Ordering::SeqCst) + n;
        daedalus_test_kit::wait_until(
            &format!("{n} more health probes"),
            std::time::Duration::from_secs(10),
            || async { self.state.health_probes.load(Ordering::SeqCst) >= target },
        )
        .await;
    }

    pub fn set_healthy(&self, healthy: bool) {
        self.state.healthy.store(healthy, Ordering::SeqCst);
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.calls.lock().expect("lock").clone()
    }

    pub fn calls_for(&self, task_id: &str) -> usize {
        self.calls().iter().filter(|c| c.task_id == task_id).count()
    }
}

async fn health(State(s): State<Arc<FakeState>>) -> Response {
    s.health_probes.fetch_add(1, Ordering::SeqCst);
    if s.healthy.load(Ordering::SeqCst) {
        axum::Json(json!({"status": "ok"})).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"error": {"code": 503, "message": "not ready"}})),
        )
            .into_response()
    }
}

async fn card(State(s): State<Arc<FakeState>>) -> Response {
    axum::Json(s.card.lock().expect("lock").clone()).into_response()
}

async fn manifest(State(s): State<Arc<FakeState>>) -> Response {
    match s.manifest.lock().expect("lock").clone() {
        Some(m) => axum::Json(m).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

fn error(status: u16) -> Response {
    let code = StatusCode::from_u16(status).expect("valid status");
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"error": {"code": status, "message": format!("fake says {status}")}}).to_string(),
    )
        .into_response()
}

async fn send(State(s): State<Arc<FakeState>>, headers: HeaderMap, body: Bytes) -> Response {
    let Ok(request) = read::from_slice::<SendMessageRequest>(&body) else {
        return error(400);
    };
    let task_id = request.message.effective_task_id().to_owned();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let index = {
        let mut calls = s.calls.lock().expect("lock");
        calls.push(Call {
            task_id: task_id.clone(),
            message_id: request.message.message_id.clone(),
            traceparent: header("traceparent"),
            tracestate: header("tracestate"),
            started: Instant::now(),
            ended: None,
        });
        calls.len() - 1
    };
    if !s.active.lock().expect("lock").insert(task_id.clone()) {
        s.overlaps.fetch_add(1, Ordering::SeqCst);
    }
    let response = answer(&s, &request, &task_id).await;
    s.active.lock().expect("lock").remove(&task_id);
    s.calls.lock().expect("lock")[index].ended = Some(Instant::now());
    response
}

async fn answer(s: &FakeState, request: &SendMessageRequest, task_id: &str) -> Response {
    let mode = s.mode.lock().expect("lock").clone();
    match mode {
        Mode::Status(code) => return error(code),
        Mode::Hang => std::future::pending::<()>().await,
        Mode::Slow(d) => tokio::time::sleep(d).await,
        Mode::FailFirst(_, code) => {
            let left = s.failures_left.load(Ordering::SeqCst);
            if left > 0 {
                s.failures_left.store(left - 1, Ordering::SeqCst);
                return error(code);
            }
        }
        Mode::Body(template) => {
            return (
                [(header::CONTENT_TYPE, "application/json")],
                template.replace("{task_id}", task_id),
            )
                .into_response();
        }
        Mode::OverBudgetFirst(n) => {
            let refused = s.calls.lock().expect("lock").len();
            if refused <= n {
                return (
                    StatusCode::TOO_MANY_REQUESTS,
                    [
                        (header::CONTENT_TYPE, "application/json"),
                        (header::RETRY_AFTER, "1"),
                    ],
                    json!({"error": {"code": 429, "message": "the budget of tenant \"acme\" allows 1 tokens per minute (tokens_per_minute), and it is spent; retry in 1 s"}}).to_string(),
                )
                    .into_response();
            }
        }
        Mode::Echo => {}
    }
    let text = request.message.text();
    if let Some(ms) = text
        .strip_prefix("sleep:")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
    {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    let context = request
        .message
        .context_id
        .clone()
        .unwrap_or_else(|| format!("ctx-{task_id}"));
    let task = if let Some(reason) = text.strip_prefix("***FAIL") {
        json!({"id": task_id, "contextId": context, "status": {"state": "failed", "message": {"messageId": "f", "role": "agent", "parts": [{"text": reason.trim()}]}}})
    } else if let Some(q) = text.strip_prefix("***INPUT") {
        json!({"id": task_id, "contextId": context, "status": {"state": "input-required", "message": {"messageId": "q", "role": "agent", "parts": [{"text": q.trim()}]}}})
    } else {
        json!({"id": task_id, "contextId": context, "status": {"state": "completed"}, "artifacts": [{"artifactId": "a", "parts": [{"text": text}]}]})
    };
    axum::Json(task).into_response()
}
