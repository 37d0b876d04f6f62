//! Sampling parameters: per agent (`request_params`) and per call (the A2A request's
//! `metadata.request_params`), where `null` clears a default; then the provider support matrix:
//! what a provider cannot take is dropped with one warning per agent, not per call.
//!
//! | key | OpenAI | Anthropic |
//! |---|---|---|
//! | `temperature`, `top_p` | yes | yes (none on Opus 4.7) |
//! | `top_k` | compatible servers only (vLLM, llama.cpp, ...), not api.openai.com | yes (none on Opus 4.7) |
//! | `max_tokens` | yes | yes (required; defaults to the model's `max_output_tokens`) |
//! | `stop` | yes | as `stop_sequences` |
//! | `seed`, `presence_penalty`, `frequency_penalty`, `response_format` | yes | no |
//! | `tool_choice` | yes | translated (`required` ⇒ `any`, a function ⇒ `tool`) |

use std::collections::HashSet;
use std::sync::Mutex;

use serde_json::{Map, Value, json};

/// The keys this runtime understands.
pub const KEYS: [&str; 10] = [
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "response_format",
    "tool_choice",
];

/// Whether `value` has the type `key` takes; `null` always does (it clears a default). Keys
/// outside [`KEYS`] are not checked here: the support matrix drops them with a warning.
pub fn check(key: &str, value: &Value) -> Result<(), &'static str> {
    let ok = match key {
        _ if value.is_null() => true,
        "temperature" | "top_p" | "presence_penalty" | "frequency_penalty" => value.is_number(),
        "top_k" | "max_tokens" => value.as_u64().is_some(),
        "seed" => value.is_i64() || value.is_u64(),
        "stop" => {
            value.is_string()
                || value
                    .as_array()
                    .is_some_and(|a| a.iter().all(Value::is_string))
        }
        "response_format" => value.is_object(),
        "tool_choice" => value.is_string() || value.is_object(),
        _ => true,
    };
    if ok {
        return Ok(());
    }
    Err(match key {
        "temperature" | "top_p" | "presence_penalty" | "frequency_penalty" => "must be a number",
        "top_k" | "max_tokens" => "must be a whole number of at least 0",
        "seed" => "must be a whole number",
        "stop" => "must be a string or a list of strings",
        "response_format" => "must be an object",
        _ => "must be a string or an object",
    })
}

/// [`check`] for every parameter; the first that fails, with why.
pub fn check_all(params: &Map<String, Value>) -> Result<(), (String, &'static str)> {
    for (key, value) in params {
        check(key, value).map_err(|why| (key.clone(), why))?;
    }
    Ok(())
}

/// Which wire the parameters are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// OpenAI chat completions; `native` when the base URL is OpenAI's own API.
    OpenAi { native: bool },
    /// Anthropic Messages, for this model.
    Anthropic { model: String },
}

/// Defaults overlaid with per-call values; `null` in the call clears the default.
pub fn merge(
    defaults: &Map<String, Value>,
    call: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let mut out = defaults.clone();
    for (k, v) in call.into_iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    out.retain(|_, v| !v.is_null());
    out
}

/// Why a parameter was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub key: String,
    pub reason: &'static str,
}

