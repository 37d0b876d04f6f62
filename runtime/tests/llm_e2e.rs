//! `POST /` and `/healthz` on the real runtime, configured by an agents.yaml that points at the
//! strict fake LLM server, for both providers.

mod support;

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_runtime::config::{Config, Launch};
use daedalus_test_kit::{NatsServer, Runtime};
use serde_json::{Value, json};

const KEY: &str = "sk-e2e-secret";

/// A runtime started from `yaml` (with `${FAKE_URL}` and `${KEY}` expanded).
async fn start(yaml: &str, fake: &FakeLlm, key: &str) -> Runtime {
    start_with(
        yaml,
        fake,
        key,
        ":memory:",
        tempfile::tempdir().expect("temp dir"),
    )
    .await
}

async fn start_with(
    yaml: &str,
    fake: &FakeLlm,
    key: &str,
    sessions: &str,
    dir: tempfile::TempDir,
) -> Runtime {
    std::fs::write(dir.path().join("agents.yaml"), yaml).expect("written");
    let env = |k: &str| match k {
        "OPENAI_URL" => Some(fake.openai_base_url.clone()),
        "ANTHROPIC_URL" => Some(fake.anthropic_base_url.clone()),
        "KEY" => Some(key.to_owned()),
        _ => None,
    };
    let args = [
        "daedalus-runtime",
        "--port",
        "0",
        "--log-level",
        "warn",
        "--sessions-db",
        sessions,
        "--tasks-db",
        "memory",
    ]
    .map(std::ffi::OsString::from);
    let config = match Launch::from_sources(args, &env, dir.path()) {
        Ok(Launch::Run(c)) => c,
        other => panic!("the configuration loads: {other:?}"),
    };
    serve(config, dir).await
}

async fn serve(config: Config, dir: tempfile::TempDir) -> Runtime {
    Runtime::with_config(config).await.holding(dir)
}

const OPENAI: &str = r#"
default_model: openai.gpt-fake
openai: { api_key: "${KEY}", base_url: "${OPENAI_URL}" }
agents:
  helper:
    instruction: You help.
    request_params: { temperature: 0.2, seed: 7 }
"#;

const ANTHROPIC: &str = r#"
default_model: anthropic.claude-fake
model_capabilities: { vision: true, max_output_tokens: 1234 }
anthropic: { api_key: "${KEY}", base_url: "${ANTHROPIC_URL}" }
agents:
  helper:
    instruction: You help.
    request_params: { temperature: 0.5, stop: "END", seed: 3 }
"#;

async fn post(rt: &Runtime, body: &Value) -> Value {
    post_with(&reqwest::Client::new(), rt, body).await
}

/// [`post`] through `client`: turns sent together share one (a client takes tens of
/// milliseconds to build in a debug build, long enough to starve the first connections).
async fn post_with(client: &reqwest::Client, rt: &Runtime, body: &Value) -> Value {
    let r = client
        .post(format!("{}/", rt.url))
        .json(body)
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status(), 200);
    let task: Value = r.json().await.expect("JSON");
    daedalus_contract::Schema::Task
        .validate(&task)
        .unwrap_or_else(|e| panic!("{task}: {e}"));
    task
}

fn message(text: &str) -> Value {
    json!({"message": {"messageId": format!("m-{text}"), "role": "user", "parts": [{"text": text}]}})
}

