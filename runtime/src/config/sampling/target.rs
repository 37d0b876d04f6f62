//! The settings of one provider request: [`for_target`] resolves the layered
//! [`SamplingParams`] into a [`Sampling`] and takes out what the provider cannot take, naming
//! each drop; [`DropWarnings`] warns about each once per agent.

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::{Map, Value};

use super::params::{Effort, SamplingParams, ToolChoice};

/// The sampling of one provider request, every value decided: `None` (or no stop sequences)
/// leaves the provider's default. Provider-neutral; each client spells it on its wire.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sampling {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u64>,
    pub max_tokens: Option<u64>,
    pub stop: Vec<String>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub response_format: Option<Map<String, Value>>,
    pub tool_choice: Option<ToolChoice>,
    pub effort: Option<Effort>,
}

impl From<&SamplingParams> for Sampling {
    /// Every set value; cleared and unset keys are left to the provider.
    fn from(p: &SamplingParams) -> Self {
        Sampling {
            temperature: p.temperature.value(),
            top_p: p.top_p.value(),
            top_k: p.top_k.value(),
            max_tokens: p.max_tokens.value(),
            stop: p.stop.value().map(|s| s.sequences()).unwrap_or_default(),
            seed: p.seed.value(),
            presence_penalty: p.presence_penalty.value(),
            frequency_penalty: p.frequency_penalty.value(),
            response_format: p.response_format.value(),
            tool_choice: p.tool_choice.value(),
            effort: p.effort.value(),
        }
    }
}

/// Which wire the parameters are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// OpenAI chat completions: `native` when the provider follows OpenAI's own API's rules
    /// (`dialect: openai`); `reasoning` when the model is known to reason (declared by
    /// `model_capabilities.reasoning`, else known by name on OpenAI's own API, else unknown).
    OpenAi {
        native: bool,
        reasoning: Option<bool>,
    },
    /// Anthropic Messages, for this model.
    Anthropic { model: String },
}

impl Target {
    /// An OpenAI target for `model`: whether it reasons is `declared`, or on OpenAI's own API
    /// known from the model families that do (o1, o3, o4, gpt-5 except its chat models);
    /// a compatible server's model is not guessed at.
    pub fn openai(native: bool, model: &str, declared: Option<bool>) -> Target {
        let reasoning = declared.or_else(|| native.then(|| openai_reasons(model)));
        Target::OpenAi { native, reasoning }
    }
}

/// Whether `model` is one of OpenAI's reasoning models (which take `reasoning_effort` and no
/// sampling dials), by its family's name.
fn openai_reasons(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let o_series = ["o1", "o3", "o4"].iter().any(|family| {
        m.strip_prefix(family)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    });
    let gpt5 = m.starts_with("gpt-5") && !m.contains("-chat");
    o_series || gpt5
}

/// Why a parameter was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub key: String,
    pub reason: &'static str,
}

/// The settings `target` accepts, and what was dropped.
pub fn for_target(params: &SamplingParams, target: &Target) -> (Sampling, Vec<Dropped>) {
    let mut sampling = Sampling::from(params);
    let mut dropped: Vec<Dropped> = params
        .unknown
        .keys()
        .map(|key| Dropped {
            key: key.clone(),
            reason: "not a sampling parameter this runtime knows",
        })
        .collect();
    let mut drop_if = |taken: bool, key: &str, reason: &'static str| {
        if taken {
            dropped.push(Dropped {
                key: key.to_owned(),
                reason,
            });
        }
    };
    match target {
        Target::OpenAi { native, reasoning } => {
            if *native {
                let no_top_k = "OpenAI's API has no top_k";
                drop_if(sampling.top_k.take().is_some(), "top_k", no_top_k);
            }
            if *native && *reasoning == Some(true) {
                let reason = "OpenAI's reasoning models take no sampling dials (use effort)";
                drop_if(sampling.temperature.take().is_some(), "temperature", reason);
                drop_if(sampling.top_p.take().is_some(), "top_p", reason);
                let presence = sampling.presence_penalty.take().is_some();
                drop_if(presence, "presence_penalty", reason);
                let frequency = sampling.frequency_penalty.take().is_some();
                drop_if(frequency, "frequency_penalty", reason);
            }
            if *reasoning == Some(false) {
                let reason =
                    "the model does not reason (model_capabilities.reasoning: true if it does)";
                drop_if(sampling.effort.take().is_some(), "effort", reason);
            }
        }
        Target::Anthropic { model } => {
            if strips_sampling(model) {
                let reason = "Claude Opus 4.7 takes no sampling dials (use output_config.effort)";
                drop_if(sampling.temperature.take().is_some(), "temperature", reason);
                drop_if(sampling.top_p.take().is_some(), "top_p", reason);
                drop_if(sampling.top_k.take().is_some(), "top_k", reason);
            }
            let reason = "Anthropic's Messages API has no such parameter";
            drop_if(sampling.seed.take().is_some(), "seed", reason);
            let presence = sampling.presence_penalty.take().is_some();
            drop_if(presence, "presence_penalty", reason);
            let frequency = sampling.frequency_penalty.take().is_some();
            drop_if(frequency, "frequency_penalty", reason);
            let format = sampling.response_format.take().is_some();
            drop_if(format, "response_format", reason);
        }
    }
    (sampling, dropped)
}

fn strips_sampling(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    m.contains("opus-4-7") || m.contains("opus-4.7")
}