/// The parameters `target` accepts, in its spelling, and what was dropped.
pub fn for_target(
    params: &Map<String, Value>,
    target: &Target,
) -> (Map<String, Value>, Vec<Dropped>) {
    let mut out = Map::new();
    let mut dropped = Vec::new();
    let mut drop = |key: &str, reason: &'static str| {
        dropped.push(Dropped {
            key: key.to_owned(),
            reason,
        });
    };
    for (key, value) in params {
        match (target, key.as_str()) {
            (_, k) if !KEYS.contains(&k) => drop(k, "not a sampling parameter this runtime knows"),
            (Target::OpenAi { native: true }, "top_k") => drop(key, "OpenAI's API has no top_k"),
            (Target::Anthropic { model }, "temperature" | "top_p" | "top_k")
                if strips_sampling(model) =>
            {
                drop(
                    key,
                    "Claude Opus 4.7 takes no sampling dials (use output_config.effort)",
                );
            }
            (
                Target::Anthropic { .. },
                "seed" | "presence_penalty" | "frequency_penalty" | "response_format",
            ) => {
                drop(key, "Anthropic's Messages API has no such parameter");
            }
            (Target::Anthropic { .. }, "stop") => {
                let sequences = match value {
                    Value::String(s) => json!([s]),
                    other => other.clone(),
                };
                out.insert("stop_sequences".into(), sequences);
            }
            (Target::Anthropic { .. }, "tool_choice") => match anthropic_tool_choice(value) {
                Some(choice) => {
                    out.insert("tool_choice".into(), choice);
                }
                None => drop(key, "not a tool_choice Anthropic understands"),
            },
            (Target::OpenAi { .. } | Target::Anthropic { .. }, _) => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    (out, dropped)
}

fn strips_sampling(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    m.contains("opus-4-7") || m.contains("opus-4.7")
}

fn anthropic_tool_choice(value: &Value) -> Option<Value> {
    match value {
        Value::String(s) => match s.as_str() {
            "auto" => Some(json!({"type": "auto"})),
            "none" => Some(json!({"type": "none"})),
            "required" | "any" => Some(json!({"type": "any"})),
            _ => None,
        },
        Value::Object(o) => {
            let name = o
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| o.get("name"))?
                .as_str()?;
            Some(json!({"type": "tool", "name": name}))
        }
        _ => None,
    }
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
mod typed {
    use serde_json::json;

    use super::check;

    #[test]
    fn each_key_takes_its_type() {
        for (key, good, bad) in [
            ("temperature", json!(0.2), json!("hot")),
            ("top_p", json!(1), json!(true)),
            ("top_k", json!(40), json!(-1)),
            ("max_tokens", json!(100), json!(1.5)),
            ("seed", json!(-7), json!("7")),
            ("stop", json!(["x", "y"]), json!([1])),
            (
                "response_format",
                json!({"type": "json_object"}),
                json!("json"),
            ),
            ("tool_choice", json!("auto"), json!(3)),
        ] {
            assert!(check(key, &good).is_ok(), "{key} {good}");
            assert!(check(key, &bad).is_err(), "{key} {bad}");
            assert!(check(key, &json!(null)).is_ok(), "null clears {key}");
        }
        assert!(check("unknown_key", &json!("anything")).is_ok());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: &Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn calls_override_defaults_and_null_clears() {
        let defaults = params(&json!({"temperature": 0.2, "top_p": 0.9, "seed": 7}));
        let call = params(&json!({"temperature": 0.8, "top_p": null}));
        assert_eq!(
            merge(&defaults, Some(&call)),
            params(&json!({"temperature": 0.8, "seed": 7}))
        );
        assert_eq!(merge(&defaults, None), defaults);
    }

    fn keys(m: &Map<String, Value>) -> Vec<&str> {
        let mut k: Vec<&str> = m.keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    /// The support matrix as a table: which parameters reach which provider, and how spelled.
    #[test]
    fn the_support_matrix() {
        let all = params(&json!({
            "temperature": 0.5, "top_p": 0.9, "top_k": 40, "max_tokens": 100, "stop": "END",
            "seed": 1, "presence_penalty": 0.1, "frequency_penalty": 0.2,
            "response_format": {"type": "json_object"}, "tool_choice": "required", "bogus": 1
        }));
        let rows: Vec<(Target, Vec<&str>)> = vec![
            (
                Target::OpenAi { native: true },
                vec![
                    "frequency_penalty",
                    "max_tokens",
                    "presence_penalty",
                    "response_format",
                    "seed",
                    "stop",
                    "temperature",
                    "tool_choice",
                    "top_p",
                ],
            ),
            (
                Target::OpenAi { native: false },
                vec![
                    "frequency_penalty",
                    "max_tokens",
                    "presence_penalty",
                    "response_format",
                    "seed",
                    "stop",
                    "temperature",
                    "tool_choice",
                    "top_k",
                    "top_p",
                ],
            ),
            (
                Target::Anthropic {
                    model: "claude-sonnet-4-5".into(),
                },
                vec![
                    "max_tokens",
                    "stop_sequences",
                    "temperature",
                    "tool_choice",
                    "top_k",
                    "top_p",
                ],
            ),
            (
                Target::Anthropic {
                    model: "claude-opus-4-7".into(),
                },
                vec!["max_tokens", "stop_sequences", "tool_choice"],
            ),
        ];
        for (target, expected) in rows {
            let (out, dropped) = for_target(&all, &target);
            assert_eq!(keys(&out), expected, "{target:?}");
            assert!(dropped.iter().any(|d| d.key == "bogus"), "{target:?}");
        }
        let (out, _) = for_target(
            &all,
            &Target::Anthropic {
                model: "claude-x".into(),
            },
        );
        assert_eq!(out["stop_sequences"], json!(["END"]));
        assert_eq!(out["tool_choice"], json!({"type": "any"}));
        let named =
            params(&json!({"tool_choice": {"type": "function", "function": {"name": "s__t"}}}));
        let (out, _) = for_target(
            &named,
            &Target::Anthropic {
                model: "claude-x".into(),
            },
        );
        assert_eq!(out["tool_choice"], json!({"type": "tool", "name": "s__t"}));
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
