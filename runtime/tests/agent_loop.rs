//! The agent loop with the strict fake LLM and an in-process tool source: tool round trips on
//! both providers, limits, failures, concurrency, input-required, cancellation and the events.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use daedalus_contract::{Message, Part, Role};
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_runtime::agents::agent_loop::{
    Agent, AgentOutcome, AgentRequest, Bearer, CallContext, Checkpoint, Checkpointer, Checkpoints,
    EventSink, LlmAgent, LoopEvent, ToolResult, ToolSource,
};
use daedalus_runtime::agents::llm::ToolSpec;
use daedalus_runtime::config::deployment::CompactionPolicy;
use daedalus_runtime::config::sampling::{DropWarnings, SamplingParams};
use daedalus_test_kit::{FakeFace, fake_llm_client};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-loop";

/// Tools that add, fail, hang or sleep; it records each call's arguments.
#[derive(Debug, Default)]
struct FixtureTools {
    calls: Mutex<Vec<(String, Value)>>,
}

#[async_trait]
impl ToolSource for FixtureTools {
    fn serves(&self, server: &str) -> bool {
        server == "fixture"
    }

    async fn tools(&self, _bearer: &Bearer) -> Vec<ToolSpec> {
        ["add", "fail", "hang", "sleep"]
            .iter()
            .map(|t| ToolSpec {
                name: format!("fixture__{t}"),
                description: format!("the {t} tool"),
                input_schema: json!({"type": "object"}),
            })
            .collect()
    }

    async fn call(&self, name: &str, arguments: &Value, _: &CallContext) -> ToolResult {
        self.calls
            .lock()
            .expect("lock")
            .push((name.to_owned(), arguments.clone()));
        match name {
            "fixture__add" => {
                let sum =
                    arguments["a"].as_i64().unwrap_or(0) + arguments["b"].as_i64().unwrap_or(0);
                ToolResult {
                    content: sum.to_string(),
                    is_error: false,
                    files: Vec::new(),
                }
            }
            "fixture__fail" => ToolResult {
                content: "division by zero".into(),
                is_error: true,
                files: Vec::new(),
            },
            "fixture__hang" => std::future::pending().await,
            "fixture__sleep" => {
                tokio::time::sleep(Duration::from_millis(arguments["ms"].as_u64().unwrap_or(0)))
                    .await;
                ToolResult {
                    content: "slept".into(),
                    is_error: false,
                    files: Vec::new(),
                }
            }
            other => ToolResult {
                content: format!("no tool {other}"),
                is_error: true,
                files: Vec::new(),
            },
        }
    }
}

enum Provider {
    OpenAi,
    Anthropic,
}

fn agent(
    fake: &FakeLlm,
    provider: &Provider,
    tools: Arc<FixtureTools>,
    max_iterations: u32,
) -> LlmAgent {
    let (client, model) = match provider {
        Provider::OpenAi => (FakeFace::OpenAi, "gpt-loop"),
        Provider::Anthropic => (FakeFace::Anthropic, "claude-loop"),
    };
    let (client, target) = fake_llm_client(fake, client, KEY, model);
    LlmAgent {
        name: "looper".into(),
        provider: client,
        model: model.into(),
        instruction: "Use the tools.".into(),
        defaults: SamplingParams::default(),
        target,
        vision: false,
        max_output_tokens: 1000,
        context_window: 131_072,
        compaction: CompactionPolicy::default(),
        warnings: Arc::new(DropWarnings::default()),
        tools,
        max_iterations,
        tool_timeout: Duration::from_millis(300),
        sessions: None,
        personalities: std::collections::BTreeMap::new(),
        default_personality: None,
        answering: daedalus_runtime::agents::agent_loop::Answering::default(),
    }
}

fn ask(text: &str, events: EventSink) -> AgentRequest {
    let mut r = AgentRequest::new(
        "t",
        "c",
        Message::new("m", Role::User, vec![Part::text(text)]),
    );
    r.events = events;
    r.stream = true;
    r
}

fn recorder() -> (EventSink, Arc<Mutex<Vec<LoopEvent>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let seen = Arc::clone(&seen);
        EventSink::new(move |e| seen.lock().expect("lock").push(e))
    };
    (sink, seen)
}