#[tokio::test]
async fn post_runs_the_agent_on_the_fake_openai_server() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([Reply::Text("Hello from the model".into())]);
    let rt = start(OPENAI, &fake, KEY).await;
    let mut body = message("hi");
    body["metadata"] =
        json!({"request_params": {"temperature": 0.9, "seed": null, "max_tokens": 1_000_000}});
    let task = post(&rt, &body).await;
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "Hello from the model"
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.refused, None);
    assert_eq!(
        sent.body["messages"][0],
        json!({"role": "system", "content": "You help."})
    );
    assert_eq!(
        sent.body["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
    assert_eq!(sent.body["temperature"], 0.9, "the call's value wins");
    assert!(
        sent.body.get("seed").is_none(),
        "null in the call clears the agent's default"
    );
}

#[tokio::test]
async fn post_runs_the_agent_on_the_fake_anthropic_server_with_images() {
    let fake = FakeLlm::start(KEY, &["claude-fake"]).await;
    fake.script([Reply::Text("I see a dot".into())]);
    let rt = start(ANTHROPIC, &fake, KEY).await;
    let body = json!({"message": {"messageId": "m-img", "role": "user", "parts": [
        {"text": "what is this?"}, {"raw": "iVBORw0KGgo=", "mediaType": "image/png"}]}});
    let task = post(&rt, &body).await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "I see a dot");
    let sent = &fake.requests()[0];
    assert_eq!(sent.refused, None, "the strict fake accepted it");
    assert_eq!(sent.body["system"][0]["text"], "You help.");
    assert_eq!(
        sent.body["messages"][0]["content"][1]["source"]["media_type"],
        "image/png"
    );
    assert_eq!(
        sent.body["stop_sequences"],
        json!(["END"]),
        "stop is spelled for Anthropic"
    );
    assert!(
        sent.body.get("seed").is_none(),
        "seed is dropped: Anthropic has none"
    );
    assert_eq!(
        sent.body["max_tokens"], 1234,
        "max_tokens defaults to the model's output budget"
    );
}

#[tokio::test]
async fn an_image_for_a_text_only_model_fails_clearly() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let rt = start(OPENAI, &fake, KEY).await;
    let body = json!({"message": {"messageId": "m-img", "role": "user", "parts": [
        {"text": "what is this?"}, {"url": "https://example.com/cat.jpg", "mediaType": "image/jpeg"}]}});
    let task = post(&rt, &body).await;
    assert_eq!(task["status"]["state"], "failed");
    let why = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        why.contains("text-only") && why.contains("image/jpeg"),
        "{why}"
    );
    assert!(fake.requests().is_empty(), "nothing was sent to the model");
}

#[tokio::test]
async fn a_provider_failure_is_a_failed_task_naming_the_provider_without_the_key() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    let rt = start(OPENAI, &fake, "sk-not-the-right-one").await;
    let task = post(&rt, &message("hi")).await;
    assert_eq!(task["status"]["state"], "failed");
    let why = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(why.contains("openai: 401"), "{why}");
    assert!(!why.contains("sk-not-the-right-one"), "{why}");
}

async fn healthz(rt: &Runtime) -> (u16, Value) {
    let r = reqwest::get(format!("{}/healthz", rt.url))
        .await
        .expect("healthz");
    (r.status().as_u16(), r.json().await.expect("JSON"))
}

#[tokio::test]
async fn healthz_reports_the_preflight_per_provider() {
    let fake = FakeLlm::start(KEY, &["gpt-fake", "claude-fake"]).await;
    let (code, body) = healthz(&start(OPENAI, &fake, KEY).await).await;
    assert_eq!((code, body["status"].as_str()), (200, Some("ok")), "{body}");
    assert_eq!(body["providers"][0]["provider"], "openai");
    assert_eq!(body["providers"][0]["active"], true);

    let (code, body) = healthz(
        &start(
            &OPENAI.replace("openai.gpt-fake", "openai.gpt-missing"),
            &fake,
            KEY,
        )
        .await,
    )
    .await;
    assert_eq!(code, 503);
    assert_eq!(
        body["providers"][0]["message"],
        "model 'gpt-missing' not found"
    );

    let (code, body) = healthz(&start(ANTHROPIC, &fake, "sk-bad").await).await;
    assert_eq!(code, 503);
    assert_eq!(body["providers"][0]["message"], "API key rejected");
    assert!(!body.to_string().contains("sk-bad"));

    let dead = FakeLlm::start(KEY, &[]).await;
    let unreachable = OPENAI.replace("${OPENAI_URL}", "http://127.0.0.1:9/v1");
    let (code, body) = healthz(&start(&unreachable, &dead, KEY).await).await;
    assert_eq!(code, 503);
    assert!(
        body["providers"][0]["message"]
            .as_str()
            .unwrap()
            .contains("unreachable"),
        "{body}"
    );

    let passthrough_only = start("agents: { p: {} }", &fake, KEY).await;
    let (code, body) = healthz(&passthrough_only).await;
    assert_eq!(
        (code, body["providers"].as_array().map(Vec::len)),
        (200, Some(0))
    );
}

