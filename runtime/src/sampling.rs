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
//! | `effort` (`low` … `max`) | as `reasoning_effort` (`xhigh` and `max` as `high`, the top of OpenAI's scale; vLLM and most compatible servers take it, others ignore it) | as `output_config.effort` |

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

/// One sampling setting: unset (the default stays), cleared (`null`: the default goes), or set.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Setting<T> {
    #[default]
    Unset,
    Clear,
    Set(T),
}

impl<T> Setting<T> {
    pub fn is_unset(&self) -> bool {
        matches!(self, Setting::Unset)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Setting<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Option::<T>::deserialize(d)?.map_or(Setting::Clear, Setting::Set))
    }
}

impl<T: Serialize> Serialize for Setting<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Setting::Set(v) => v.serialize(s),
            Setting::Unset | Setting::Clear => s.serialize_none(),
        }
    }
}

/// `stop`: one sequence or several.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// `tool_choice`: `auto`, `none`, `required`, or a named function (OpenAI's object form).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ToolChoice {
    Mode(String),
    Named(Map<String, Value>),
}

/// How hard the model thinks before it answers (`effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

impl Effort {
    /// OpenAI's `reasoning_effort` for it (its scale ends at `high`).
    fn openai(self) -> &'static str {
        match self {
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High | Effort::Xhigh | Effort::Max => "high",
        }
    }
}

/// Sampling parameters: an agent's `request_params`, or a call's overrides of them. The
/// fields are the one list of keys this runtime understands; any other key is kept in
/// `unknown` and dropped with a warning when the request is built.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct SamplingParams {
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub temperature: Setting<f64>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub top_p: Setting<f64>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub top_k: Setting<u64>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub max_tokens: Setting<u64>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub stop: Setting<Stop>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub seed: Setting<i64>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub presence_penalty: Setting<f64>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub frequency_penalty: Setting<f64>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub response_format: Setting<Map<String, Value>>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub tool_choice: Setting<ToolChoice>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub effort: Setting<Effort>,
    /// Keys this runtime does not know, as given.
    #[serde(flatten)]
    pub unknown: BTreeMap<String, Value>,
}

/// A sampling parameter of the wrong type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {why}")]
pub struct SamplingError {
    /// The key, as the caller spelled it (`temperature`).
    pub key: String,
    pub why: String,
}

impl SamplingError {
    /// The same error, its key under `prefix` (`agents.a.request_params`).
    #[must_use]
    pub fn under(mut self, prefix: &str) -> Self {
        self.key = format!("{prefix}.{}", self.key);
        self
    }
}

impl SamplingParams {
    /// Reads `params`; a value of the wrong type is an error naming its key.
    pub fn from_map(params: &Map<String, Value>) -> Result<Self, SamplingError> {
        serde_path_to_error::deserialize(params).map_err(|e| SamplingError {
            key: e.path().to_string(),
            why: e.into_inner().to_string(),
        })
    }

    /// These settings over `base`: a set key replaces, a cleared key removes, an unset key
    /// leaves `base`'s.
    #[must_use]
    pub fn over(&self, base: &SamplingParams) -> SamplingParams {
        if *self == SamplingParams::default() {
            return base.clone();
        }
        let mut merged = base.to_map();
        merged.extend(
            serde_json::to_value(self)
                .ok()
                .and_then(into_object)
                .unwrap_or_default(),
        );
        merged.retain(|_, v| !v.is_null());
        serde_json::from_value(Value::Object(merged)).unwrap_or_default()
    }

    /// The settings that are set, by key (cleared ones are left out).
    pub fn to_map(&self) -> Map<String, Value> {
        let mut map = serde_json::to_value(self)
            .ok()
            .and_then(into_object)
            .unwrap_or_default();
        map.retain(|_, v| !v.is_null());
        map
    }

    /// The JSON Schema of each key, for tools that take sampling parameters as arguments.
    pub fn property_schemas() -> Map<String, Value> {
        let number = json!({"type": "number"});
        let count = json!({"type": "integer", "minimum": 0});
        let properties = json!({
            "temperature": number,
            "top_p": number,
            "top_k": count,
            "max_tokens": count,
            "stop": {"type": ["string", "array"], "items": {"type": "string"}},
            "seed": {"type": "integer"},
            "presence_penalty": number,
            "frequency_penalty": number,
            "response_format": {"type": "object"},
            "tool_choice": {"type": ["string", "object"]},
            "effort": {"type": "string", "enum": ["low", "medium", "high", "xhigh", "max"]},
        });
        into_object(properties).unwrap_or_default()
    }
}

fn into_object(value: Value) -> Option<Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Which wire the parameters are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// OpenAI chat completions; `native` when the base URL is OpenAI's own API.
    OpenAi { native: bool },
    /// Anthropic Messages, for this model.
    Anthropic { model: String },
}

