//! Router tests: the A2A face without a socket.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::Response;
use daedalus_contract::{ErrorBody, Schema, Task, TaskState, read};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::*;
use crate::agents::agent_loop::{Agent, AgentOutcome, AgentRequest, Passthrough};
use crate::config::Config;

fn config() -> Config {
    Config::for_agent("tester", "127.0.0.1:8080".parse().unwrap())
}

pub(super) fn state_with(agent: Arc<dyn Agent>, tweak: impl FnOnce(&mut Config)) -> A2aFace {
    let mut config = config();
    tweak(&mut config);
    let state = starting(&config, agent);
    state.core().readiness().set_ready();
    state
}

/// The A2A face of `agent`, its runtime still starting.
fn starting(config: &Config, agent: Arc<dyn Agent>) -> A2aFace {
    let fleet = crate::agents::fleet::Fleet::single(&config.agent.name, agent);
    let core = crate::lifecycle::startup::build_core(config, fleet, None);
    crate::lifecycle::startup::a2a_face(config, core, config.listen).unwrap()
}

pub(super) fn passthrough() -> A2aFace {
    state_with(Arc::new(Passthrough), |_| {})
}

async fn call(state: &A2aFace, req: Request<Body>) -> (StatusCode, Value, Response<()>) {
    let response = router(state.clone()).oneshot(req).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        })
    };
    (parts.status, value, Response::from_parts(parts, ()))
}

fn post(body: impl Into<Body>, content_type: Option<&str>) -> Request<Body> {
    let mut b = Request::post("/");
    if let Some(ct) = content_type {
        b = b.header(header::CONTENT_TYPE, ct);
    }
    b.body(body.into()).unwrap()
}

fn send_body(message: &Value) -> Body {
    Body::from(json!({ "message": message }).to_string())
}

fn user(message_id: &str, text: &str) -> Value {
    json!({"messageId": message_id, "role": "user", "parts": [{"text": text}]})
}

/// POSTs a message and returns the Task, checking it against the contract schema.
async fn send(state: &A2aFace, message: Value) -> Task {
    send_with(state, json!({ "message": message })).await
}

