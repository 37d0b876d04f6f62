//! What a layer asks for: [`SamplingParams`], one typed field per key this runtime knows, each
//! a [`Setting`] (unset, cleared by `null`, or set), and how layers compose.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// One sampling setting: unset (the layer below decides), cleared (`null`: no layer below
/// sets it), or set.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Setting<T> {
    #[default]
    Unset,
    Clear,
    Set(T),
}

impl<T: Clone> Setting<T> {
    /// This layer's setting over `base`'s: a set or cleared key wins, an unset one defers.
    #[must_use]
    pub fn over(&self, base: &Setting<T>) -> Setting<T> {
        match self {
            Setting::Unset => base.clone(),
            decided => decided.clone(),
        }
    }

    /// The value, if set (a cleared key has none).
    pub fn value(&self) -> Option<T> {
        match self {
            Setting::Set(v) => Some(v.clone()),
            Setting::Unset | Setting::Clear => None,
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Setting<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Option::<T>::deserialize(d)?.map_or(Setting::Clear, Setting::Set))
    }
}

/// A set value, or `null` for a cleared one (an unset one is skipped by its struct).
impl<T: Serialize> Serialize for Setting<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Setting::Set(v) => v.serialize(s),
            Setting::Unset | Setting::Clear => s.serialize_none(),
        }
    }
}

impl<T> Setting<T> {
    pub fn is_unset(&self) -> bool {
        matches!(self, Setting::Unset)
    }
}

/// On the wire a setting is its value or `null`.
impl<T: JsonSchema> JsonSchema for Setting<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Option::<T>::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        Option::<T>::json_schema(generator)
    }
}

/// `stop`: one sequence or several.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

impl Stop {
    /// The sequences, however they were given.
    pub fn sequences(&self) -> Vec<String> {
        match self {
            Stop::One(s) => vec![s.clone()],
            Stop::Many(v) => v.clone(),
        }
    }
}

/// `tool_choice`: let the model decide, forbid tools, require one, or require a named tool.
/// Read in OpenAI's spellings (`"required"`, `{"type": "function", "function": {"name"}}`)
/// and Anthropic's (`"any"`, `{"type": "tool", "name"}`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "ToolChoiceInput")]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    Tool(String),
}

/// The shapes `tool_choice` is read from.
#[derive(Deserialize)]
#[serde(untagged)]
enum ToolChoiceInput {
    Mode(String),
    Function { function: ToolName },
    Named(ToolName),
}

#[derive(Deserialize)]
struct ToolName {
    name: String,
}

impl TryFrom<ToolChoiceInput> for ToolChoice {
    type Error = String;

    fn try_from(input: ToolChoiceInput) -> Result<Self, String> {
        match input {
            ToolChoiceInput::Mode(mode) => match mode.as_str() {
                "auto" => Ok(ToolChoice::Auto),
                "none" => Ok(ToolChoice::None),
                "required" | "any" => Ok(ToolChoice::Required),
                _ => Err(format!(
                    "{mode:?} is not a tool_choice (auto, none, required, or a named tool)"
                )),
            },
            ToolChoiceInput::Function {
                function: ToolName { name },
            }
            | ToolChoiceInput::Named(ToolName { name }) => Ok(ToolChoice::Tool(name)),
        }
    }
}

/// In OpenAI's spelling.
impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => s.serialize_str("auto"),
            ToolChoice::None => s.serialize_str("none"),
            ToolChoice::Required => s.serialize_str("required"),
            ToolChoice::Tool(name) => {
                serde_json::json!({"type": "function", "function": {"name": name}}).serialize(s)
            }
        }
    }
}

impl JsonSchema for ToolChoice {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "ToolChoice".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "auto, none, required, or a named tool",
            "anyOf": [
                {"type": "string", "enum": ["auto", "none", "required", "any"]},
                {
                    "type": "object",
                    "properties": {
                        "type": {"const": "function"},
                        "function": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"]
                        }
                    },
                    "required": ["function"]
                },
                {
                    "type": "object",
                    "properties": {"type": {"const": "tool"}, "name": {"type": "string"}},
                    "required": ["name"]
                }
            ]
        })
    }
}

/// How hard the model thinks before it answers (`effort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

/// Sampling parameters: an agent's `request_params`, a personality's, or a call's. The
/// fields are the one list of keys this runtime understands; any other key is kept in
/// `unknown` and dropped with a warning when the request is built.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default)]
pub struct SamplingParams {
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub temperature: Setting<f64>,
    /// Nucleus sampling: the probability mass sampled from.
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub top_p: Setting<f64>,
    /// Sample from the k likeliest tokens only.
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub top_k: Setting<u64>,
    /// The most tokens the answer may take (capped at the model's `max_output_tokens`).
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub max_tokens: Setting<u64>,
    /// A sequence, or several, that ends the answer.
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub stop: Setting<Stop>,
    /// A seed, for repeatable sampling where the provider offers it.
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub seed: Setting<i64>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub presence_penalty: Setting<f64>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub frequency_penalty: Setting<f64>,
    /// The answer's format (OpenAI's `response_format` object).
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub response_format: Setting<Map<String, Value>>,
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub tool_choice: Setting<ToolChoice>,
    /// How hard the model thinks: `low`, `medium`, `high`, `xhigh` or `max`.
    #[serde(skip_serializing_if = "Setting::is_unset")]
    pub effort: Setting<Effort>,
    /// Keys this runtime does not know, as given.
    #[serde(flatten)]
    #[schemars(skip)]
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
    /// The keys, as callers spell them.
    pub const KEYS: [&'static str; 11] = [
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
        "effort",
    ];

