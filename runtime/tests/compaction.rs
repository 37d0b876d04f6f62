//! Compaction (contract level 3) with the strict fake LLM: a stored conversation that outgrows
//! a small context window is summarized or truncated by whole turns, on SQLite and on NATS KV,
//! on both providers; the summary request is the one the fake expects; the report is in the
//! Task's `metadata.compaction` and on a status update of its stream.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use daedalus_contract::{Compaction, CompactionStrategy, Message, Part, Role, Schema};
use daedalus_fake_llm::{FakeLlm, Logged, Reply};
use daedalus_runtime::agents::agent_loop::{
    Agent, AgentOutcome, AgentRequest, EventSink, LlmAgent, LoopEvent, NoTools, SUMMARY_HEADING,
    SUMMARY_PROMPT,
};
use daedalus_runtime::agents::llm::ToolCall;
use daedalus_runtime::config::deployment::CompactionPolicy;
use daedalus_runtime::config::sampling::{DropWarnings, SamplingParams};
use daedalus_runtime::stores::conversations::{
    ConversationStore, NatsKvStore, NewRow, Row, RowRole, RowStatus, SqliteStore,
};
use daedalus_test_kit::{FakeFace, NatsServer, SseEvents, fake_llm_client};
use serde_json::{Value, json};
use support::runtime::Runtime;
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-compact";
const CONTEXT: &str = "long-talk";
/// Earlier turns in the conversation before the test's turn.
const EARLIER_TURNS: usize = 8;

#[derive(Clone, Copy)]
enum Provider {
    OpenAi,
    Anthropic,
}

/// An agent on a 3000-token window with 500 for output: compaction starts past 2000 tokens
/// (0.8 of 2500); a summary leaves at most 1000, truncation at most 2000.
fn agent(
    fake: &FakeLlm,
    provider: Provider,
    strategy: CompactionStrategy,
    store: Arc<dyn ConversationStore>,
) -> LlmAgent {
    let (wire, model) = match provider {
        Provider::OpenAi => (FakeFace::OpenAi, "gpt-small"),
        Provider::Anthropic => (FakeFace::Anthropic, "claude-small"),
    };
    let (client, target) = fake_llm_client(fake, wire, KEY, model);
    LlmAgent {
        name: "talker".into(),
        provider: client,
        model: model.into(),
        instruction: "Answer briefly.".into(),
        defaults: SamplingParams::default(),
        target,
        vision: false,
        max_output_tokens: 500,
        context_window: 3_000,
        compaction: CompactionPolicy {
            strategy,
            threshold: 0.8,
        },
        warnings: Arc::new(DropWarnings::default()),
        tools: Arc::new(NoTools),
        max_iterations: 3,
        tool_timeout: Duration::from_secs(5),
        sessions: Some(store),
        personalities: std::collections::BTreeMap::new(),
        default_personality: None,
        answering: daedalus_runtime::agents::agent_loop::Answering::default(),
    }
}

/// Eight settled turns of about 330 tokens each, every one with a tool call and its result.
async fn a_long_conversation(store: &dyn ConversationStore) {
    let mut rows = Vec::new();
    for i in 0..EARLIER_TURNS {
        let mut question = NewRow::new(
            RowRole::User,
            format!("question {i}: {}", "x".repeat(400)),
            RowStatus::Complete,
        );
        question.message_id = Some(format!("client-{i}"));
        let mut call = NewRow::new(RowRole::Assistant, "", RowStatus::Complete);
        call.tool_calls = vec![ToolCall {
            id: format!("call-{i}"),
            name: "calc__add".into(),
            arguments: json!({"a": i, "b": 1}),
        }];
        let mut result = NewRow::new(
            RowRole::Tool,
            format!("result {i}: {}", "r".repeat(400)),
            RowStatus::Complete,
        );
        result.tool_call_id = Some(format!("call-{i}"));
        let answer = NewRow::new(
            RowRole::Assistant,
            format!("answer {i}: {}", "y".repeat(400)),
            RowStatus::Complete,
        );
        rows.extend([question, call, result, answer]);
    }
    store
        .append(CONTEXT, rows)
        .await
        .expect("the store answers");
}

