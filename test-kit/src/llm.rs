//! A provider client on the strict fake LLM, as the agent loop's tests build one.

use std::collections::BTreeMap;
use std::sync::Arc;

use daedalus_fake_llm::{FakeLlm, Gate, Reply};
use daedalus_runtime::agents::llm::LlmProvider;
use daedalus_runtime::agents::llm::anthropic::AnthropicClient;
use daedalus_runtime::agents::llm::openai::OpenAiClient;
use daedalus_runtime::agents::llm::retry::RetryPolicy;
use daedalus_runtime::config::deployment::ProviderSettings;
use daedalus_runtime::config::sampling::Target;

/// Which of the fake's wire formats a client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeFace {
    OpenAi,
    Anthropic,
}

/// A client of `fake` speaking `wire`, with `key`, for `model`: one attempt per request (a scripted
/// error is seen, not retried), and the target its sampling is shaped for.
pub fn fake_llm_client(
    fake: &FakeLlm,
    wire: FakeFace,
    key: &str,
    model: &str,
) -> (Arc<dyn LlmProvider>, Target) {
    let retry = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    let settings = |url: &str| ProviderSettings {
        api_key: Some(key.into()),
        base_url: Some(url.into()),
        headers: BTreeMap::new(),
        timeout_secs: Some(10.0),
        forward_inbound_auth: false,
        dialect: None,
        origins: daedalus_runtime::config::deployment::ProviderOrigins::default(),
    };
    match wire {
        FakeFace::OpenAi => (
            Arc::new(OpenAiClient::new(&settings(&fake.openai_base_url), retry).expect("client")),
            Target::openai(false, "gpt-fake", None),
        ),
        FakeFace::Anthropic => (
            Arc::new(
                AnthropicClient::new(&settings(&fake.anthropic_base_url), retry).expect("client"),
            ),
            Target::Anthropic {
                model: model.into(),
            },
        ),
    }
}

/// The answer of a durable-turns test: what the scripted turn of
/// [`script_a_turn_cut_at_step_three`] ends with.
pub const SUMS: &str = "the sums are 2, 4 and 6";

/// Scripts a turn of four model calls on `fake` whose tools are server `server`'s `add`:
/// steps 1 and 2 call it; step 3's answer never comes until `gate` opens (a runtime dies
/// waiting for it); asked again, step 3 calls it, and step 4 answers [`SUMS`].
pub fn script_a_turn_cut_at_step_three(fake: &FakeLlm, server: &str, gate: &Gate) {
    let add = |a: i64, b: i64| {
        Reply::ToolCalls(vec![(
            format!("{server}__add"),
            serde_json::json!({"a": a, "b": b}),
        )])
    };
    fake.script([
        add(1, 1),
        add(2, 2),
        Reply::Paused {
            before: String::new(),
            after: String::new(),
            gate: gate.clone(),
        },
        add(3, 3),
        Reply::Text(SUMS.into()),
    ]);
}