    /// Reads `params`; a value of the wrong type is an error naming its key.
    pub fn from_map(params: &Map<String, Value>) -> Result<Self, SamplingError> {
        serde_path_to_error::deserialize(params).map_err(|e| SamplingError {
            key: e.path().to_string(),
            why: e.into_inner().to_string(),
        })
    }

    /// These settings over `base`, key by key: a set or cleared key wins, an unset one keeps
    /// `base`'s. A cleared key stays cleared, so it also clears any layer further down.
    #[must_use]
    pub fn over(&self, base: &SamplingParams) -> SamplingParams {
        let mut unknown = base.unknown.clone();
        unknown.extend(self.unknown.clone());
        SamplingParams {
            temperature: self.temperature.over(&base.temperature),
            top_p: self.top_p.over(&base.top_p),
            top_k: self.top_k.over(&base.top_k),
            max_tokens: self.max_tokens.over(&base.max_tokens),
            stop: self.stop.over(&base.stop),
            seed: self.seed.over(&base.seed),
            presence_penalty: self.presence_penalty.over(&base.presence_penalty),
            frequency_penalty: self.frequency_penalty.over(&base.frequency_penalty),
            response_format: self.response_format.over(&base.response_format),
            tool_choice: self.tool_choice.over(&base.tool_choice),
            effort: self.effort.over(&base.effort),
            unknown,
        }
    }

    /// The JSON Schema of each key, for tools that take sampling parameters as arguments.
    pub fn property_schemas() -> Map<String, Value> {
        crate::platform::tool_schema::properties_of::<SamplingParams>()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{Effort, SamplingParams, Setting, Stop, ToolChoice};

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
            ("tool_choice", json!("required"), json!("sometimes")),
            ("presence_penalty", json!(0.5), json!([])),
            ("frequency_penalty", json!(-0.5), json!({})),
            ("effort", json!("xhigh"), json!("extreme")),
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
    fn every_key_is_a_field_and_has_a_schema() {
        let all = read(&json!({
            "temperature": 0.5, "top_p": 0.9, "top_k": 40, "max_tokens": 100, "stop": "END",
            "seed": 1, "presence_penalty": 0.1, "frequency_penalty": 0.2,
            "response_format": {"type": "json_object"}, "tool_choice": "required",
            "effort": "high"
        }))
        .expect("valid");
        assert!(all.unknown.is_empty(), "{:?}", all.unknown);
        assert_eq!(all.stop, Setting::Set(Stop::One("END".into())));
        assert_eq!(all.tool_choice, Setting::Set(ToolChoice::Required));
        assert_eq!(all.effort, Setting::Set(Effort::High));
        let mut schemas: Vec<String> = SamplingParams::property_schemas().keys().cloned().collect();
        let mut keys: Vec<String> = SamplingParams::KEYS.map(str::to_owned).to_vec();
        schemas.sort();
        keys.sort();
        assert_eq!(keys, schemas);
    }

    #[test]
    fn tool_choice_reads_both_providers_spellings() {
        for (given, wanted) in [
            (json!("auto"), ToolChoice::Auto),
            (json!("none"), ToolChoice::None),
            (json!("required"), ToolChoice::Required),
            (json!("any"), ToolChoice::Required),
            (
                json!({"type": "function", "function": {"name": "s__t"}}),
                ToolChoice::Tool("s__t".into()),
            ),
            (
                json!({"type": "tool", "name": "s__t"}),
                ToolChoice::Tool("s__t".into()),
            ),
        ] {
            let read = read(&json!({ "tool_choice": given })).expect("valid");
            assert_eq!(read.tool_choice, Setting::Set(wanted), "{given}");
        }
    }

    #[test]
    fn calls_override_defaults_and_null_clears_every_layer_below() {
        let agent = read(&json!({"temperature": 0.2, "top_p": 0.9, "seed": 7})).unwrap();
        let personality = read(&json!({"top_p": 0.5})).unwrap();
        let call = read(&json!({"temperature": 0.8, "top_p": null})).unwrap();
        let merged = call.over(&personality.over(&agent));
        assert_eq!(merged.temperature, Setting::Set(0.8));
        assert_eq!(merged.top_p.value(), None, "null clears both layers below");
        assert_eq!(merged.seed, Setting::Set(7));
        assert_eq!(SamplingParams::default().over(&agent), agent);
        // A call's top-level keys over its own `request_params` keep a clear for the agent's.
        let nested = SamplingParams::default();
        let top = read(&json!({"seed": null})).unwrap();
        assert_eq!(top.over(&nested).over(&agent).seed.value(), None);
    }

    #[test]
    fn the_schema_has_no_references_and_allows_null() {
        let schemas = Value::Object(SamplingParams::property_schemas());
        assert!(!schemas.to_string().contains("$ref"), "{schemas}");
        let temperature = schemas["temperature"].to_string();
        assert!(temperature.contains("null"), "{temperature}");
        assert!(schemas["effort"].to_string().contains("xhigh"));
    }
}