fn in_context(id: &str, context: &str, text: &str) -> Value {
    json!({"message": {"messageId": id, "contextId": context, "role": "user", "parts": [{"text": text}]}})
}

#[tokio::test]
async fn tasks_in_one_context_share_the_conversation_across_a_restart() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::Text("Nice to meet you, Ada.".into()),
        Reply::Text("You are Ada.".into()),
        Reply::Text("Who?".into()),
    ]);
    let keep = tempfile::tempdir().expect("temp dir");
    let db = keep
        .path()
        .join("sessions.sqlite")
        .to_string_lossy()
        .into_owned();

    let first = start_with(OPENAI, &fake, KEY, &db, tempfile::tempdir().expect("dir")).await;
    post(&first, &in_context("m-1", "ctx-ada", "My name is Ada.")).await;
    first.shut_down().await;

    let second = start_with(OPENAI, &fake, KEY, &db, tempfile::tempdir().expect("dir")).await;
    let task = post(&second, &in_context("m-2", "ctx-ada", "What is my name?")).await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "You are Ada.");
    let sent = fake.requests()[1].body["messages"].clone();
    assert_eq!(
        sent[1],
        json!({"role": "user", "content": "My name is Ada."})
    );
    assert_eq!(
        sent[2],
        json!({"role": "assistant", "content": "Nice to meet you, Ada."})
    );
    assert_eq!(
        sent[3],
        json!({"role": "user", "content": "What is my name?"})
    );

    post(&second, &in_context("m-3", "ctx-other", "What is my name?")).await;
    let other = fake.requests()[2].body["messages"].clone();
    assert_eq!(
        other.as_array().map(Vec::len),
        Some(2),
        "another context starts empty: {other}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_conversations_never_see_each_others_messages() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.auto(daedalus_fake_llm::AutoReply {
        tools: Vec::new(),
        text: "noted".into(),
        ..Default::default()
    });
    let keep = tempfile::tempdir().expect("temp dir");
    let db = keep
        .path()
        .join("sessions.sqlite")
        .to_string_lossy()
        .into_owned();
    let rt = start_with(OPENAI, &fake, KEY, &db, tempfile::tempdir().expect("dir")).await;
    let client = reqwest::Client::new();
    for round in ["first", "second"] {
        let turns = (0..50).map(|i| {
            let (rt, client) = (&rt, &client);
            async move {
                post_with(
                    client,
                    rt,
                    &in_context(
                        &format!("m-{round}-{i}"),
                        &format!("ctx-{i}"),
                        &format!("{round} secret-{i}-x"),
                    ),
                )
                .await
            }
        });
        futures::future::join_all(turns).await;
    }
    let log = fake.requests();
    assert_eq!(log.len(), 100);
    for request in log {
        let sent = request.body["messages"].to_string();
        let own: Vec<&str> = sent
            .split("secret-")
            .skip(1)
            .map(|s| s.split('-').next().unwrap_or_default())
            .collect();
        assert!(!own.is_empty(), "{sent}");
        assert!(
            own.iter().all(|n| *n == own[0]),
            "one conversation only: {sent}"
        );
        if sent.contains("second secret") {
            assert!(
                sent.contains("first secret"),
                "the second turn sees its first: {sent}"
            );
        }
    }
}