async fn send_with(state: &A2aFace, request: Value) -> Task {
    let (status, body, _) = call(state, post(request.to_string(), Some("application/json"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    Schema::Task
        .validate(&body)
        .unwrap_or_else(|e| panic!("{body}: {e}"));
    read::from_value(body).unwrap()
}

/// Expects an error status with the contract's error body.
async fn expect_error(state: &A2aFace, req: Request<Body>, expected: StatusCode) -> String {
    let (status, body, _) = call(state, req).await;
    assert_eq!(status, expected, "{body}");
    Schema::Error
        .validate(&body)
        .unwrap_or_else(|e| panic!("{body}: {e}"));
    let error: ErrorBody = serde_json::from_value(body).unwrap();
    assert_eq!(error.error.code, expected.as_u16());
    error.error.message
}

#[tokio::test]
async fn health_follows_readiness() {
    let state = state_with(Arc::new(Passthrough), |_| {});
    let get = || Request::get("/health").body(Body::empty()).unwrap();
    let (status, body, _) = call(&state, get()).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));

    let starting = starting(&config(), Arc::new(Passthrough));
    expect_error(&starting, get(), StatusCode::SERVICE_UNAVAILABLE).await;

    state.core().readiness().set_draining();
    expect_error(&state, get(), StatusCode::SERVICE_UNAVAILABLE).await;
}

#[tokio::test]
async fn agent_card_is_valid_cacheable_and_has_a_skill() {
    let state = passthrough();
    let get = || Request::get("/.well-known/agent-card.json");
    let (status, card, response) = call(&state, get().body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    Schema::AgentCard.validate(&card).unwrap();
    Schema::A2aV1AgentCard.validate(&card).unwrap();
    assert_eq!(card["name"], "tester");
    assert_eq!(card["skills"][0]["id"], "chat");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "http://127.0.0.1:8080/"
    );
    let headers = response.headers();
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    assert!(
        headers[header::CACHE_CONTROL]
            .to_str()
            .unwrap()
            .contains("max-age")
    );
    let etag = headers[header::ETAG].clone();
    let last_modified = headers[header::LAST_MODIFIED].to_str().unwrap().to_owned();
    assert!(last_modified.ends_with(" GMT"), "{last_modified}");

    let revalidate = get()
        .header(header::IF_NONE_MATCH, etag)
        .body(Body::empty())
        .unwrap();
    let (status, body, _) = call(&state, revalidate).await;
    assert_eq!((status, body), (StatusCode::NOT_MODIFIED, Value::Null));

    // By date: a copy as new as the card is current; an older one is not.
    let since = |date: &str| {
        get()
            .header(header::IF_MODIFIED_SINCE, date)
            .body(Body::empty())
            .unwrap()
    };
    let (status, _, _) = call(&state, since(&last_modified)).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    let (status, card_again, _) = call(&state, since("Sun, 06 Nov 1994 08:49:37 GMT")).await;
    assert_eq!((status, card_again), (StatusCode::OK, card));
}

#[tokio::test]
async fn manifest_declares_level_three_of_contract_v1_with_every_capability() {
    let manifest_of = |state: A2aFace| async move {
        let req = Request::get("/.well-known/runtime-contract.json")
            .body(Body::empty())
            .unwrap();
        let (status, manifest, _) = call(&state, req).await;
        assert_eq!(status, StatusCode::OK);
        Schema::RuntimeContract.validate(&manifest).unwrap();
        manifest
    };
    let manifest = manifest_of(passthrough()).await;
    assert_eq!(manifest["contractVersion"], "v1");
    assert_eq!(manifest["conformanceLevel"], 3);
    for capability in ["traceContext", "streaming", "gracefulShutdown"] {
        assert_eq!(manifest["capabilities"][capability], true, "{capability}");
    }
    // The passthrough model never compacts, so it does not say it does; a model's agent does.
    assert_eq!(manifest["capabilities"]["contextCompaction"], false);
    let on_a_model = state_with(Arc::new(Passthrough), |c| {
        c.agent.model = crate::config::deployment::ModelRef::OpenAi("gpt".into());
    });
    let manifest = manifest_of(on_a_model).await;
    assert_eq!(manifest["capabilities"]["contextCompaction"], true);
}

#[tokio::test]
async fn task_id_comes_from_task_id_else_message_id() {
    let state = passthrough();
    let mut with_task = user("m-1", "hello");
    with_task["taskId"] = json!("t-1");
    let task = send(&state, with_task).await;
    assert_eq!(task.id, "t-1");
    assert_eq!(task.status.state, TaskState::Completed);
    assert_eq!(task.artifacts[0].parts[0].as_text(), Some("hello"));

    let task = send(&state, user("m-2", "hi")).await;
    assert_eq!(task.id, "m-2");
}

#[tokio::test]
async fn context_id_is_echoed_or_generated() {
    let state = passthrough();
    let mut with_context = user("m-1", "x");
    with_context["contextId"] = json!("ctx-42");
    assert_eq!(
        send(&state, with_context).await.context_id.as_deref(),
        Some("ctx-42")
    );
    let a = send(&state, user("m-2", "x")).await.context_id.unwrap();
    let b = send(&state, user("m-3", "x")).await.context_id.unwrap();
    assert!(!a.is_empty() && a != b, "fresh contexts: {a} {b}");
}

#[tokio::test]
async fn fail_directive_gives_a_failed_task_with_its_reason() {
    let task = send(&passthrough(), user("m-1", "***FAIL disk is full")).await;
    assert_eq!(task.status.state, TaskState::Failed);
    assert_eq!(task.status.message.unwrap().text(), "disk is full");
    assert!(task.artifacts.is_empty());
}

#[tokio::test]
async fn input_required_then_the_answer_continues_the_same_task() {
    let state = passthrough();
    let mut ask = user("m-1", "***INPUT Which branch?");
    ask["taskId"] = json!("t-7");
    let first = send(&state, ask).await;
    assert_eq!(first.status.state, TaskState::InputRequired);
    assert_eq!(
        first.status.message.as_ref().unwrap().text(),
        "Which branch?"
    );

    let mut answer = user("m-2", "main");
    answer["taskId"] = json!("t-7");
    let request = json!({"message": answer, "configuration": {"historyLength": 10}});
    let second = send_with(&state, request).await;
    assert_eq!(second.id, "t-7");
    assert_eq!(
        second.context_id, first.context_id,
        "the continuation keeps the context"
    );
    assert_eq!(second.status.state, TaskState::Completed);
    let history: Vec<String> = second
        .history
        .unwrap()
        .iter()
        .map(daedalus_contract::Message::text)
        .collect();
    assert_eq!(history, ["***INPUT Which branch?", "Which branch?", "main"]);
}

#[tokio::test]
async fn history_is_returned_only_when_asked_and_capped() {
    let state = passthrough();
    let mut m = user("m-1", "one");
    m["taskId"] = json!("t");
    assert!(send(&state, m).await.history.is_none());
    let mut m = user("m-2", "two");
    m["taskId"] = json!("t");
    let task = send_with(
        &state,
        json!({"message": m, "configuration": {"historyLength": 1}}),
    )
    .await;
    let texts: Vec<String> = task
        .history
        .unwrap()
        .iter()
        .map(daedalus_contract::Message::text)
        .collect();
    assert_eq!(texts, ["two"]);
}

#[tokio::test]
async fn a_context_that_contradicts_the_task_is_refused() {
    let state = passthrough();
    let mut m = user("m-1", "x");
    m["taskId"] = json!("t");
    m["contextId"] = json!("c-1");
    send(&state, m.clone()).await;
    m["messageId"] = json!("m-2");
    m["contextId"] = json!("c-2");
    let message = expect_error(
        &state,
        post(send_body(&m), Some("application/json")),
        StatusCode::BAD_REQUEST,
    )
    .await;
    assert!(message.contains("c-1"), "{message}");
}

/// Counts runs, and how many run at once.
#[derive(Debug, Default)]
struct Counting {
    runs: AtomicUsize,
    running: AtomicUsize,
    max_running: AtomicUsize,
}

#[async_trait]
impl Agent for Counting {
    async fn run(&self, request: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        self.runs.fetch_add(1, Ordering::SeqCst);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_running.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(30)).await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        Passthrough.run(request, cancel).await
    }
}

