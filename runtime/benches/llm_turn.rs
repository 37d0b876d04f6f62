//! The runtime's own overhead per LLM turn, with the fake LLM answering at once.
//!
//! The fake runs on its own threads; the measured code runs on this thread's current-thread
//! runtime, and a thread-local counting allocator counts only this thread's allocations. For
//! each provider and mode (streaming or not) it compares:
//! - the floor: a bare `reqwest` POST of a pre-built body to the fake, reading the bytes;
//! - a full turn through `LlmAgent` (request building, sampling, the client, SSE or JSON
//!   decoding, the outcome).
//!
//! The difference is the runtime's own time and allocations per turn. Target: under 1 ms.
//! Run: `cargo bench -p daedalus-runtime --bench llm_turn`.

#![allow(clippy::print_stdout, reason = "a benchmark prints its table")]
#![allow(clippy::cast_precision_loss, reason = "figures for people")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use daedalus_contract::{Message, Part, Role};
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_runtime::agents::agent_loop::{Agent, AgentRequest, LlmAgent, NoTools};
use daedalus_runtime::agents::llm::anthropic::AnthropicClient;
use daedalus_runtime::agents::llm::openai::OpenAiClient;
use daedalus_runtime::agents::llm::retry::RetryPolicy;
use daedalus_runtime::agents::llm::{ChatMessage, ChatRequest, Content, LlmProvider};
use daedalus_runtime::config::deployment::ProviderSettings;
use daedalus_runtime::config::sampling::{DropWarnings, Sampling, SamplingParams, Setting, Target};
use tokio_util::sync::CancellationToken;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

#[expect(
    unsafe_code,
    reason = "a counting allocator must implement GlobalAlloc"
)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

const TURNS: usize = 2000;
const KEY: &str = "sk-bench";

struct Figures {
    p50: Duration,
    allocs: f64,
}

async fn measure<F, Fut>(mut turn: F) -> Figures
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..200 {
        turn().await;
    }
    let mut samples = Vec::with_capacity(TURNS);
    let before = allocations();
    for _ in 0..TURNS {
        let started = Instant::now();
        turn().await;
        samples.push(started.elapsed());
    }
    let allocs = (allocations() - before) as f64 / TURNS as f64;
    samples.sort();
    Figures {
        p50: samples[TURNS / 2],
        allocs,
    }
}

fn request(stream: bool) -> AgentRequest {
    let question = vec![Part::text("What is two plus two? Answer briefly.")];
    let mut request = AgentRequest::new("t", "c", Message::new("m", Role::User, question));
    request.stream = stream;
    request
}

fn agent(provider: Arc<dyn LlmProvider>, model: &str, target: Target) -> LlmAgent {
    LlmAgent {
        name: "bench".into(),
        provider,
        model: model.into(),
        instruction: "You are a helpful assistant.".into(),
        defaults: SamplingParams {
            temperature: Setting::Set(0.2),
            ..SamplingParams::default()
        },
        target,
        vision: false,
        max_output_tokens: 1024,
        context_window: 131_072,
        compaction: daedalus_runtime::config::deployment::CompactionPolicy::default(),
        warnings: Arc::new(DropWarnings::default()),
        tools: Arc::new(NoTools),
        max_iterations: 12,
        tool_timeout: Duration::from_mins(1),
        sessions: None,
        personalities: std::collections::BTreeMap::new(),
        default_personality: None,
        answering: daedalus_runtime::agents::agent_loop::Answering::default(),
    }
}

fn main() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().expect("the fake's runtime");
        rt.block_on(async {
            let fake = FakeLlm::start(KEY, &["gpt-bench", "claude-bench"]).await;
            tx.send(fake).expect("hand over the fake");
            std::future::pending::<()>().await;
        });
    });
    let fake = rx.recv().expect("the fake started");
    fake.script(
        (0..(TURNS + 200) * 8 + 10).map(|_| Reply::Text("Four. Two plus two is four.".into())),
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let settings = |base: &str| ProviderSettings {
            api_key: Some(KEY.into()),
            base_url: Some(base.into()),
            headers: BTreeMap::new(),
            timeout_secs: Some(10.0),
            forward_inbound_auth: false,
            dialect: None,
            origins: daedalus_runtime::config::deployment::ProviderOrigins::default(),
        };
        let openai: Arc<dyn LlmProvider> =
            Arc::new(OpenAiClient::new(&settings(&fake.openai_base_url), RetryPolicy::default()).expect("client"));
        let anthropic: Arc<dyn LlmProvider> =
            Arc::new(AnthropicClient::new(&settings(&fake.anthropic_base_url), RetryPolicy::default()).expect("client"));

        println!("\nruntime overhead per LLM turn ({TURNS} turns each; the fake answers at once)\n");
        println!("| provider | mode | floor p50 | turn p50 | own time | floor allocs | turn allocs | own allocs |");
        println!("|---|---|---|---|---|---|---|---|");
        let raw = reqwest::Client::new();
        for (name, provider, model, target, url, wire) in [
            ("openai", &openai, "gpt-bench", Target::openai(false, "gpt-bench", None), format!("{}/chat/completions", fake.openai_base_url), "openai"),
            ("anthropic", &anthropic, "claude-bench", Target::Anthropic { model: "claude-bench".into() }, format!("{}/v1/messages", fake.anthropic_base_url), "anthropic"),
        ] {
            for stream in [false, true] {
                let chat = ChatRequest {
                    model: model.into(),
                    system: Some("You are a helpful assistant.".into()),
                    messages: vec![ChatMessage::User { content: vec![Content::Text { text: "What is two plus two? Answer briefly.".into() }] }],
                    tools: Vec::new(),
                    sampling: Sampling { temperature: Some(0.2), max_tokens: Some(1024), ..Sampling::default() },
                    stream,
                    caller: daedalus_runtime::platform::bearer::Bearer::default(),
                    extra: serde_json::Map::new(),
                };
                let body = if wire == "openai" {
                    daedalus_runtime::agents::llm::openai::to_wire(&chat, daedalus_runtime::config::deployment::OpenAiDialect::Compatible).to_string()
                } else {
                    daedalus_runtime::agents::llm::anthropic::to_wire(&chat).to_string()
                };
                let floor = measure(|| {
                    let req = raw
                        .post(&url)
                        .header("authorization", format!("Bearer {KEY}"))
                        .header("x-api-key", KEY)
                        .header("anthropic-version", "2023-06-01")
                        .header("content-type", "application/json")
                        .body(body.clone());
                    async move {
                        let r = req.send().await.expect("sent");
                        assert_eq!(r.status(), 200);
                        r.bytes().await.expect("body");
                    }
                })
                .await;
                let a = agent(Arc::clone(provider), model, target.clone());
                let turn = measure(|| {
                    let a = &a;
                    async move {
                        let outcome = a.run(request(stream), CancellationToken::new()).await;
                        assert!(matches!(outcome, daedalus_runtime::agents::agent_loop::AgentOutcome::Completed { .. }), "{outcome:?}");
                    }
                })
                .await;
                let own = turn.p50.saturating_sub(floor.p50);
                println!(
                    "| {name} | {} | {:.3} ms | {:.3} ms | {:.3} ms | {:.0} | {:.0} | {:.0} |",
                    if stream { "stream" } else { "json" },
                    floor.p50.as_secs_f64() * 1e3,
                    turn.p50.as_secs_f64() * 1e3,
                    own.as_secs_f64() * 1e3,
                    floor.allocs,
                    turn.allocs,
                    turn.allocs - floor.allocs,
                );
            }
        }
        println!("\ntarget: own time under 1 ms per turn");
    });
}