fn text_of(outcome: &AgentOutcome) -> String {
    match outcome {
        AgentOutcome::Completed { artifacts } => artifacts[0].parts[0]
            .as_text()
            .unwrap_or_default()
            .to_owned(),
        AgentOutcome::Failed { reason } => format!("FAILED: {reason}"),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn the_model_calls_a_tool_reads_the_result_and_answers_on_both_providers() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let fake = FakeLlm::start(KEY, &["gpt-loop", "claude-loop"]).await;
        fake.script([
            Reply::ToolCalls(vec![("fixture__add".into(), json!({"a": 2, "b": 3}))]),
            Reply::Text("2 + 3 = 5".into()),
        ]);
        let tools = Arc::new(FixtureTools::default());
        let (sink, seen) = recorder();
        let outcome = agent(&fake, &provider, Arc::clone(&tools), 12)
            .run(ask("add 2 and 3", sink), CancellationToken::new())
            .await;
        assert_eq!(text_of(&outcome), "2 + 3 = 5");
        assert_eq!(
            tools.calls.lock().unwrap()[0],
            ("fixture__add".to_owned(), json!({"a": 2, "b": 3}))
        );
        let log = fake.requests();
        assert!(
            log.iter().all(|l| l.refused.is_none()),
            "well-formed tool messages: {log:?}"
        );
        let second = log[1].body["messages"].to_string();
        assert!(
            second.contains("\"5\""),
            "the tool's result went back to the model: {second}"
        );
        assert!(
            log[0].body["tools"]
                .to_string()
                .contains("request_user_input")
        );

        let events = seen.lock().unwrap().clone();
        let kinds: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                LoopEvent::LlmTurnStarted { .. } => Some("llm-start"),
                LoopEvent::LlmTurnFinished { .. } => Some("llm-end"),
                LoopEvent::ToolStarted { .. } => Some("tool-start"),
                LoopEvent::ToolFinished { .. } => Some("tool-end"),
                LoopEvent::ToolFailed { .. } => Some("tool-failed"),
                LoopEvent::Final { .. } => Some("final"),
                LoopEvent::ArtifactChunk { .. } => Some("artifact"),
                LoopEvent::TextDelta { .. }
                | LoopEvent::LlmRetrying { .. }
                | LoopEvent::Compacted { .. } => None,
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "llm-start",
                "llm-end",
                "tool-start",
                "tool-end",
                "llm-start",
                "llm-end",
                "final"
            ]
        );
        assert!(events.iter().any(|e| matches!(e, LoopEvent::ToolStarted { server, tool, step: 1, .. } if server == "fixture" && tool == "add")));
        assert!(events.iter().any(
            |e| matches!(e, LoopEvent::LlmTurnFinished { usage, .. } if usage.input_tokens > 0)
        ));
        assert!(
            events
                .iter()
                .any(|e| matches!(e, LoopEvent::TextDelta { .. })),
            "streamed text is reported"
        );
    }
}

#[tokio::test]
async fn the_iteration_cap_fails_the_task_and_says_so() {
    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script(
        (0..3).map(|i| Reply::ToolCalls(vec![("fixture__add".into(), json!({"a": i, "b": 1}))])),
    );
    let outcome = agent(&fake, &Provider::OpenAi, Arc::default(), 2)
        .run(ask("loop", EventSink::default()), CancellationToken::new())
        .await;
    let text = text_of(&outcome);
    assert!(
        text.contains("stopped after 2 LLM turns") && text.contains("max_iterations"),
        "{text}"
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_tool_error_reaches_the_model_which_recovers() {
    let fake = FakeLlm::start(KEY, &["claude-loop"]).await;
    fake.script([
        Reply::ToolCalls(vec![("fixture__fail".into(), json!({}))]),
        Reply::Text("That failed; here is my best answer.".into()),
    ]);
    let (sink, seen) = recorder();
    let outcome = agent(&fake, &Provider::Anthropic, Arc::default(), 12)
        .run(ask("try", sink), CancellationToken::new())
        .await;
    assert_eq!(text_of(&outcome), "That failed; here is my best answer.");
    let result_turn = &fake.requests()[1].body["messages"][2]["content"][0];
    assert_eq!(result_turn["is_error"], true);
    assert_eq!(result_turn["content"], "division by zero");
    assert!(seen.lock().unwrap().iter().any(
        |e| matches!(e, LoopEvent::ToolFailed { reason, .. } if reason == "division by zero")
    ));
}

#[tokio::test]
async fn tool_names_with_unknown_server_prefixes_share_one_server_label() {
    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("ghost1__x".into(), json!({})),
            ("ghost2__y".into(), json!({})),
            ("fixture__add".into(), json!({"a": 1, "b": 2})),
        ]),
        Reply::Text("done".into()),
    ]);
    let (sink, seen) = recorder();
    let outcome = agent(&fake, &Provider::OpenAi, Arc::default(), 12)
        .run(ask("try", sink), CancellationToken::new())
        .await;
    assert_eq!(text_of(&outcome), "done");
    let mut servers: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            LoopEvent::ToolStarted { server, .. } => Some(server.clone()),
            _ => None,
        })
        .collect();
    servers.sort();
    assert_eq!(servers, ["(unknown)", "(unknown)", "fixture"]);
}

