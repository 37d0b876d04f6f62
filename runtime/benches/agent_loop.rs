//! The agent loop's own cost, and the memory an open session holds.
//!
//! 1. Per iteration (one LLM turn and its tool call), in-process: a provider and tools that
//!    answer at once, so everything measured is the loop itself — request building, events,
//!    the session rows it writes (none, SQLite in memory, SQLite file).
//! 2. Per iteration over the wire: the strict fake LLM and the rmcp fixture server, both
//!    answering at once, against the floor of the same HTTP exchanges made bare (a reqwest POST
//!    of the same body to the fake, an rmcp `tools/call` on an open session).
//! 3. Memory per open session: 1,000 tasks in distinct contexts through the contract face
//!    (`POST /` on the router), each leaving its task record and its conversation; the Rust
//!    heap (a counting allocator) and the process RSS are read before and after.
//!
//! Run: `cargo bench -p daedalus-runtime --bench agent_loop`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use daedalus_contract::{Message, Part, Role};
use daedalus_fake_llm::{AutoReply, FakeLlm};
use daedalus_mcp_fixture::McpFixture;
use daedalus_runtime::agents::agent_loop::{
    Agent, AgentOutcome, AgentRequest, Bearer, CallContext, LlmAgent, ToolResult, ToolSource,
};
use daedalus_runtime::agents::fleet::Fleet;
use daedalus_runtime::agents::llm::openai::OpenAiClient;
use daedalus_runtime::agents::llm::retry::RetryPolicy;
use daedalus_runtime::agents::llm::{
    ChatMessage, ChatRequest, ChatResponse, LlmError, LlmEvent, LlmProvider, StopReason, ToolCall,
    ToolSpec, Usage,
};
use daedalus_runtime::agents::mcp_client::McpServers;
use daedalus_runtime::config::deployment::{McpServer, ProviderSettings};
use daedalus_runtime::config::sampling::{DropWarnings, SamplingParams, Target};
use daedalus_runtime::lifecycle::startup;
use daedalus_runtime::stores::conversations::{ConversationStore, SqliteStore};
use daedalus_test_kit::runtime_config;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

#[expect(
    unsafe_code,
    reason = "a counting allocator must implement GlobalAlloc"
)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        ALLOCATED.fetch_add(u64::try_from(layout.size()).unwrap_or(0), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        FREED.fetch_add(u64::try_from(layout.size()).unwrap_or(0), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes allocated and not yet freed, by the whole process.
fn live_bytes() -> f64 {
    ALLOCATED.load(Ordering::Relaxed) as f64 - FREED.load(Ordering::Relaxed) as f64
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Resident set size in bytes, from /proc.
fn rss() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: i64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    (pages * 4096) as f64
}

const ITERATIONS: u32 = 10;
const KEY: &str = "sk-bench";

/// Calls `t__op` until the conversation holds `ITERATIONS - 1` tool results, then answers.
#[derive(Debug)]
struct InstantModel;

#[async_trait]
impl LlmProvider for InstantModel {
    fn name(&self) -> &'static str {
        "instant"
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        _: &(dyn Fn(LlmEvent) + Send + Sync),
    ) -> Result<ChatResponse, LlmError> {
        let done = request
            .messages
            .iter()
            .filter(|m| matches!(m, ChatMessage::Tool { .. }))
            .count();
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Usage::default()
        };
        Ok(if done + 1 >= ITERATIONS as usize {
            ChatResponse {
                text: Some("All done.".into()),
                tool_calls: Vec::new(),
                usage,
                stop_reason: StopReason::EndTurn,
            }
        } else {
            ChatResponse {
                text: None,
                tool_calls: vec![ToolCall {
                    id: format!("call-{done}"),
                    name: "t__op".into(),
                    arguments: json!({"n": done}),
                }],
                usage,
                stop_reason: StopReason::ToolUse,
            }
        })
    }
}

#[derive(Debug)]
struct InstantTools;

#[async_trait]
impl ToolSource for InstantTools {
    fn serves(&self, server: &str) -> bool {
        server == "t"
    }

    async fn tools(&self, _bearer: &Bearer) -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "t__op".into(),
            description: "Does it".into(),
            input_schema: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        }]
    }

    async fn call(&self, _: &str, arguments: &Value, _: &CallContext) -> ToolResult {
        ToolResult {
            content: format!("ok {}", arguments["n"]),
            is_error: false,
            files: Vec::new(),
        }
    }
}

fn agent(
    provider: Arc<dyn LlmProvider>,
    tools: Arc<dyn ToolSource>,
    sessions: Option<Arc<dyn ConversationStore>>,
    model: &str,
) -> LlmAgent {
    LlmAgent {
        name: "bench".into(),
        provider,
        model: model.into(),
        instruction: "You are a helpful assistant.".into(),
        defaults: SamplingParams::default(),
        target: Target::openai(false, "gpt-bench", None),
        vision: false,
        max_output_tokens: 1024,
        context_window: 131_072,
        compaction: daedalus_runtime::config::deployment::CompactionPolicy::default(),
        warnings: Arc::new(DropWarnings::default()),
        tools,
        max_iterations: ITERATIONS + 2,
        tool_timeout: Duration::from_mins(1),
        sessions,
        personalities: std::collections::BTreeMap::new(),
        default_personality: None,
        answering: daedalus_runtime::agents::agent_loop::Answering::default(),
    }
}

