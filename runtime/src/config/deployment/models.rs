//! The models a deployment names (`provider.model`) and its providers' settings: the
//! `openai:` and `anthropic:` blocks, completed from the environment (`OPENAI_API_KEY`, ...),
//! each value with where it came from.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use super::{Deployment, mask_option, mask_values, masked_url_option};

/// Which model runs an agent: `provider.model`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRef {
    /// Echoes; understands the `***` test directives.
    Passthrough,
    /// Plays the A2A conformance kit's scenarios, chosen by `messageId` prefix.
    Tck,
    /// An OpenAI-compatible chat completions model.
    OpenAi(String),
    /// An Anthropic Messages model.
    Anthropic(String),
}

/// What a model can do, as declared (never guessed from its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModelCapabilities {
    pub vision: bool,
    pub context_window: u32,
    pub max_output_tokens: u32,
    /// Whether the model reasons before it answers (takes `effort`); `None` when not
    /// declared (the sampling rules then go by what the provider's API is known to do).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<bool>,
}

/// Which rules an `openai:` provider's chat completions API follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenAiDialect {
    /// OpenAI's own API: no `top_k`; `max_completion_tokens`; reasoning models take no
    /// sampling dials and other models no `reasoning_effort`.
    Openai,
    /// A compatible server (vLLM, llama.cpp, Ollama, ...): `max_tokens`, `top_k`, and
    /// `reasoning_effort` passed on.
    Compatible,
}

/// An LLM provider's connection settings (by default: none set, the public endpoint).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProviderSettings {
    #[serde(serialize_with = "mask_option")]
    pub api_key: Option<String>,
    #[serde(serialize_with = "masked_url_option")]
    pub base_url: Option<String>,
    #[serde(serialize_with = "mask_values")]
    pub headers: BTreeMap<String, String>,
    pub timeout_secs: Option<f64>,
    /// Use the inbound request's bearer as this provider's credential for that call
    /// (HuggingFace-style token-passthrough endpoints); the configured key otherwise.
    pub forward_inbound_auth: bool,
    /// `openai:` only: the API's rules, when declared (`dialect`); else by the base URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dialect: Option<OpenAiDialect>,
    /// Where `api_key` and `base_url` came from (`--check-config` shows it).
    #[serde(skip_serializing_if = "ProviderOrigins::is_unknown")]
    pub origins: ProviderOrigins,
}

impl ProviderSettings {
    /// The rules an `openai:` provider follows: as declared, else OpenAI's own for its own
    /// API (no base URL, or one on api.openai.com) and a compatible server's for any other.
    pub fn openai_dialect(&self) -> OpenAiDialect {
        self.dialect.unwrap_or_else(|| {
            let own = self.base_url.as_deref().is_none_or(|url| {
                reqwest::Url::parse(url)
                    .ok()
                    .and_then(|u| {
                        u.host_str()
                            .map(|h| h.eq_ignore_ascii_case("api.openai.com"))
                    })
                    .unwrap_or(false)
            });
            if own {
                OpenAiDialect::Openai
            } else {
                OpenAiDialect::Compatible
            }
        })
    }
}

/// Where a provider setting came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Origin {
    /// Not recorded (settings built in code).
    #[default]
    Unknown,
    /// The configuration files (a `${VAR}` in them included).
    File,
    /// The named environment variable, the file leaving the setting out.
    Environment(&'static str),
    /// Neither: the provider's default (its public endpoint; no key).
    Default,
}

impl Serialize for Origin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Origin::Unknown => s.serialize_str("unknown"),
            Origin::File => s.serialize_str("file"),
            Origin::Environment(var) => s.collect_str(&format_args!("environment ({var})")),
            Origin::Default => s.serialize_str("default"),
        }
    }
}

/// Where a provider block's key and endpoint came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProviderOrigins {
    pub api_key: Origin,
    pub base_url: Origin,
}

impl ProviderOrigins {
    fn is_unknown(&self) -> bool {
        self.api_key == Origin::Unknown && self.base_url == Origin::Unknown
    }
}

/// The environment variables a provider block falls back on, as fast-agent and the providers'
/// own SDKs read them.
struct ProviderEnv {
    api_key: &'static str,
    base_url: &'static str,
}

const OPENAI_ENV: ProviderEnv = ProviderEnv {
    api_key: "OPENAI_API_KEY",
    base_url: "OPENAI_BASE_URL",
};
const ANTHROPIC_ENV: ProviderEnv = ProviderEnv {
    api_key: "ANTHROPIC_API_KEY",
    base_url: "ANTHROPIC_BASE_URL",
};

/// A provider block completed from the environment: a key or endpoint the files leave out is
/// read from `vars`, else left to the provider's default. A block the files do not have exists
/// when the environment names a key or an endpoint, or when an agent uses the provider.
fn with_environment(
    block: Option<ProviderSettings>,
    vars: &ProviderEnv,
    lookup: &dyn Fn(&str) -> Option<String>,
    used: bool,
) -> Option<ProviderSettings> {
    let read = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
    let from_env = (read(vars.api_key), read(vars.base_url));
    let mut settings = match block {
        Some(settings) => settings,
        None if used || from_env.0.is_some() || from_env.1.is_some() => ProviderSettings::default(),
        None => return None,
    };
    settings.origins.api_key = match (&settings.api_key, from_env.0) {
        (Some(_), _) => Origin::File,
        (None, Some(key)) => {
            settings.api_key = Some(key);
            Origin::Environment(vars.api_key)
        }
        (None, None) => Origin::Default,
    };
    settings.origins.base_url = match (&settings.base_url, from_env.1) {
        (Some(_), _) => Origin::File,
        (None, Some(url)) => {
            settings.base_url = Some(url.trim_end_matches('/').to_owned());
            Origin::Environment(vars.base_url)
        }
        (None, None) => Origin::Default,
    };
    Some(settings)
}

impl Deployment {
    /// Completes the provider blocks from the environment (see [`with_environment`]).
    pub(super) fn provider_environment(&mut self, lookup: &dyn Fn(&str) -> Option<String>) {
        let uses = |wanted: fn(&ModelRef) -> bool| {
            wanted(&self.default_model) || self.agents.iter().any(|a| wanted(&a.model))
        };
        let openai = uses(|m| matches!(m, ModelRef::OpenAi(_)));
        let anthropic = uses(|m| matches!(m, ModelRef::Anthropic(_)));
        self.openai = with_environment(self.openai.take(), &OPENAI_ENV, lookup, openai);
        self.anthropic = with_environment(self.anthropic.take(), &ANTHROPIC_ENV, lookup, anthropic);
    }
}

/// `provider.model` ⇒ a model reference; `passthrough` alone is the echo model, `tck` the
/// conformance kit's scripted one.
pub fn parse_model(model: &str) -> Option<ModelRef> {
    match model.split_once('.') {
        None if model == "passthrough" => Some(ModelRef::Passthrough),
        Some(("passthrough", _)) => Some(ModelRef::Passthrough),
        None if model == "tck" => Some(ModelRef::Tck),
        Some(("openai", m)) if !m.is_empty() => Some(ModelRef::OpenAi(m.to_owned())),
        Some(("anthropic", m)) if !m.is_empty() => Some(ModelRef::Anthropic(m.to_owned())),
        _ => None,
    }
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelRef::Passthrough => f.write_str("passthrough"),
            ModelRef::Tck => f.write_str("tck"),
            ModelRef::OpenAi(m) => write!(f, "openai.{m}"),
            ModelRef::Anthropic(m) => write!(f, "anthropic.{m}"),
        }
    }
}

impl Serialize for ModelRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