#[tokio::test]
async fn a_hanging_tool_times_out_into_a_result_the_model_reads() {
    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script([
        Reply::ToolCalls(vec![("fixture__hang".into(), json!({}))]),
        Reply::Text("It timed out.".into()),
    ]);
    let outcome = agent(&fake, &Provider::OpenAi, Arc::default(), 12)
        .run(ask("hang", EventSink::default()), CancellationToken::new())
        .await;
    assert_eq!(text_of(&outcome), "It timed out.");
    let sent = fake.requests()[1].body["messages"].to_string();
    assert!(sent.contains("did not answer within 300ms"), "{sent}");
}

#[tokio::test]
async fn parallel_tool_calls_run_concurrently() {
    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script([
        Reply::ToolCalls(vec![
            ("fixture__sleep".into(), json!({"ms": 250})),
            ("fixture__sleep".into(), json!({"ms": 250})),
            ("fixture__sleep".into(), json!({"ms": 250})),
        ]),
        Reply::Text("rested".into()),
    ]);
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let events = Arc::clone(&events);
        EventSink::new(move |e| events.lock().expect("lock").push(e))
    };
    let outcome = agent(&fake, &Provider::OpenAi, Arc::default(), 12)
        .run(ask("sleep", sink), CancellationToken::new())
        .await;
    assert_eq!(text_of(&outcome), "rested");
    let order: Vec<&str> = events
        .lock()
        .expect("lock")
        .iter()
        .filter_map(|e| match e {
            LoopEvent::ToolStarted { .. } => Some("started"),
            LoopEvent::ToolFinished { .. } => Some("finished"),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        [
            "started", "started", "started", "finished", "finished", "finished"
        ],
        "the three tool calls overlapped"
    );
}

#[tokio::test]
async fn request_user_input_makes_the_task_input_required() {
    let fake = FakeLlm::start(KEY, &["claude-loop"]).await;
    fake.script([Reply::ToolCalls(vec![(
        "request_user_input".into(),
        json!({"question": "Which branch?"}),
    )])]);
    let outcome = agent(&fake, &Provider::Anthropic, Arc::default(), 12)
        .run(
            ask("deploy", EventSink::default()),
            CancellationToken::new(),
        )
        .await;
    assert_eq!(
        outcome,
        AgentOutcome::InputRequired {
            question: vec![Part::text("Which branch?")]
        }
    );
}

#[tokio::test]
async fn cancellation_stops_the_loop_at_the_next_safe_point() {
    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script([
        Reply::ToolCalls(vec![("fixture__sleep".into(), json!({"ms": 200}))]),
        Reply::Text("never".into()),
    ]);
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stopper.cancel();
    });
    let outcome = agent(&fake, &Provider::OpenAi, Arc::default(), 12)
        .run(ask("sleep", EventSink::default()), cancel)
        .await;
    assert_eq!(outcome, AgentOutcome::Canceled);
    assert_eq!(
        fake.requests().len(),
        1,
        "no model call after the cancellation"
    );
}