#[tokio::test]
async fn a_redelivered_message_gets_the_stored_answer_without_running_again() {
    let agent = Arc::new(Counting::default());
    let state = state_with(agent.clone(), |_| {});
    let first = send(&state, user("m-1", "once")).await;
    let again = send(&state, user("m-1", "once")).await;
    assert_eq!(agent.runs.load(Ordering::SeqCst), 1);
    assert_eq!(first, again);
}

#[tokio::test]
async fn messages_for_one_task_never_run_at_once() {
    let agent = Arc::new(Counting::default());
    let state = state_with(agent.clone(), |_| {});
    let sends = (0..4).map(|i| {
        let mut m = user(&format!("m-{i}"), "x");
        m["taskId"] = json!("same");
        let state = state.clone();
        async move { send(&state, m).await }
    });
    futures::future::join_all(sends).await;
    assert_eq!(agent.runs.load(Ordering::SeqCst), 4);
    assert_eq!(agent.max_running.load(Ordering::SeqCst), 1);
}

#[derive(Debug)]
struct Fixed(AgentOutcome);

#[async_trait]
impl Agent for Fixed {
    async fn run(&self, _: AgentRequest, _: CancellationToken) -> AgentOutcome {
        self.0.clone()
    }
}

#[tokio::test]
async fn completed_without_output_is_reported_failed() {
    let state = state_with(
        Arc::new(Fixed(AgentOutcome::Completed { artifacts: vec![] })),
        |_| {},
    );
    let task = send(&state, user("m", "x")).await;
    assert_eq!(task.status.state, TaskState::Failed);
    assert!(
        task.status
            .message
            .unwrap()
            .text()
            .contains("without producing any output")
    );
}

#[derive(Debug)]
struct Hangs;

#[async_trait]
impl Agent for Hangs {
    async fn run(&self, _: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        cancel.cancelled().await;
        AgentOutcome::Canceled
    }
}

#[tokio::test]
async fn a_task_over_the_request_timeout_fails_and_says_so() {
    let state = state_with(Arc::new(Hangs), |c| {
        c.limits.request_timeout = Duration::from_millis(50);
    });
    let task = send(&state, user("m", "x")).await;
    assert_eq!(task.status.state, TaskState::Failed);
    assert!(
        task.status
            .message
            .unwrap()
            .text()
            .contains("REQUEST_TIMEOUT")
    );
}

