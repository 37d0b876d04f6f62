//! `agents.yaml` fixtures, built up key by key.

use std::fmt::Write as _;

/// An `agents.yaml` under construction: the default model and its provider, downstream MCP
/// servers, and agents (each as the YAML of its mapping).
#[derive(Debug, Clone, Default)]
pub struct AgentsYaml {
    head: String,
    servers: Vec<(String, String)>,
    agents: Vec<(String, String)>,
}

impl AgentsYaml {
    /// A deployment whose default model is OpenAI's `model` (with vision) behind `base_url`,
    /// for example the fake LLM's OpenAI face.
    pub fn on_openai(base_url: &str, key: &str, model: &str) -> Self {
        Self {
            head: format!(
                "default_model: openai.{model}\nmodel_capabilities: {{ vision: true }}\n\
                 openai: {{ api_key: {key}, base_url: \"{base_url}\" }}\n"
            ),
            ..Self::default()
        }
    }

    /// Adds the downstream MCP server `name` at `url` (Streamable HTTP).
    #[must_use]
    pub fn mcp_server(mut self, name: &str, url: &str) -> Self {
        self.servers
            .push((name.to_owned(), format!("{{ url: \"{url}\" }}")));
        self
    }

    /// Adds agent `name`, `body` being its mapping in flow style
    /// (`{ instruction: hi, servers: [tools] }`).
    #[must_use]
    pub fn agent(mut self, name: &str, body: &str) -> Self {
        self.agents.push((name.to_owned(), body.to_owned()));
        self
    }

    /// The YAML text.
    pub fn build(&self) -> String {
        let mut yaml = self.head.clone();
        if self.servers.is_empty() {
            yaml.push_str("mcp:\n  servers: {}\n");
        } else {
            yaml.push_str("mcp:\n  servers:\n");
            for (name, body) in &self.servers {
                let _ = writeln!(yaml, "    {name}: {body}");
            }
        }
        yaml.push_str("agents:\n");
        for (name, body) in &self.agents {
            let _ = writeln!(yaml, "  {name}: {body}");
        }
        yaml
    }
}

#[cfg(test)]
mod tests {
    use super::AgentsYaml;

    #[test]
    fn builds_the_keys_in_order() {
        let yaml = AgentsYaml::on_openai("http://llm", "sk", "gpt")
            .mcp_server("tools", "http://mcp/mcp")
            .agent("a", "{ servers: [tools] }")
            .build();
        assert_eq!(
            yaml,
            "default_model: openai.gpt\nmodel_capabilities: { vision: true }\n\
             openai: { api_key: sk, base_url: \"http://llm\" }\n\
             mcp:\n  servers:\n    tools: { url: \"http://mcp/mcp\" }\n\
             agents:\n  a: { servers: [tools] }\n"
        );
    }
}
