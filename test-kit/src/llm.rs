//! A provider client on the strict fake LLM, as the agent loop's tests build one.

use std::collections::BTreeMap;
use std::sync::Arc;

use daedalus_fake_llm::FakeLlm;
use daedalus_runtime::config::deployment::ProviderSettings;
use daedalus_runtime::llm::LlmProvider;
use daedalus_runtime::llm::anthropic::AnthropicClient;
use daedalus_runtime::llm::openai::OpenAiClient;
use daedalus_runtime::llm::retry::RetryPolicy;
use daedalus_runtime::sampling::Target;

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