/// Warns once per (agent, key) about a dropped parameter.
#[derive(Debug, Default)]
pub struct DropWarnings(Mutex<HashSet<(String, String)>>);

impl DropWarnings {
    /// Logs each drop the first time it happens for `agent`; returns how many were new.
    pub fn warn(&self, agent: &str, provider: &str, dropped: &[Dropped]) -> usize {
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut new = 0;
        for d in dropped {
            if seen.insert((agent.to_owned(), d.key.clone())) {
                tracing::warn!(agent, provider, parameter = %d.key, reason = d.reason, "sampling parameter dropped");
                new += 1;
            }
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn every_key() -> SamplingParams {
        let all = json!({
            "temperature": 0.5, "top_p": 0.9, "top_k": 40, "max_tokens": 100, "stop": "END",
            "seed": 1, "presence_penalty": 0.1, "frequency_penalty": 0.2,
            "response_format": {"type": "json_object"}, "tool_choice": "required", "bogus": 1,
            "effort": "xhigh"
        });
        SamplingParams::from_map(all.as_object().unwrap()).unwrap()
    }

    fn dropped_keys(dropped: &[Dropped]) -> Vec<&str> {
        let mut keys: Vec<&str> = dropped.iter().map(|d| d.key.as_str()).collect();
        keys.sort_unstable();
        keys
    }

    /// The support matrix as a table: which keys each target drops. (How each provider
    /// spells the rest is its client's test.)
    #[test]
    fn the_support_matrix() {
        let sonnet = Target::Anthropic {
            model: "claude-sonnet-4-5".into(),
        };
        let opus = Target::Anthropic {
            model: "claude-opus-4-7".into(),
        };
        let anthropic_drops = [
            "bogus",
            "frequency_penalty",
            "presence_penalty",
            "response_format",
            "seed",
        ];
        let dials = [
            "frequency_penalty",
            "presence_penalty",
            "temperature",
            "top_p",
        ];
        let rows: Vec<(Target, Vec<&str>)> = vec![
            (
                Target::openai(true, "gpt-4o", None),
                vec!["bogus", "effort", "top_k"],
            ),
            (
                Target::openai(true, "o4-mini", None),
                [&["bogus", "top_k"], dials.as_slice()].concat(),
            ),
            (
                Target::openai(true, "gpt-5", None),
                [&["bogus", "top_k"], dials.as_slice()].concat(),
            ),
            (
                Target::openai(true, "gpt-4o", Some(true)),
                [&["bogus", "top_k"], dials.as_slice()].concat(),
            ),
            (Target::openai(false, "qwen3", None), vec!["bogus"]),
            (Target::openai(false, "o4-mini", None), vec!["bogus"]),
            (
                Target::openai(false, "llama-3", Some(false)),
                vec!["bogus", "effort"],
            ),
            (sonnet, anthropic_drops.to_vec()),
            (
                opus,
                [
                    anthropic_drops.as_slice(),
                    &["temperature", "top_k", "top_p"],
                ]
                .concat(),
            ),
        ];
        let all = every_key();
        for (target, mut expected) in rows {
            let (sampling, dropped) = for_target(&all, &target);
            expected.sort_unstable();
            assert_eq!(dropped_keys(&dropped), expected, "{target:?}");
            assert_eq!(sampling.max_tokens, Some(100), "{target:?}");
            assert_eq!(sampling.stop, vec!["END".to_owned()], "{target:?}");
            assert_eq!(
                sampling.effort.is_none(),
                expected.contains(&"effort"),
                "{target:?}"
            );
            assert_eq!(
                sampling.tool_choice,
                Some(ToolChoice::Required),
                "{target:?}"
            );
            // What was dropped is gone from the request, and only that.
            assert_eq!(
                sampling.seed.is_none(),
                expected.contains(&"seed"),
                "{target:?}"
            );
            assert_eq!(
                sampling.top_k.is_none(),
                expected.contains(&"top_k"),
                "{target:?}"
            );
            assert_eq!(
                sampling.temperature.is_none(),
                expected.contains(&"temperature"),
                "{target:?}"
            );
        }
    }

    #[test]
    fn a_cleared_key_reaches_no_provider() {
        let call = SamplingParams::from_map(json!({"temperature": null}).as_object().unwrap());
        let merged = call.unwrap().over(&every_key());
        let (sampling, _) = for_target(&merged, &Target::openai(false, "m", None));
        assert_eq!(sampling.temperature, None);
        assert_eq!(sampling.top_p, Some(0.9));
    }

    #[test]
    fn openai_reasoning_families_are_known_by_name() {
        for model in [
            "o1",
            "o1-mini",
            "o3",
            "o3-pro",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini",
            "GPT-5.1",
        ] {
            assert!(openai_reasons(model), "{model}");
        }
        for model in [
            "gpt-4o",
            "gpt-4.1-mini",
            "gpt-5-chat-latest",
            "o10x",
            "omni",
            "gpt-fake",
        ] {
            assert!(!openai_reasons(model), "{model}");
        }
    }

    #[test]
    fn each_drop_is_warned_once_per_agent() {
        let w = DropWarnings::default();
        let d = vec![Dropped {
            key: "top_k".into(),
            reason: "x",
        }];
        assert_eq!(w.warn("a", "openai", &d), 1);
        assert_eq!(w.warn("a", "openai", &d), 0);
        assert_eq!(w.warn("b", "openai", &d), 1);
    }
}
