//! `daedalus-runtime migrate-module <module.py>`: a fast-agent module's `@fast.agent(...)`
//! agents as inline `agents.yaml` definitions, since Python modules cannot run here.
//!
//! The decorator's literal arguments are read statically ([`python`]): `name` (or the first
//! positional argument), `instruction` (or the second), `servers`, `model` and
//! `request_params` (`RequestParams(maxTokens=..., temperature=...)`). An argument that is not
//! a literal (a variable, an f-string, a call with non-literal arguments) is named in the notes
//! and left as a placeholder marked `FILL IN`; other arguments are named in the notes as not
//! carried over. The output is YAML (JSON-quoted values, so any instruction survives), for
//! review, under a header that says where it came from.

pub mod python;

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// What the migration of one module produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// The `agents:` block to put in agents.yaml.
    pub yaml: String,
    /// What a person must look at: arguments not read, placeholders left, names changed.
    pub notes: Vec<String>,
}

/// The marker of every placeholder the migration leaves.
pub const FILL_IN: &str = "FILL IN";

/// One agent as read from its decorator.
#[derive(Debug, Default)]
struct Agent {
    name: String,
    /// `(key, YAML value)` lines, in the order they are written.
    lines: Vec<(String, String)>,
}

/// Migrates the module `source` (named `label` in the output).
pub fn migrate(source: &str, label: &str) -> Migration {
    let mut notes = Vec::new();
    let mut agents = Vec::new();
    for (n, arguments) in decorators(source).into_iter().enumerate() {
        agents.push(agent(n + 1, &arguments, &mut notes));
    }
    if agents.is_empty() {
        notes.push(format!("{label}: no @<app>.agent(...) decorator found"));
    }
    let mut yaml = format!(
        "# agents.yaml entries migrated from {label} by `daedalus-runtime migrate-module`.\n\
         # Review them; every placeholder says {FILL_IN}.\nagents:\n"
    );
    for agent in &agents {
        let _ = writeln!(yaml, "  {}:", agent.name);
        for (key, value) in &agent.lines {
            let _ = writeln!(yaml, "    {key}: {value}");
        }
    }
    Migration { yaml, notes }
}

/// The argument lists of every `@<something>.agent(` decorator, in order.
fn decorators(source: &str) -> Vec<Vec<python::Argument>> {
    let mut found = Vec::new();
    for (at, _) in source.match_indices('@') {
        let rest = &source[at + 1..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        let decorator = &rest[..name_len];
        if decorator.rsplit('.').next() != Some("agent") || !decorator.contains('.') {
            continue;
        }
        let after = rest[name_len..].trim_start();
        if let Some((arguments, _)) = python::call_arguments(after) {
            found.push(arguments);
        }
    }
    found
}

/// The argument named `keyword`, or the positional one at `position`.
fn find<'a>(
    arguments: &'a [python::Argument],
    keyword: &str,
    position: Option<usize>,
) -> Option<&'a python::Argument> {
    arguments
        .iter()
        .find(|a| a.keyword.as_deref() == Some(keyword))
        .or_else(|| position.and_then(|p| arguments.iter().filter(|a| a.keyword.is_none()).nth(p)))
}