/// Why a parameter was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub key: String,
    pub reason: &'static str,
}

/// The parameters `target` accepts, in its spelling, and what was dropped.
pub fn for_target(params: &SamplingParams, target: &Target) -> (Map<String, Value>, Vec<Dropped>) {
    let mut out = Map::new();
    let mut dropped: Vec<Dropped> = params
        .unknown
        .keys()
        .map(|key| Dropped {
            key: key.clone(),
            reason: "not a sampling parameter this runtime knows",
        })
        .collect();
    let known = SamplingParams {
        unknown: BTreeMap::new(),
        ..params.clone()
    }
    .to_map();
    let mut drop = |key: &str, reason: &'static str| {
        dropped.push(Dropped {
            key: key.to_owned(),
            reason,
        });
    };
    for (key, value) in &known {
        match (target, key.as_str()) {
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
            (Target::Anthropic { .. }, "effort") => {
                out.insert("output_config".into(), json!({"effort": value}));
            }
            (Target::OpenAi { .. }, "effort") => {
                match serde_json::from_value::<Effort>(value.clone()) {
                    Ok(effort) => {
                        out.insert("reasoning_effort".into(), json!(effort.openai()));
                    }
                    Err(_) => drop(key, "not an effort (low, medium, high, xhigh, max)"),
                }
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
    use serde_json::{Value, json};

    use super::{SamplingParams, Setting};

    fn read(v: &Value) -> Result<SamplingParams, super::SamplingError> {
        SamplingParams::from_map(v.as_object().expect("an object"))
    }

    #[test]
    fn each_key_takes_its_type_and_a_wrong_one_names_the_key() {
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
            ("presence_penalty", json!(0.5), json!([])),
            ("frequency_penalty", json!(-0.5), json!({})),
        ] {
            assert!(read(&json!({ key: good })).is_ok(), "{key} {good}");
            let error = read(&json!({ key: bad })).expect_err(key);
            assert_eq!(error.key, key, "{error}");
            let cleared = read(&json!({ key: null })).expect("null clears");
            assert_ne!(
                cleared,
                SamplingParams::default(),
                "{key}: null is a setting"
            );
        }
        let unknown = read(&json!({"unknown_key": "anything"})).expect("kept");
        assert_eq!(unknown.unknown["unknown_key"], json!("anything"));
    }

    #[test]
    fn every_key_has_a_schema_and_every_schema_a_key() {
        let all = read(&json!({
            "temperature": 0.5, "top_p": 0.9, "top_k": 40, "max_tokens": 100, "stop": "END",
            "seed": 1, "presence_penalty": 0.1, "frequency_penalty": 0.2,
            "response_format": {"type": "json_object"}, "tool_choice": "required",
            "effort": "high"
        }))
        .expect("valid");
        assert!(all.unknown.is_empty());
        let keys: Vec<String> = all.to_map().keys().cloned().collect();
        let schemas: Vec<String> = SamplingParams::property_schemas().keys().cloned().collect();
        assert_eq!(keys, schemas);
    }

    #[test]
    fn calls_override_defaults_and_null_clears() {
        let defaults = read(&json!({"temperature": 0.2, "top_p": 0.9, "seed": 7})).unwrap();
        let call = read(&json!({"temperature": 0.8, "top_p": null})).unwrap();
        let merged = call.over(&defaults);
        assert_eq!(merged.temperature, Setting::Set(0.8));
        assert_eq!(merged.top_p, Setting::Unset);
        assert_eq!(merged.seed, Setting::Set(7));
        assert_eq!(SamplingParams::default().over(&defaults), defaults);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: &Value) -> SamplingParams {
        SamplingParams::from_map(v.as_object().unwrap()).unwrap()
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
            "response_format": {"type": "json_object"}, "tool_choice": "required", "bogus": 1,
            "effort": "xhigh"
        }));
        let rows: Vec<(Target, Vec<&str>)> = vec![
            (
                Target::OpenAi { native: true },
                vec![
                    "frequency_penalty",
                    "max_tokens",
                    "presence_penalty",
                    "reasoning_effort",
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
                    "reasoning_effort",
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
                    "output_config",
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
                vec![
                    "max_tokens",
                    "output_config",
                    "stop_sequences",
                    "tool_choice",
                ],
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
        assert_eq!(out["output_config"], json!({"effort": "xhigh"}));
        let (out, dropped) = for_target(&all, &Target::OpenAi { native: true });
        assert_eq!(
            out["reasoning_effort"], "high",
            "OpenAI's scale ends at high"
        );
        assert!(!dropped.iter().any(|d| d.key == "effort"));
        let (out, _) = for_target(&all, &Target::OpenAi { native: false });
        assert_eq!(
            out["reasoning_effort"], "high",
            "compatible servers get it too"
        );
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