fn ask(context: &str, text: &str) -> AgentRequest {
    let id = uuid::Uuid::new_v4().to_string();
    AgentRequest::new(
        &id,
        context,
        Message::new(id.clone(), Role::User, vec![Part::text(text)]),
    )
}

fn p50(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn p99(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() * 99 / 100]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Part 1: the loop's own time per iteration, in-process.
async fn in_process() {
    const TASKS: usize = 300;
    println!(
        "\n1. loop overhead per iteration, in-process ({TASKS} tasks x {ITERATIONS} iterations; model and tools answer at once)\n"
    );
    println!("| sessions | p50 / iteration | p99 / iteration | allocations / iteration |");
    println!("|---|---|---|---|");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("bench.sqlite");
    let stores: [(&str, Option<Arc<dyn ConversationStore>>); 3] = [
        ("none", None),
        (
            "SQLite :memory:",
            Some(Arc::new(SqliteStore::open(":memory:").expect("store"))),
        ),
        (
            "SQLite file (WAL)",
            Some(Arc::new(
                SqliteStore::open(&file.to_string_lossy()).expect("store"),
            )),
        ),
    ];
    for (name, store) in stores {
        let a = agent(Arc::new(InstantModel), Arc::new(InstantTools), store, "m");
        let mut samples = Vec::with_capacity(TASKS);
        let mut allocs = 0;
        for i in 0..TASKS + 30 {
            let before = allocations();
            let started = Instant::now();
            let outcome = a
                .run(ask(&format!("ctx-{i}"), "go"), CancellationToken::new())
                .await;
            let took = started.elapsed();
            assert!(
                matches!(outcome, AgentOutcome::Completed { .. }),
                "{outcome:?}"
            );
            if i >= 30 {
                samples.push(took / ITERATIONS);
                allocs += allocations() - before;
            }
        }
        println!(
            "| {name} | {:.4} ms | {:.4} ms | {:.0} |",
            ms(p50(samples.clone())),
            ms(p99(samples)),
            allocs as f64 / (TASKS as f64 * f64::from(ITERATIONS)),
        );
    }
}

/// Part 2: the same over the wire, against the floor of bare exchanges.
async fn over_the_wire(fake: &FakeLlm, fixture_url: &str) {
    const TASKS: usize = 300;
    let settings = ProviderSettings {
        api_key: Some(KEY.into()),
        base_url: Some(fake.openai_base_url.clone()),
        headers: BTreeMap::new(),
        timeout_secs: Some(10.0),
        forward_inbound_auth: false,
        dialect: None,
        origins: daedalus_runtime::config::deployment::ProviderOrigins::default(),
    };
    let provider: Arc<dyn LlmProvider> =
        Arc::new(OpenAiClient::new(&settings, RetryPolicy::default()).expect("client"));
    let servers = Arc::new(McpServers::new(BTreeMap::from([(
        "fx".to_owned(),
        McpServer {
            kind: daedalus_runtime::config::deployment::ServerKind::Mcp,
            url: fixture_url.to_owned(),
            headers: BTreeMap::new(),
            forward_inbound_auth: false,
            auth: None,
            call_timeout: None,
            idempotent: false,
            trust: daedalus_runtime::config::deployment::CardTrust::default(),
        },
    )])));
    let a = agent(provider, servers, None, "gpt-bench");

    // A task is two iterations: the model calls fx__echo, then answers the tool result.
    let mut looped = Vec::with_capacity(TASKS);
    for i in 0..TASKS + 30 {
        let started = Instant::now();
        let outcome = a
            .run(
                ask(&format!("w-{i}"), &format!("n={i}")),
                CancellationToken::new(),
            )
            .await;
        assert!(
            matches!(outcome, AgentOutcome::Completed { .. }),
            "{outcome:?}"
        );
        if i >= 30 {
            looped.push(started.elapsed() / 2);
        }
    }

    // The floor: the same two model exchanges and one tool call, made bare.
    let raw = reqwest::Client::new();
    let url = format!("{}/chat/completions", fake.openai_base_url);
    let tools = json!([{"type": "function", "function": {"name": "fx__echo", "description": "Echoes n",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}}]);
    let first = |i: usize| {
        json!({"model": "gpt-bench", "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": format!("n={i}")}], "tools": tools, "max_tokens": 1024})
        .to_string()
    };
    let second = |i: usize| {
        json!({"model": "gpt-bench", "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": format!("n={i}")},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
              "function": {"name": "fx__echo", "arguments": format!("{{\"n\":{i}}}")}}]},
            {"role": "tool", "tool_call_id": "c1", "content": i.to_string()}],
            "tools": tools, "max_tokens": 1024})
        .to_string()
    };
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(fixture_url.to_owned());
    let client = rmcp::ServiceExt::serve((), transport)
        .await
        .expect("an MCP session");
    let mut floor = Vec::with_capacity(TASKS);
    for i in 0..TASKS + 30 {
        let started = Instant::now();
        for body in [first(i), second(i)] {
            let r = raw
                .post(&url)
                .bearer_auth(KEY)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("sent");
            assert_eq!(r.status(), 200);
            r.bytes().await.expect("body");
        }
        let args = json!({"n": i}).as_object().cloned().unwrap_or_default();
        client
            .call_tool(rmcp::model::CallToolRequestParams::new("echo").with_arguments(args))
            .await
            .expect("called");
        if i >= 30 {
            floor.push(started.elapsed() / 2);
        }
    }
    let (lp50, lp99, fp50, fp99) = (
        p50(looped.clone()),
        p99(looped),
        p50(floor.clone()),
        p99(floor),
    );
    println!(
        "\n2. per iteration over the wire (strict fake LLM + rmcp fixture server, {TASKS} tasks of 2 iterations)\n"
    );
    println!("| | p50 | p99 |");
    println!("|---|---|---|");
    println!(
        "| floor: bare POSTs + bare tools/call | {:.3} ms | {:.3} ms |",
        ms(fp50),
        ms(fp99)
    );
    println!("| agent loop | {:.3} ms | {:.3} ms |", ms(lp50), ms(lp99));
    println!(
        "| loop's own time | {:.3} ms | {:.3} ms |",
        ms(lp50.saturating_sub(fp50)),
        ms(lp99.saturating_sub(fp99))
    );
}