#[tokio::test]
async fn a_sub_agent_is_called_in_process_with_its_events_nested() {
    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script([
        Reply::ToolCalls(vec![(
            "researcher__send_message".into(),
            json!({"message": "What is the answer?"}),
        )]),
        Reply::Text("The answer is 42.".into()),
        Reply::Text("The researcher says 42.".into()),
    ]);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("agents.yaml"),
        format!(
            "default_model: openai.gpt-loop\nopenai: {{ api_key: {KEY}, base_url: \"{}\" }}\nagents:\n  \
             coordinator: {{ instruction: Coordinate., servers: [researcher] }}\n  \
             researcher: {{ instruction: Research., description: Finds answers. }}\n",
            fake.openai_base_url
        ),
    )
    .expect("written");
    let lookup = |_: &str| None;
    let deployment = daedalus_runtime::config::deployment::Deployment::load(
        &daedalus_runtime::config::deployment::Sources {
            env: &lookup,
            cwd: dir.path().to_path_buf(),
            agent_name: "x".into(),
            default_model: "passthrough".into(),
        },
    )
    .expect("the deployment loads");
    let agents = daedalus_runtime::agents::fleet::build(&deployment, None)
        .expect("agents build")
        .agents;
    let (sink, seen) = recorder();
    let outcome = agents["coordinator"]
        .run(ask("ask the researcher", sink), CancellationToken::new())
        .await;
    assert_eq!(text_of(&outcome), "The researcher says 42.");

    let log = fake.requests();
    assert_eq!(log.len(), 3);
    assert_eq!(log[0].body["messages"][0]["content"], "Coordinate.");
    assert!(
        log[0].body["tools"]
            .to_string()
            .contains("researcher__send_message")
    );
    assert!(log[0].body["tools"].to_string().contains("Finds answers."));
    assert_eq!(
        log[1].body["messages"][0]["content"], "Research.",
        "the sub-agent's own turn, in-process"
    );
    assert_eq!(log[1].body["messages"][1]["content"], "What is the answer?");
    assert!(
        log[2].body["messages"]
            .to_string()
            .contains("The answer is 42.")
    );

    let events = seen.lock().unwrap().clone();
    assert!(events.iter().any(|e| matches!(e, LoopEvent::LlmTurnStarted { agent, depth: 1, step: 1 } if agent == "researcher")));
    assert!(events.iter().any(|e| matches!(e, LoopEvent::Final { agent, depth: 1, state: "completed" } if agent == "researcher")));
    assert!(events.iter().any(|e| matches!(e, LoopEvent::ToolFinished { server, tool, depth: 0, .. } if server == "researcher" && tool == "send_message")));
}

#[tokio::test]
async fn a_cancel_abandons_a_tool_call_in_flight() {
    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script([Reply::ToolCalls(vec![("fixture__hang".into(), json!({}))])]);
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    // Cancel once the call has started: the tool never answers, so only abandoning it ends
    // the turn.
    let events = EventSink::new(move |e| {
        if matches!(e, LoopEvent::ToolStarted { .. }) {
            stopper.cancel();
        }
    });
    let looper = agent(&fake, &Provider::OpenAi, Arc::default(), 12);
    let turn = looper.run(ask("hang", events), cancel);
    let outcome = tokio::time::timeout(Duration::from_secs(30), turn)
        .await
        .expect("the turn ended without waiting for the tool");
    assert_eq!(outcome, AgentOutcome::Canceled);
}

/// Keeps every checkpoint the loop hands it.
#[derive(Debug, Default)]
struct Kept(Mutex<Vec<Checkpoint>>);

#[async_trait]
impl Checkpointer for Kept {
    async fn save(&self, checkpoint: &Checkpoint) {
        self.0.lock().expect("lock").push(checkpoint.clone());
    }
}

fn add(a: i64, b: i64) -> Reply {
    Reply::ToolCalls(vec![("fixture__add".into(), json!({"a": a, "b": b}))])
}