#[tokio::test]
async fn malformed_json_is_400() {
    let state = passthrough();
    for body in ["{not json", "", "{\"message\": ", "[1,2", "\u{0}"] {
        let message = expect_error(
            &state,
            post(body, Some("application/json")),
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert!(message.contains("malformed JSON"), "{body:?}: {message}");
    }
}

#[tokio::test]
async fn json_that_is_not_a_request_is_400_naming_the_field() {
    let state = passthrough();
    let cases = [
        (json!({}), "message"),
        (json!([]), "SendMessageRequest"),
        (
            json!({"message": {"role": "user", "parts": [{"text": "x"}]}}),
            "messageId",
        ),
        (
            json!({"message": {"messageId": "m", "role": "user", "parts": [{}]}}),
            "message.parts[0]",
        ),
        (
            json!({"message": {"messageId": "m", "role": "robot", "parts": [{"text": "x"}]}}),
            "role",
        ),
        (
            json!({"message": {"messageId": "m", "role": "user", "parts": []}}),
            "at least one part",
        ),
        (
            json!({"message": {"messageId": "", "role": "user", "parts": [{"text": "x"}]}}),
            "messageId",
        ),
        (
            json!({"message": {"messageId": "m", "role": "agent", "parts": [{"text": "x"}]}}),
            "role",
        ),
    ];
    for (body, mentions) in cases {
        let message = expect_error(
            &state,
            post(body.to_string(), Some("application/json")),
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert!(message.contains(mentions), "{body}: {message}");
    }
}

#[tokio::test]
async fn content_type_must_be_json() {
    let state = passthrough();
    let body = || send_body(&user("m", "x"));
    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        expect_error(&state, post(body(), ct), StatusCode::UNSUPPORTED_MEDIA_TYPE).await;
    }
    for ct in ["application/json; charset=utf-8", "application/a2a+json"] {
        let (status, _, _) = call(&state, post(body(), Some(ct))).await;
        assert_eq!(status, StatusCode::OK, "{ct}");
    }
}

#[tokio::test]
async fn a_request_with_a2a_version_is_never_the_contract_binding() {
    let state = passthrough();
    let versioned = |body: &str, ct: &str| {
        Request::post("/")
            .header(header::CONTENT_TYPE, ct)
            .header("A2A-Version", "1.0")
            .body(Body::from(body.to_owned()))
            .unwrap()
    };
    // Not JSON at all, in a media type POST / does not take: JSON-RPC's -32005, not a 415.
    let python_repr = "{'jsonrpc': '2.0', 'id': 1, 'method': 'SendMessage'}";
    let (status, body, _) = call(&state, versioned(python_repr, "text/plain")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["error"]["code"], -32005, "{body}");
    assert_eq!(body["id"], Value::Null);
    // A contract body with the header: a JSON-RPC error, not a contract Task.
    let contract = json!({"message": user("m-v", "hi")}).to_string();
    let (status, body, _) = call(&state, versioned(&contract, "application/json")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    // Not JSON at all, in JSON's media type: JSON-RPC's parse error.
    let (status, body, _) = call(&state, versioned("{not json", "application/json")).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (StatusCode::OK, &json!(-32700)),
        "{body}"
    );
    // Without the header the same body is the contract's.
    let (status, task, _) = call(&state, post(contract, Some("application/json"))).await;
    assert_eq!(
        (status, &task["status"]["state"]),
        (StatusCode::OK, &json!("completed"))
    );
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let state = state_with(Arc::new(Passthrough), |c| c.limits.max_body_bytes = 1024);
    let big = json!({"message": user("m", &"x".repeat(2000))}).to_string();
    expect_error(
        &state,
        post(big.clone(), Some("application/json")),
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;

    // Without a Content-Length, the limit is enforced while reading.
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = big
        .into_bytes()
        .chunks(100)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let streamed = Body::from_stream(futures::stream::iter(chunks));
    expect_error(
        &state,
        post(streamed, Some("application/json")),
        StatusCode::PAYLOAD_TOO_LARGE,
    )
    .await;
}

#[tokio::test]
async fn a_body_that_never_arrives_is_408() {
    let state = state_with(Arc::new(Passthrough), |c| {
        c.limits.body_read_timeout = Duration::from_millis(50);
    });
    let never = Body::from_stream(futures::stream::pending::<
        Result<bytes::Bytes, std::io::Error>,
    >());
    expect_error(
        &state,
        post(never, Some("application/json")),
        StatusCode::REQUEST_TIMEOUT,
    )
    .await;
}

#[tokio::test]
async fn new_tasks_are_refused_while_draining() {
    let state = passthrough();
    state.core().readiness().set_draining();
    expect_error(
        &state,
        post(send_body(&user("m", "x")), Some("application/json")),
        StatusCode::SERVICE_UNAVAILABLE,
    )
    .await;
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let state = passthrough();
    expect_error(
        &state,
        Request::get("/nope").body(Body::empty()).unwrap(),
        StatusCode::NOT_FOUND,
    )
    .await;
    expect_error(
        &state,
        Request::get("/").body(Body::empty()).unwrap(),
        StatusCode::METHOD_NOT_ALLOWED,
    )
    .await;
    expect_error(
        &state,
        Request::delete("/health").body(Body::empty()).unwrap(),
        StatusCode::METHOD_NOT_ALLOWED,
    )
    .await;
}

#[derive(Debug)]
struct Panics;

#[async_trait]
impl Agent for Panics {
    async fn run(&self, _: AgentRequest, _: CancellationToken) -> AgentOutcome {
        panic!("agent bug");
    }
}

#[tokio::test]
async fn a_panicking_agent_is_a_500_not_a_dead_server() {
    let state = state_with(Arc::new(Panics), |_| {});
    expect_error(
        &state,
        post(send_body(&user("m", "x")), Some("application/json")),
        StatusCode::INTERNAL_SERVER_ERROR,
    )
    .await;
    let (status, _, _) = call(&state, Request::get("/health").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn past_max_concurrent_tasks_post_answers_503_with_retry_after() {
    let state = state_with(Arc::new(Passthrough), |c| c.limits.max_concurrent_tasks = 1);
    let slow = {
        let state = state.clone();
        tokio::spawn(async move { send(&state, user("m-slow", "***SLEEP 30s late")).await })
    };
    // The slow turn holds the only permit once it runs.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while state.core().turns().free_permits() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slow turn never started"
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let request = post(send_body(&user("m-2", "x")), Some("application/json"));
    let (status, body, response) = call(&state, request).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("MAX_CONCURRENT_TASKS")
    );
    state.core().turns().cancel_token().cancel();
    slow.abort();
}

#[tokio::test]
async fn remembered_tasks_stay_within_the_byte_budget() {
    let state = state_with(Arc::new(Passthrough), |c| {
        c.limits.task_memory_bytes = 1024 * 1024;
    });
    for i in 0..20 {
        let text = format!("{i}{}", "x".repeat(256 * 1024));
        let task = send(&state, user(&format!("m-{i}"), &text)).await;
        assert_eq!(task.status.state, TaskState::Completed);
    }
    let (tasks, bytes) = state.core().turns().task_memory();
    assert!(bytes <= 1024 * 1024, "{bytes} bytes remembered");
    assert!(tasks < 20, "old tasks were forgotten");
    // The newest one still replays without running again.
    let text = format!("19{}", "x".repeat(256 * 1024));
    let replay = send(&state, user("m-19", &text)).await;
    assert_eq!(replay.status.state, TaskState::Completed);
}

/// Virtual time: the 40 s the agent sleeps pass at once, and the keep-alive timer with them.
#[tokio::test(start_paused = true)]
async fn an_idle_stream_sends_a_comment_every_fifteen_seconds() {
    let mut req = post(
        send_body(&user("m-idle", "***SLEEP 40s done")),
        Some("application/json"),
    );
    req.headers_mut().insert(
        header::ACCEPT,
        header::HeaderValue::from_static("text/event-stream"),
    );
    let response = router(passthrough()).oneshot(req).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(body.to_vec()).unwrap();
    let comments = text.lines().filter(|l| l.starts_with(':')).count();
    assert_eq!(
        comments, 2,
        "at 15 s and 30 s of the 40 s the turn took:\n{text}"
    );
    let last_data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .unwrap();
    let last: Value = serde_json::from_str(last_data.trim()).unwrap();
    assert_eq!(last["statusUpdate"]["final"], true, "{text}");
}