/// Part 3: memory per open session, through the contract face.
async fn memory_per_session() {
    use tower::ServiceExt as _;
    const SESSIONS: usize = 1000;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("sessions.sqlite");
    println!("\n3. memory per open session ({SESSIONS} contexts, one task each, via POST /)\n");
    println!("| sessions | Rust heap / session | RSS / session |");
    println!("|---|---|---|");
    for (name, path) in [
        (
            "SQLite file (the default)",
            file.to_string_lossy().into_owned(),
        ),
        ("SQLite :memory:", ":memory:".to_owned()),
    ] {
        let store: Arc<dyn ConversationStore> = Arc::new(SqliteStore::open(&path).expect("store"));
        let a: Arc<dyn Agent> = Arc::new(agent(
            Arc::new(InstantModel),
            Arc::new(InstantTools),
            Some(store),
            "m",
        ));
        let mut config = runtime_config("bench", "127.0.0.1:8080".parse().expect("addr"));
        config.max_tasks = SESSIONS * 2;
        let core = startup::build_core(&config, Fleet::single("bench", a), None);
        core.readiness().set_ready();
        let state = startup::a2a_face(&config, core, config.listen).expect("state");
        let router = daedalus_runtime::faces::a2a::router(state);
        let post = |i: usize| {
            let body = json!({"message": {"messageId": format!("m-{name}-{i}"), "contextId": format!("ctx-{i}"),
                "role": "user", "parts": [{"text": "Please work through this, step by step."}]}});
            axum::http::Request::post("/")
                .header("content-type", "application/json")
                .body(axum::body::Body::from(body.to_string()))
                .expect("request")
        };
        // Warm up: allocator pools, SQLite caches, the first task record.
        for i in 0..50 {
            let r = router
                .clone()
                .oneshot(post(SESSIONS + i))
                .await
                .expect("answered");
            assert_eq!(r.status(), 200);
        }
        let (heap_before, rss_before) = (live_bytes(), rss());
        for i in 0..SESSIONS {
            let r = router.clone().oneshot(post(i)).await.expect("answered");
            assert_eq!(r.status(), 200);
        }
        let (heap_after, rss_after) = (live_bytes(), rss());
        println!(
            "| {name} | {:.1} KiB | {:.1} KiB |",
            (heap_after - heap_before) / SESSIONS as f64 / 1024.0,
            (rss_after - rss_before) / SESSIONS as f64 / 1024.0,
        );
    }
    println!(
        "\neach task ran {ITERATIONS} iterations, so a session holds {} rows; the Rust heap is the runtime's \
         own memory (task record, caches), RSS adds SQLite's page cache",
        2 * ITERATIONS
    );
}

fn main() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("the fakes' runtime");
        rt.block_on(async {
            let fake = FakeLlm::start(KEY, &["gpt-bench"]).await;
            fake.auto(AutoReply {
                tools: vec!["fx__echo".into()],
                text: "done".into(),
                ..Default::default()
            });
            let fixture = McpFixture::start().await;
            tx.send((fake, fixture.url())).expect("hand over");
            let _keep = fixture;
            std::future::pending::<()>().await;
        });
    });
    let (fake, fixture_url) = rx.recv().expect("the fakes started");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        in_process().await;
        over_the_wire(&fake, &fixture_url).await;
        memory_per_session().await;
    });
}