/// The checkpoints of a turn of three tool steps and an answer.
async fn checkpoints_of_a_three_step_turn() -> Vec<Checkpoint> {
    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script([
        add(2, 3),
        add(5, 5),
        add(10, 10),
        Reply::Text("done".into()),
    ]);
    let kept = Arc::new(Kept::default());
    let mut request = ask("add things", EventSink::default());
    request.checkpoints = Checkpoints::new(Arc::clone(&kept) as Arc<dyn Checkpointer>);
    let outcome = agent(&fake, &Provider::OpenAi, Arc::default(), 12)
        .run(request, CancellationToken::new())
        .await;
    assert_eq!(text_of(&outcome), "done");
    kept.0.lock().expect("lock").clone()
}

#[tokio::test]
async fn every_completed_step_is_checkpointed_before_the_next_starts() {
    let kept = checkpoints_of_a_three_step_turn().await;
    // Each step: its answer (the calls pending), then its results (none pending).
    let shape: Vec<(u32, usize)> = kept.iter().map(|c| (c.step, c.pending.len())).collect();
    assert_eq!(shape, [(1, 1), (1, 0), (2, 1), (2, 0), (3, 1), (3, 0)]);
    assert!(
        kept.windows(2)
            .all(|w| w[1].messages.len() > w[0].messages.len())
    );
    assert!(
        kept.windows(2)
            .all(|w| w[1].usage.input_tokens >= w[0].usage.input_tokens),
        "usage so far only grows"
    );
    let last = kept.last().expect("a checkpoint");
    assert!(last.usage.input_tokens > 0);
    assert_eq!(last.system.as_deref(), Some("Use the tools."));
}

#[tokio::test]
async fn a_resumed_turn_asks_the_model_only_for_the_steps_it_had_not_finished() {
    let kept = checkpoints_of_a_three_step_turn().await;
    let after_step_1 = kept[1].clone();
    assert_eq!((after_step_1.step, after_step_1.pending.len()), (1, 0));

    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script([add(10, 10), Reply::Text("done".into())]);
    let tools = Arc::new(FixtureTools::default());
    let resumed = Arc::new(Kept::default());
    let mut request = ask("add things", EventSink::default());
    request.resume = Some(Box::new(after_step_1));
    request.checkpoints = Checkpoints::new(Arc::clone(&resumed) as Arc<dyn Checkpointer>);
    let outcome = agent(&fake, &Provider::OpenAi, Arc::clone(&tools), 12)
        .run(request, CancellationToken::new())
        .await;
    assert_eq!(text_of(&outcome), "done");
    let log = fake.requests();
    assert_eq!(log.len(), 2, "steps 2 and 3 only: {log:?}");
    assert!(log.iter().all(|l| l.refused.is_none()), "{log:?}");
    let first = log[0].body["messages"].to_string();
    assert!(
        first.contains("add things") && first.contains("\"5\""),
        "the conversation goes on from step 1's result: {first}"
    );
    assert_eq!(
        *tools.calls.lock().unwrap(),
        [("fixture__add".to_owned(), json!({"a": 10, "b": 10}))],
        "only the new step's tool ran"
    );
    let steps: Vec<u32> = resumed.0.lock().unwrap().iter().map(|c| c.step).collect();
    assert_eq!(steps, [2, 2], "the resumed turn numbers its steps on");
}

#[tokio::test]
async fn a_call_in_flight_at_the_interruption_is_not_made_again_and_the_model_is_told() {
    let kept = checkpoints_of_a_three_step_turn().await;
    let in_flight = kept[2].clone();
    assert_eq!((in_flight.step, in_flight.pending.len()), (2, 1));

    let fake = FakeLlm::start(KEY, &["gpt-loop"]).await;
    fake.script([Reply::Text("done anyway".into())]);
    let tools = Arc::new(FixtureTools::default());
    let mut request = ask("add things", EventSink::default());
    request.resume = Some(Box::new(in_flight));
    let outcome = agent(&fake, &Provider::OpenAi, Arc::clone(&tools), 12)
        .run(request, CancellationToken::new())
        .await;
    assert_eq!(text_of(&outcome), "done anyway");
    assert!(tools.calls.lock().unwrap().is_empty(), "not called again");
    let log = fake.requests();
    assert_eq!(log.len(), 1);
    assert!(log[0].refused.is_none(), "{log:?}");
    let messages = log[0].body["messages"].to_string();
    assert!(messages.contains("was interrupted"), "{messages}");
}