/// Runs one turn of the conversation; returns its outcome and the compactions it reported.
async fn turn(agent: &LlmAgent, text: &str) -> (AgentOutcome, Vec<Compaction>) {
    let seen: Arc<Mutex<Vec<Compaction>>> = Arc::default();
    let mut request = AgentRequest::new(
        "t",
        CONTEXT,
        Message::new("m-new", Role::User, vec![Part::text(text)]),
    );
    let log = Arc::clone(&seen);
    request.events = EventSink::new(move |e| {
        if let LoopEvent::Compacted { report, .. } = e {
            log.lock().expect("lock").push(report);
        }
    });
    let outcome = agent.run(request, CancellationToken::new()).await;
    let reports = seen.lock().expect("lock").clone();
    (outcome, reports)
}

fn answer(outcome: &AgentOutcome) -> &str {
    match outcome {
        AgentOutcome::Completed { artifacts } => artifacts[0].parts[0].as_text().unwrap_or(""),
        other => panic!("the turn did not complete: {other:?}"),
    }
}

/// The system prompt a request carried, on either provider.
fn system_of(request: &Logged) -> String {
    match request.body.get("system") {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        Some(system) => system.as_str().unwrap_or_default().to_owned(),
        None => request.body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// No tool call without its result, and no result without its call.
fn assert_no_tool_pair_is_split(rows: &[Row]) {
    let calls: HashSet<&str> = rows
        .iter()
        .flat_map(|r| &r.tool_calls)
        .map(|c| c.id.as_str())
        .collect();
    let results: HashSet<&str> = rows
        .iter()
        .filter_map(|r| r.tool_call_id.as_deref())
        .collect();
    assert_eq!(calls, results, "{rows:#?}");
}

fn users(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.role == RowRole::User)
        .map(|r| r.content.split(':').next().unwrap_or_default().to_owned())
        .collect()
}

/// `summarize` on `store` through `provider`: the fake gets the summary request first, then
/// the turn's request with the summary in the system prompt and only the newest turns; the
/// store keeps the summary in place of the oldest turns.
async fn summarizes(store: Arc<dyn ConversationStore>, provider: Provider) {
    let fake = FakeLlm::start(KEY, &["gpt-small", "claude-small"]).await;
    a_long_conversation(store.as_ref()).await;
    fake.script([
        Reply::Text("SUMMARY: eight sums were asked and answered.".into()),
        Reply::Text("the answer".into()),
    ]);
    let talker = agent(
        &fake,
        provider,
        CompactionStrategy::Summarize,
        Arc::clone(&store),
    );

    let (outcome, reports) = turn(&talker, "the new question").await;
    assert_eq!(answer(&outcome), "the answer");
    let log = fake.requests();
    assert_eq!(log.len(), 2, "the summary request, then the turn's");
    assert!(log.iter().all(|r| r.refused.is_none()), "{log:#?}");

    // The summary request: the prompt, no tools, the oldest turns and not the new message.
    let summary_request = &log[0];
    assert_eq!(system_of(summary_request), SUMMARY_PROMPT);
    assert!(
        summary_request.body["tools"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{}",
        summary_request.body
    );
    let shown = summary_request.body["messages"].to_string();
    assert!(shown.contains("question 0"), "{shown}");
    assert!(shown.contains("Assistant called calc__add"), "{shown}");
    assert!(!shown.contains("the new question"), "{shown}");
    assert!(
        !shown.contains(&format!("question {}", EARLIER_TURNS - 1)),
        "the newest turn stays, so it is not summarized"
    );

    // The turn's request: the summary in the system prompt, the oldest turns gone.
    let asked = &log[1];
    let system = system_of(asked);
    assert!(system.starts_with("Answer briefly."), "{system}");
    assert!(system.contains(SUMMARY_HEADING), "{system}");
    assert!(system.contains("SUMMARY: eight sums"), "{system}");
    let sent = asked.body["messages"].to_string();
    assert!(!sent.contains("question 0"), "{sent}");
    assert!(sent.contains(&format!("question {}", EARLIER_TURNS - 1)));
    assert!(sent.contains("the new question"));

    // The report.
    let [report] = reports.as_slice() else {
        panic!("one compaction: {reports:?}");
    };
    let rows = store
        .rows(CONTEXT, usize::MAX)
        .await
        .expect("the store answers");
    let kept_turns = users(&rows).len() - 1;
    assert_eq!(report.strategy, CompactionStrategy::Summarize);
    assert_eq!(report.messages_before, 4 * EARLIER_TURNS as u64 + 1);
    assert_eq!(
        report.messages_after,
        4 * kept_turns as u64 + 1 + 1,
        "{report:?}"
    );
    assert!(report.tokens_after < report.tokens_before, "{report:?}");
    assert!(
        report.tokens_before > 2_000 && report.tokens_after <= 1_000,
        "{report:?}"
    );

    // The store: the summary first, then whole turns, the new one last.
    assert_eq!(rows[0].role, RowRole::Summary);
    assert_eq!(
        rows[0].content,
        "SUMMARY: eight sums were asked and answered."
    );
    assert!((1..EARLIER_TURNS).contains(&kept_turns), "{kept_turns}");
    assert_eq!(
        rows[1].role,
        RowRole::User,
        "a kept turn starts at its question"
    );
    assert_eq!(
        users(&rows).last().map(String::as_str),
        Some("the new question")
    );
    assert_no_tool_pair_is_split(&rows);

    // The next turn fits: no compaction, and the summary still leads the system prompt.
    fake.script([Reply::Text("again".into())]);
    let (outcome, reports) = turn(&talker, "one more").await;
    assert_eq!(answer(&outcome), "again");
    assert!(reports.is_empty(), "{reports:?}");
    assert!(system_of(&fake.requests()[2]).contains("SUMMARY: eight sums"));
}

/// `truncate` on `store`: no summary request; the oldest whole turns are gone from the store.
async fn truncates(store: Arc<dyn ConversationStore>) {
    let fake = FakeLlm::start(KEY, &["gpt-small"]).await;
    a_long_conversation(store.as_ref()).await;
    fake.script([Reply::Text("the answer".into())]);
    let talker = agent(
        &fake,
        Provider::OpenAi,
        CompactionStrategy::Truncate,
        Arc::clone(&store),
    );

    let (outcome, reports) = turn(&talker, "the new question").await;
    assert_eq!(answer(&outcome), "the answer");
    let log = fake.requests();
    assert_eq!(log.len(), 1, "no summary request");
    assert_eq!(system_of(&log[0]), "Answer briefly.");
    let [report] = reports.as_slice() else {
        panic!("one compaction: {reports:?}");
    };
    let rows = store
        .rows(CONTEXT, usize::MAX)
        .await
        .expect("the store answers");
    let kept_turns = users(&rows).len() - 1;
    assert_eq!(report.strategy, CompactionStrategy::Truncate);
    assert_eq!(report.messages_before, 4 * EARLIER_TURNS as u64 + 1);
    assert_eq!(report.messages_after, 4 * kept_turns as u64 + 1);
    assert!(report.tokens_after <= 2_000, "{report:?}");
    assert!(
        kept_turns > 2,
        "truncation drops the fewest turns: {kept_turns} kept"
    );
    assert!(rows.iter().all(|r| r.role != RowRole::Summary));
    assert_eq!(rows[0].role, RowRole::User);
    let first_kept = EARLIER_TURNS - kept_turns;
    assert_eq!(users(&rows)[0], format!("question {first_kept}"));
    assert_eq!(
        rows[0].message_id.as_deref(),
        Some(format!("client-{first_kept}").as_str()),
        "what stays keeps the id it was sent with"
    );
    assert_no_tool_pair_is_split(&rows);
}

#[tokio::test]
async fn summarize_on_sqlite_through_openai() {
    summarizes(
        Arc::new(SqliteStore::open(":memory:").expect("store")),
        Provider::OpenAi,
    )
    .await;
}

#[tokio::test]
async fn summarize_on_nats_kv_through_anthropic() {
    let nats = NatsServer::start();
    let store = NatsKvStore::open(&nats.url(), "sessions", Duration::from_mins(1))
        .await
        .expect("the store answers");
    summarizes(Arc::new(store), Provider::Anthropic).await;
}

#[tokio::test]
async fn truncate_on_sqlite() {
    truncates(Arc::new(SqliteStore::open(":memory:").expect("store"))).await;
}

#[tokio::test]
async fn truncate_on_nats_kv() {
    let nats = NatsServer::start();
    let store = NatsKvStore::open(&nats.url(), "sessions", Duration::from_mins(1))
        .await
        .expect("the store answers");
    truncates(Arc::new(store)).await;
}

#[tokio::test]
async fn a_summary_the_model_cannot_give_falls_back_to_truncate_and_says_so() {
    let store: Arc<dyn ConversationStore> = Arc::new(SqliteStore::open(":memory:").expect("store"));
    let fake = FakeLlm::start(KEY, &["gpt-small"]).await;
    a_long_conversation(store.as_ref()).await;
    fake.script([
        Reply::Error {
            status: 400,
            retry_after: None,
        },
        Reply::Text("the answer".into()),
    ]);
    let talker = agent(
        &fake,
        Provider::OpenAi,
        CompactionStrategy::Summarize,
        Arc::clone(&store),
    );
    let (outcome, reports) = turn(&talker, "the new question").await;
    assert_eq!(answer(&outcome), "the answer", "the turn goes on");
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].strategy, CompactionStrategy::Truncate);
    let rows = store
        .rows(CONTEXT, usize::MAX)
        .await
        .expect("the store answers");
    assert!(rows.iter().all(|r| r.role != RowRole::Summary));
    assert!(users(&rows).len() < EARLIER_TURNS);
}