#[tokio::test]
async fn history_length_returns_the_contexts_conversation_across_tasks_and_a_restart() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::Text("Hi Ada.".into()),
        Reply::Text("You are Ada.".into()),
    ]);
    let keep = tempfile::tempdir().expect("temp dir");
    let db = keep.path().join("s.sqlite").to_string_lossy().into_owned();
    let first = start_with(OPENAI, &fake, KEY, &db, tempfile::tempdir().expect("dir")).await;
    post(&first, &in_context("m-1", "ctx-h", "I am Ada.")).await;
    first.shut_down().await;

    let second = start_with(OPENAI, &fake, KEY, &db, tempfile::tempdir().expect("dir")).await;
    let mut body = in_context("m-2", "ctx-h", "Who am I?");
    body["configuration"] = json!({"historyLength": 3});
    let task = post(&second, &body).await;
    let history: Vec<(String, String)> = task["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["parts"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(
        history,
        [
            ("agent".to_owned(), "Hi Ada.".to_owned()),
            ("user".to_owned(), "Who am I?".to_owned()),
            ("agent".to_owned(), "You are Ada.".to_owned()),
        ],
        "{task}"
    );
    assert!(
        task["history"]
            .as_array()
            .is_some_and(|h| h.iter().all(|m| m["contextId"] == "ctx-h"))
    );
}

#[tokio::test]
async fn two_replicas_on_a_nats_kv_store_continue_each_others_conversations() {
    let nats = NatsServer::start();
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.script([
        Reply::Text("Hi Ada.".into()),
        Reply::Text("You are Ada.".into()),
    ]);
    let store = format!("{}/team-sessions", nats.url());
    let a = start_with(
        OPENAI,
        &fake,
        KEY,
        &store,
        tempfile::tempdir().expect("dir"),
    )
    .await;
    let b = start_with(
        OPENAI,
        &fake,
        KEY,
        &store,
        tempfile::tempdir().expect("dir"),
    )
    .await;

    post(&a, &in_context("m-1", "ctx-kv", "I am Ada.")).await;
    let task = post(&b, &in_context("m-2", "ctx-kv", "Who am I?")).await;
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "You are Ada.");
    let sent = fake.requests()[1].body["messages"].clone();
    assert_eq!(sent[1], json!({"role": "user", "content": "I am Ada."}));
    assert_eq!(sent[2], json!({"role": "assistant", "content": "Hi Ada."}));
    assert_eq!(sent[3], json!({"role": "user", "content": "Who am I?"}));
}

#[tokio::test]
async fn a_conversation_longer_than_the_context_window_leaves_its_oldest_turns_out() {
    let fake = FakeLlm::start(KEY, &["gpt-fake"]).await;
    fake.auto(daedalus_fake_llm::AutoReply {
        tools: Vec::new(),
        text: "ok".into(),
        ..Default::default()
    });
    // 400 tokens of window, 100 kept for the answer, compaction (truncate) past 240: the
    // instruction and tools (about 50), the new message and one earlier turn (about 70 each).
    let yaml = OPENAI.replace(
        "default_model: openai.gpt-fake\n",
        "default_model: openai.gpt-fake\nmodel_capabilities: { context_window: 400, max_output_tokens: 100 }\n",
    );
    let rt = start(&yaml, &fake, KEY).await;
    for turn in 1..=6 {
        let text = format!("turn-{turn} {}", "words ".repeat(40));
        post(&rt, &in_context(&format!("m-{turn}"), "ctx-long", &text)).await;
    }
    let last = fake.requests().last().expect("requests").body["messages"].to_string();
    assert!(last.contains("turn-6"), "the newest turn is sent: {last}");
    assert!(last.contains("turn-5"), "recent turns are kept: {last}");
    assert!(
        !last.contains("turn-1 "),
        "the oldest turn is left out: {last}"
    );
    let first = fake.requests()[1].body["messages"].to_string();
    assert!(
        first.contains("turn-1 "),
        "while it fit, it was sent: {first}"
    );
}