fn quoted(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

fn agent(n: usize, arguments: &[python::Argument], notes: &mut Vec<String>) -> Agent {
    let mut agent = Agent {
        name: agent_name(n, arguments, notes),
        lines: Vec::new(),
    };
    let who = agent.name.clone();
    let placeholder = |key: &str, source: &str, notes: &mut Vec<String>| {
        notes.push(format!(
            "{who}: {key} is not a literal ({source}); {FILL_IN} it"
        ));
    };
    if let Some(instruction) = find(arguments, "instruction", Some(1)) {
        let text = if let Some(Value::String(text)) = python::literal(&instruction.source) {
            text
        } else {
            placeholder("instruction", &instruction.source, notes);
            format!("{FILL_IN}: the instruction was {}", instruction.source)
        };
        agent
            .lines
            .push(("instruction".into(), quoted(&Value::String(text))));
    }
    if let Some(model) = find(arguments, "model", None) {
        match python::literal(&model.source) {
            Some(Value::String(name)) => match model_ref(&name) {
                Some(model) => agent.lines.push(("model".into(), quoted(&Value::String(model)))),
                None => notes.push(format!(
                    "{who}: model {name:?} is not provider.model here ({FILL_IN} it as openai.<model> or anthropic.<model>); left out, so default_model applies"
                )),
            },
            _ => placeholder("model", &model.source, notes),
        }
    }
    if let Some(servers) = find(arguments, "servers", None) {
        match python::literal(&servers.source) {
            Some(Value::Array(list)) if list.iter().all(Value::is_string) => {
                agent
                    .lines
                    .push(("servers".into(), quoted(&Value::Array(list))));
            }
            _ => {
                placeholder("servers", &servers.source, notes);
                agent.lines.push((
                    "servers".into(),
                    format!("[]  # {FILL_IN}: {}", servers.source),
                ));
            }
        }
    }
    if let Some(params) = find(arguments, "request_params", None) {
        match python::literal(&params.source) {
            Some(Value::Object(fields)) => request_params(&who, &fields, &mut agent, notes),
            _ => placeholder("request_params", &params.source, notes),
        }
    }
    let carried = ["name", "instruction", "model", "servers", "request_params"];
    for argument in arguments.iter().filter_map(|a| a.keyword.as_deref()) {
        if !carried.contains(&argument) {
            notes.push(format!("{who}: {argument} is not carried over"));
        }
    }
    agent
}

/// The `n`th agent's name: its literal `name` when it is a valid agent name, that name with
/// each other character made `_` (noted), or a placeholder to fill in (noted).
fn agent_name(n: usize, arguments: &[python::Argument], notes: &mut Vec<String>) -> String {
    let literal_name = find(arguments, "name", Some(0))
        .and_then(|a| python::literal(&a.source))
        .and_then(|v| v.as_str().map(str::to_owned));
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    match literal_name {
        Some(name) if !name.is_empty() && name.chars().all(allowed) => name,
        Some(name) => {
            let safe: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            notes.push(format!(
                "agent {name:?} is named {safe:?} (agent names hold only letters, digits, - and _)"
            ));
            safe
        }
        None => {
            let placeholder = format!("FILL_IN_agent_{n}");
            notes.push(format!(
                "agent {n}: its name is not a literal; {FILL_IN} {placeholder}"
            ));
            placeholder
        }
    }
}

/// `RequestParams(...)`'s fields in this runtime's keys; `max_iterations` becomes the agent's.
fn request_params(
    who: &str,
    fields: &Map<String, Value>,
    agent: &mut Agent,
    notes: &mut Vec<String>,
) {
    let mut params = Map::new();
    for (key, value) in fields {
        let ours = match key.as_str() {
            "maxTokens" | "max_tokens" => "max_tokens",
            "temperature" => "temperature",
            "top_p" | "topP" => "top_p",
            "top_k" | "topK" => "top_k",
            "stopSequences" | "stop" => "stop",
            "seed" => "seed",
            "presence_penalty" | "frequency_penalty" | "response_format" | "tool_choice" => key,
            "max_iterations" => {
                agent.lines.push(("max_iterations".into(), quoted(value)));
                continue;
            }
            other => {
                notes.push(format!("{who}: request_params.{other} is not carried over"));
                continue;
            }
        };
        params.insert(ours.to_owned(), value.clone());
    }
    if !params.is_empty() {
        agent
            .lines
            .push(("request_params".into(), quoted(&Value::Object(params))));
    }
}

/// fast-agent's model string as `provider.model`, when it can tell.
fn model_ref(name: &str) -> Option<String> {
    match name.split_once('.') {
        Some(("openai" | "anthropic", _)) => return Some(name.to_owned()),
        // fast-agent's OpenAI-compatible provider (Ollama, vLLM, ...): set openai.base_url.
        Some(("generic", model)) => return Some(format!("openai.{model}")),
        _ => {}
    }
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("gpt-")
        || lower.starts_with("o1")
        || lower.starts_with("o3")
        || lower.starts_with("o4")
    {
        return Some(format!("openai.{name}"));
    }
    if lower.starts_with("claude-") {
        return Some(format!("anthropic.{name}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_becomes_inline_agents_with_placeholders_where_it_cannot_read() {
        let module = r#"
from mcp_agent.core.fastagent import FastAgent
from mcp_agent.core.request_params import RequestParams
from prompts import RESEARCH_PROMPT

fast = FastAgent("lab")

@fast.agent(
    "writer",
    "You write " "clearly.\nAlways cite.",
    servers=["fetch", "filesystem"],  # the tools it needs
    model="gpt-4.1",
    request_params=RequestParams(maxTokens=2048, temperature=0.3, use_history=True),
    human_input=True,
)
async def writer():
    pass

@fast.agent(name="researcher", instruction=RESEARCH_PROMPT, servers=SERVERS, model="sonnet")
async def researcher():
    pass
"#;
        let m = migrate(module, "agents/lab.py");
        assert!(m.yaml.contains("  writer:\n"), "{}", m.yaml);
        assert!(
            m.yaml
                .contains(r#"    instruction: "You write clearly.\nAlways cite.""#),
            "{}",
            m.yaml
        );
        assert!(
            m.yaml.contains(r#"    servers: ["fetch","filesystem"]"#),
            "{}",
            m.yaml
        );
        assert!(
            m.yaml.contains(r#"    model: "openai.gpt-4.1""#),
            "{}",
            m.yaml
        );
        assert!(
            m.yaml
                .contains(r#"    request_params: {"max_tokens":2048,"temperature":0.3}"#),
            "{}",
            m.yaml
        );
        assert!(
            m.yaml
                .contains("FILL IN: the instruction was RESEARCH_PROMPT"),
            "{}",
            m.yaml
        );
        assert!(
            m.yaml.contains("servers: []  # FILL IN: SERVERS"),
            "{}",
            m.yaml
        );
        for note in [
            "writer: human_input is not carried over",
            "writer: request_params.use_history is not carried over",
            "researcher: instruction is not a literal (RESEARCH_PROMPT)",
            "researcher: model \"sonnet\" is not provider.model here",
        ] {
            assert!(
                m.notes.iter().any(|n| n.contains(note)),
                "{note} in {:?}",
                m.notes
            );
        }
    }
}