/// Through the runtime: the turn that compacts reports it on its Task and on a status update of
/// its stream, and both validate against the schemas.
#[tokio::test]
async fn the_task_and_its_stream_report_the_compaction() {
    let fake = FakeLlm::start(KEY, &["gpt-small"]).await;
    let yaml = format!(
        "default_model: openai.gpt-small\n\
         model_capabilities: {{ context_window: 1200, max_output_tokens: 200 }}\n\
         openai: {{ api_key: {KEY}, base_url: \"{}\" }}\n\
         agents:\n  talker:\n    instruction: Answer.\n    compaction: {{ strategy: summarize, threshold: 0.7 }}\n",
        fake.openai_base_url
    );
    let rt = Runtime::start(&yaml).await;
    let http = reqwest::Client::new();
    let body = |n: usize| {
        json!({"message": {"messageId": format!("m-{n}"), "contextId": "ctx", "role": "user",
            "parts": [{"text": format!("turn {n}: {}", "w".repeat(420))}]}})
    };
    // Each turn adds about 220 tokens to the 50 of the instruction and tools; compaction starts
    // past 700 (0.7 of 1000): three turns fit, the fourth compacts.
    for n in 0..3 {
        fake.script([Reply::Text(format!("reply {n}: {}", "z".repeat(420)))]);
        let task: Value = http
            .post(format!("{}/", rt.url))
            .json(&body(n))
            .send()
            .await
            .expect("sent")
            .json()
            .await
            .expect("a Task");
        assert_eq!(task["status"]["state"], "completed", "{task}");
        assert!(
            task["metadata"]["compaction"].is_null(),
            "turn {n} fits: {task}"
        );
    }

    // The fourth, streamed: the summary request comes first, then the answer.
    fake.script([
        Reply::Text("SUMMARY of turns".into()),
        Reply::Text("reply 3".into()),
    ]);
    let response = http
        .post(format!("{}/", rt.url))
        .header("accept", "text/event-stream")
        .json(&body(3))
        .send()
        .await
        .expect("sent");
    let mut events = SseEvents::of(response);
    let mut reported = Vec::new();
    let mut last = Value::Null;
    while let Some(event) = events.next_json().await {
        assert!(Schema::StreamEvent.validate(&event).is_ok(), "{event}");
        if let Some(metadata) = event["statusUpdate"]["metadata"].as_object() {
            reported.extend(metadata.get("compaction").cloned());
        }
        last = event;
    }
    assert_eq!(last["statusUpdate"]["final"], true, "{last}");
    assert_eq!(
        reported.len(),
        2,
        "the working update that compacted, and the final one"
    );
    let report: Compaction = serde_json::from_value(reported[0].clone()).expect("typed");
    assert_eq!(report.strategy, CompactionStrategy::Summarize);
    assert!(report.tokens_after < report.tokens_before);
    assert_eq!(reported[0], reported[1]);

    // A replay of the same message returns the Task, with the same report.
    let task: Value = http
        .post(format!("{}/", rt.url))
        .json(&body(3))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("a Task");
    assert!(Schema::Task.validate(&task).is_ok(), "{task}");
    assert_eq!(task["metadata"]["compaction"], reported[0]);
    let summary_request = &fake.requests()[3];
    assert!(summary_request.body.to_string().contains("turn 0"));
}
