//! Budgets (`budgets:` in `agents.yaml`), held by a real runtime process: two tenants on API
//! keys, a scripted LLM that reports its usage. Acme's one-token minute is spent by its first
//! turn; its next is refused on every binding with a `Retry-After` that names the seconds left
//! in the minute (`429` on the contract binding and HTTP+JSON, 200 on JSON-RPC), and the binding's error shape naming the scope and the limit;
//! globex, with no budget, is served all along; once the minute is over, acme is served again.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use daedalus_fake_llm::{AutoReply, FakeLlm};
use daedalus_test_kit::A2aClient;
use daedalus_test_kit::a2a_client::state_of;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::identity::api_key_file;
use support::process::{Runtime, runtime};

const KEY: &str = "sk-budgets";
const MODEL: &str = "gpt-budgets";

/// A runtime whose `budgets:` block is `budgets`, acme's and globex's keys accepted.
fn runtime_with_budgets(dir: &tempfile::TempDir, fake: &FakeLlm, budgets: &str) -> Runtime {
    runtime_with_budgets_in(dir, fake, budgets, "")
}

/// A [`runtime_with_budgets`] whose `WORK_DIR` (and so its SQLite task store) is `work_dir`
/// (a fresh one when empty).
fn runtime_with_budgets_in(
    dir: &tempfile::TempDir,
    fake: &FakeLlm,
    budgets: &str,
    work_dir: &str,
) -> Runtime {
    let yaml = support::runtime::on_fake_openai(
        &fake.openai_base_url,
        KEY,
        MODEL,
        "{}",
        "  proc-test: { instruction: Answer. }\n",
    );
    let config = dir.path().join("agents.yaml");
    std::fs::write(&config, format!("{yaml}budgets:\n{budgets}")).expect("written");
    let keys = dir.path().join("api-keys.yaml");
    api_key_file(
        &keys,
        &[
            ("key-of-acme", "acme-bot", "acme"),
            ("key-of-globex", "globex-bot", "globex"),
        ],
    );
    let builder = runtime()
        .env("AGENTS_CONFIG", config.to_str().expect("utf-8"))
        .env("AUTH_API_KEYS_FILE", keys.to_str().expect("utf-8"));
    if work_dir.is_empty() {
        builder.start()
    } else {
        builder.env("WORK_DIR", work_dir).start()
    }
}

fn now_ms() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    u64::try_from(since.as_millis()).expect("fits")
}

/// The seconds left in the current UTC minute, rounded up.
fn seconds_left_in_the_minute() -> u64 {
    (60_000 - now_ms() % 60_000).div_ceil(1_000)
}

fn retry_after(response: &reqwest::Response) -> u64 {
    response.headers()[reqwest::header::RETRY_AFTER]
        .to_str()
        .expect("ASCII")
        .parse()
        .expect("seconds")
}

fn send_params(text: &str) -> Value {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
        "parts": [{"text": text}]}})
}

/// Acme's first turn, then its refused second over JSON-RPC, early enough in a minute for
/// the test's other refusals to fall in it too (tried again when the minute turns between
/// them): the refusal, and the seconds that were left.
async fn spend_acmes_minute(acme: &A2aClient) -> (reqwest::Response, u64) {
    for _ in 0..3 {
        if seconds_left_in_the_minute() < 20 {
            tokio::time::sleep(Duration::from_secs(seconds_left_in_the_minute())).await;
        }
        let minute = now_ms() / 60_000;
        let first = acme.run_task("hello").await;
        assert_eq!(state_of(&first), "TASK_STATE_COMPLETED", "{first}");
        let refused = acme.send_raw("SendMessage", send_params("again")).await;
        let left = seconds_left_in_the_minute();
        if now_ms() / 60_000 == minute {
            return (refused, left);
        }
    }
    panic!("three minutes turned in the middle of a turn");
}