/// `effort`, per agent or per call, reaches each provider in its own spelling: Anthropic's
/// `output_config.effort`, OpenAI's `reasoning_effort` (its scale ends at `high`); through the
/// A2A face's `metadata.request_params` and the MCP face's `send_message` arguments.
#[tokio::test]
async fn effort_reaches_each_provider_through_both_faces() {
    // A reasoning model: the strict fake, as OpenAI's API, refuses effort for any other.
    // (A compatible server passes dials on, so this agent sets none.)
    let openai = OPENAI
        .replace("openai.gpt-fake", "openai.o4-mini")
        .replace("temperature: 0.2, ", "");
    for (yaml, model) in [(ANTHROPIC, "claude-fake"), (openai.as_str(), "o4-mini")] {
        let fake = FakeLlm::start(KEY, &[model]).await;
        fake.script([Reply::Text("one".into()), Reply::Text("two".into())]);
        let rt = start(yaml, &fake, KEY).await;
        let mut body = message("think");
        body["metadata"] = json!({"request_params": {"effort": "max"}});
        assert_eq!(post(&rt, &body).await["status"]["state"], "completed");
        let (client, _) = support::mcp_client::connect(&rt.mcp("helper"), None).await;
        let answer = support::mcp_client::call(
            &client,
            "send_message",
            json!({"message": "think less", "effort": "low"}),
        )
        .await;
        assert_ne!(answer.is_error, Some(true), "{answer:?}");
        let log = fake.requests();
        assert!(log.iter().all(|l| l.refused.is_none()), "{log:?}");
        let effort_of = |body: &Value| match model {
            "claude-fake" => body["output_config"]["effort"].clone(),
            _ => body["reasoning_effort"].clone(),
        };
        let (a2a, mcp) = (effort_of(&log[0].body), effort_of(&log[1].body));
        match model {
            "claude-fake" => assert_eq!((a2a, mcp), (json!("max"), json!("low"))),
            _ => assert_eq!(
                (a2a, mcp),
                (json!("high"), json!("low")),
                "max is OpenAI's high"
            ),
        }
    }
}

/// On OpenAI's own API (`dialect: openai`, here pointed at the strict fake, which refuses what
/// the API refuses per model family) the request follows the model: a reasoning model gets
/// `reasoning_effort` and `max_completion_tokens` and no sampling dials; another model gets
/// its dials and no `reasoning_effort`. On a compatible server, a model declared not to
/// reason gets no `reasoning_effort`. Nothing is refused.
#[tokio::test]
async fn openai_requests_follow_the_model_family_and_the_dialect() {
    let own = r#"
default_model: openai.MODEL
openai: { api_key: "${KEY}", base_url: "${OPENAI_URL}", dialect: openai }
agents:
  helper:
    instruction: You help.
    request_params: { temperature: 0.2, top_p: 0.9, max_tokens: 500, effort: high }
"#;
    let compatible = r#"
default_model: openai.MODEL
model_capabilities: { reasoning: false }
openai: { api_key: "${KEY}", base_url: "${OPENAI_URL}" }
agents:
  helper:
    instruction: You help.
    request_params: { temperature: 0.2, max_tokens: 500, effort: high }
"#;
    for (yaml, model) in [
        (own, "o4-mini"),
        (own, "gpt-fake"),
        (compatible, "gpt-fake"),
    ] {
        let fake = FakeLlm::start(KEY, &[model]).await;
        fake.script([Reply::Text("done".into())]);
        let rt = start(&yaml.replace("MODEL", model), &fake, KEY).await;
        let task = post(&rt, &message("think")).await;
        assert_eq!(task["status"]["state"], "completed", "{model}: {task}");
        let log = fake.requests();
        assert!(log.iter().all(|l| l.refused.is_none()), "{model}: {log:?}");
        let body = &log[0].body;
        let has = |key: &str| body.get(key).is_some();
        match (yaml == own, model) {
            (true, "o4-mini") => {
                assert_eq!(body["reasoning_effort"], "high", "{body}");
                assert_eq!(body["max_completion_tokens"], 500, "{body}");
                assert!(
                    !has("temperature") && !has("top_p") && !has("max_tokens"),
                    "{body}"
                );
            }
            (true, _) => {
                assert_eq!(body["temperature"], 0.2, "{body}");
                assert_eq!(body["max_completion_tokens"], 500, "{body}");
                assert!(!has("reasoning_effort") && !has("max_tokens"), "{body}");
            }
            (false, _) => {
                assert_eq!(body["max_tokens"], 500, "{body}");
                assert!(!has("reasoning_effort"), "declared not to reason: {body}");
            }
        }
    }
}