/// Acme's spent minute refuses its turn over gRPC (`RESOURCE_EXHAUSTED`, the ErrorInfo) and
/// over MCP, both revisions (a tool error naming the limit and when to retry).
async fn grpc_and_mcp_refuse_acmes_turn(rt: &Runtime) {
    // gRPC: RESOURCE_EXHAUSTED with the same ErrorInfo.
    let mut grpc = support::grpc::connect(&rt.url("")).await;
    let mut request = support::grpc::call(support::grpc::send("grpc-1", "again"));
    request
        .metadata_mut()
        .insert("x-api-key", "key-of-acme".parse().expect("a value"));
    let status = grpc.send_message(request).await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert_eq!(support::grpc::reason(&status).0, "BUDGET_EXCEEDED");

    // MCP, both revisions: a tool error naming the limit and when to retry.
    let (legacy, _) =
        support::mcp_client::connect(&rt.url("/agents/proc-test/mcp"), Some("key-of-acme")).await;
    let refused =
        support::mcp_client::call(&legacy, "send_message", json!({"message": "again"})).await;
    assert_eq!(refused.is_error, Some(true));
    let said = support::mcp_client::text(&refused);
    assert!(
        said.contains("tokens_per_minute") && said.contains("retry in"),
        "{said}"
    );
    let keyed = reqwest::Client::builder()
        .default_headers(reqwest::header::HeaderMap::from_iter([(
            reqwest::header::HeaderName::from_static("x-api-key"),
            reqwest::header::HeaderValue::from_static("key-of-acme"),
        )]))
        .build()
        .expect("a client");
    let modern = daedalus_test_kit::modern_mcp_request(
        &keyed,
        &rt.url("/agents/proc-test/mcp"),
        &daedalus_test_kit::ModernClient::named("budget-test"),
        "tools/call",
        json!({"name": "send_message", "arguments": {"message": "again"}}),
    )
    .await;
    assert_eq!(modern["result"]["isError"], true, "{modern}");
    let said = modern["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        said.contains("tokens_per_minute") && said.contains("retry in"),
        "{modern}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_that_spent_its_minute_is_refused_until_it_ends_and_another_is_served() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.auto(AutoReply {
        text: "noted".into(),
        ..AutoReply::default()
    });
    let dir = tempfile::tempdir().expect("a dir");
    let rt = runtime_with_budgets(
        &dir,
        &fake,
        "  tenants:\n    acme: { tokens_per_minute: 1 }\n",
    );
    let acme = A2aClient::new(rt.url("/")).with_bearer("key-of-acme");
    let globex = A2aClient::new(rt.url("/")).with_bearer("key-of-globex");

    let (refused, left) = spend_acmes_minute(&acme).await;
    // JSON-RPC: HTTP 200 with the JSON-RPC error, as every JSON-RPC error (the official
    // clients read no other), the Retry-After and RateLimit fields kept.
    assert_eq!(refused.status(), StatusCode::OK);
    let after = retry_after(&refused);
    assert!(
        after.abs_diff(left) <= 1,
        "Retry-After {after} s names the {left} s left in the minute"
    );
    let header = |response: &reqwest::Response, name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().expect("ASCII").to_owned())
    };
    assert_eq!(
        header(&refused, "ratelimit-policy").as_deref(),
        Some("\"tenant-tokens_per_minute\";q=1;w=60"),
        "the IETF RateLimit-Policy field, named by scope and limit"
    );
    let limit = header(&refused, "ratelimit").expect("the RateLimit field");
    assert!(
        limit.starts_with("\"tenant-tokens_per_minute\";r=0;t="),
        "{limit}"
    );
    let body: Value = refused.json().await.expect("JSON");
    let error = &body["error"];
    assert_eq!(error["code"], -31429, "{body}");
    assert_eq!(error["data"][0]["reason"], "BUDGET_EXCEEDED", "{body}");
    assert_eq!(error["data"][0]["domain"], "runtime.daedalus.dev", "{body}");
    assert_eq!(error["data"][0]["metadata"]["scope"], "tenant", "{body}");
    assert_eq!(
        error["data"][0]["metadata"]["limit"], "tokens_per_minute",
        "{body}"
    );
    let said = error["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("acme") && !said.contains("globex"),
        "the refusal names the caller's own tenant only: {said}"
    );

    // The HTTP+JSON binding: a google.rpc.Status, RESOURCE_EXHAUSTED.
    let http = reqwest::Client::new();
    let rest = http
        .post(rt.url("/a2a/rest/message:send"))
        .header("A2A-Version", "1.0")
        .header("X-API-Key", "key-of-acme")
        .json(&send_params("again"))
        .send()
        .await
        .expect("answers");
    assert_eq!(rest.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after(&rest) <= 60);
    let limit = header(&rest, "ratelimit").expect("the refusal's RateLimit field");
    assert!(
        limit.starts_with("\"tenant-tokens_per_minute\";r=0;t="),
        "{limit}"
    );
    let status: Value = rest.json().await.expect("JSON");
    assert_eq!(status["error"]["status"], "RESOURCE_EXHAUSTED", "{status}");
    assert_eq!(status["error"]["code"], 429, "{status}");
    assert_eq!(
        status["error"]["details"][0]["reason"], "BUDGET_EXCEEDED",
        "{status}"
    );

    // The contract binding: 429 with Retry-After, for a proxy to wait on.
    let contract = http
        .post(rt.url("/"))
        .header("X-API-Key", "key-of-acme")
        .json(
            &json!({"message": {"messageId": "contract-1", "role": "user",
            "parts": [{"text": "again"}]}}),
        )
        .send()
        .await
        .expect("answers");
    assert_eq!(contract.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after(&contract) <= 60);
    assert_eq!(
        header(&contract, "ratelimit-policy").as_deref(),
        Some("\"tenant-tokens_per_minute\";q=1;w=60")
    );

    grpc_and_mcp_refuse_acmes_turn(&rt).await;

    let served = globex.send_raw("SendMessage", send_params("hello")).await;
    assert_eq!(served.status(), StatusCode::OK);
    assert!(
        header(&served, "ratelimit-policy").is_none(),
        "no budget holds globex: no RateLimit fields"
    );
    let served: Value = served.json().await.expect("JSON");
    assert_eq!(
        state_of(&served["result"]["task"]),
        "TASK_STATE_COMPLETED",
        "globex is unaffected: {served}"
    );
    assert_eq!(
        fake.requests().len(),
        2,
        "the refused turns never reached the model"
    );
    let healthz: Value = http
        .get(rt.url("/healthz"))
        .send()
        .await
        .expect("answers")
        .json()
        .await
        .expect("JSON");
    assert_eq!(healthz["budgets"]["tenants"], 1, "{healthz}");
    assert_eq!(healthz["budgets"]["refusing_now"], 1, "{healthz}");
    let told = rt
        .drain_logs()
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("a budget refuses turns"))
        })
        .count();
    assert_eq!(told, 1, "six refusals in a minute are logged once");

    // The minute ends: acme is served again.
    tokio::time::sleep(Duration::from_millis(
        seconds_left_in_the_minute() * 1_000 + 200,
    ))
    .await;
    let again = acme.run_task("a new minute").await;
    assert_eq!(
        state_of(&again),
        "TASK_STATE_COMPLETED",
        "acme is served again once its minute is over: {again}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_would_pass_tokens_per_turn_fails_naming_the_limit() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    // Each answer calls a tool that does not exist, so the loop would go on and on.
    fake.auto(AutoReply {
        tools: vec!["nowhere__tool".into()],
        text: "never".into(),
        rounds: 50,
        ..AutoReply::default()
    });
    let dir = tempfile::tempdir().expect("a dir");
    let rt = runtime_with_budgets(
        &dir,
        &fake,
        "  agents:\n    proc-test: { tokens_per_turn: 200 }\n",
    );
    let acme = A2aClient::new(rt.url("/")).with_bearer("key-of-acme");
    let task = acme.run_task("go on and on").await;
    assert_eq!(state_of(&task), "TASK_STATE_FAILED", "{task}");
    let why = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("tokens_per_turn"), "{task}");
    let asked = fake.requests().len();
    assert!(
        (2..50).contains(&asked),
        "the loop stopped at its budget after {asked} model calls"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_what_the_day_spent_in_the_sqlite_task_store() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.auto(AutoReply {
        text: "noted".into(),
        ..AutoReply::default()
    });
    let dir = tempfile::tempdir().expect("a dir");
    let work = tempfile::tempdir().expect("a work dir");
    let start = || {
        runtime_with_budgets_in(
            &dir,
            &fake,
            "  tenants:\n    acme: { tokens_per_day: 1 }\n",
            work.path().to_str().expect("utf-8"),
        )
    };
    let rt = start();
    let acme = A2aClient::new(rt.url("/")).with_bearer("key-of-acme");
    let first = acme.run_task("hello").await;
    assert_eq!(state_of(&first), "TASK_STATE_COMPLETED", "{first}");
    rt.signal("TERM");
    let mut rt = rt;
    assert!(rt.wait_exit(Duration::from_secs(10)).success());

    let rt = start();
    let acme = A2aClient::new(rt.url("/")).with_bearer("key-of-acme");
    let refused: Value = acme
        .send_raw("SendMessage", send_params("again"))
        .await
        .json()
        .await
        .expect("JSON");
    assert_eq!(
        refused["error"]["code"], -31429,
        "the day's token was spent before the restart: {refused}"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_that_spent_its_days_cost_is_refused_naming_cost_per_day() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.auto(AutoReply {
        text: "noted with a few words".into(),
        ..AutoReply::default()
    });
    let dir = tempfile::tempdir().expect("a dir");
    // 10,000 a million tokens (0.01 a token): the first turn's few tokens cost more than 0.01.
    let rt = runtime_with_budgets(
        &dir,
        &fake,
        &format!(
            "  tenants:\n    acme: {{ cost_per_day: 0.01 }}\n\
             models:\n  openai.{MODEL}: {{ price: {{ input_per_mtok: 10000, output_per_mtok: 10000 }} }}\n"
        ),
    );
    let acme = A2aClient::new(rt.url("/")).with_bearer("key-of-acme");
    let first = acme.run_task("hello").await;
    assert_eq!(state_of(&first), "TASK_STATE_COMPLETED", "{first}");
    let refused = acme.send_raw("SendMessage", send_params("again")).await;
    assert_eq!(refused.status(), StatusCode::OK);
    let body: Value = refused.json().await.expect("JSON");
    assert_eq!(
        body["error"]["data"][0]["metadata"]["limit"], "cost_per_day",
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("allows 0.01 cost per day")),
        "{body}"
    );
    let globex = A2aClient::new(rt.url("/")).with_bearer("key-of-globex");
    let served = globex.run_task("hello").await;
    assert_eq!(state_of(&served), "TASK_STATE_COMPLETED", "{served}");
}

/// The official Python client tells its caller which budget refused the turn and when to come
/// back, blocking and streaming: a2a-sdk 1.3.0 reads a JSON-RPC error only from an HTTP 200
/// (a 429 became `HTTP Error 429` with the body dropped), so the refusal is one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_tells_its_caller_which_budget_refused_and_when_to_retry() {
    let fake = FakeLlm::start(KEY, &[MODEL]).await;
    fake.auto(AutoReply {
        text: "noted".into(),
        ..AutoReply::default()
    });
    let dir = tempfile::tempdir().expect("a dir");
    let rt = runtime_with_budgets(&dir, &fake, "  tenants:\n    acme: { tokens_per_day: 1 }\n");
    let acme = A2aClient::new(rt.url("/")).with_bearer("key-of-acme");
    let first = acme.run_task("hello").await;
    assert_eq!(state_of(&first), "TASK_STATE_COMPLETED", "{first}");

    let url = rt.url("/");
    let steps = support::python::a2a_steps(
        "a2a_refused.py",
        &[&url, "key-of-acme", "again", "blocking", "streaming"],
    )
    .await;
    for mode in ["blocking", "streaming"] {
        let step = &steps[mode];
        let told = step["message"].as_str().unwrap_or_default();
        assert!(
            step["error"].is_string() && !told.contains("HTTP Error"),
            "{mode}: the SDK raises the JSON-RPC error, not a bare HTTP status: {step}"
        );
        assert!(
            told.contains("tenant \"acme\"") && told.contains("tokens_per_day"),
            "{mode}: the caller learns which limit refused it: {told}"
        );
        assert!(
            told.contains("retry in ") && told.contains(" s"),
            "{mode}: and when to retry: {told}"
        );
    }
    assert_eq!(
        fake.requests().len(),
        1,
        "the refused turns reached no model"
    );
}
