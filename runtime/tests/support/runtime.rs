//! The in-process runtime (the test kit's) and the agents.yaml the runtime's tests share.

#[allow(unused_imports, reason = "not every test file starts a runtime")]
pub use daedalus_test_kit::Runtime;

/// An agents.yaml on the fake LLM's OpenAI face (`model`, a vision model): `servers` is YAML for
/// `mcp.servers` (indented four spaces, `    {}` for none), `agents` for the `agents:` map.
pub fn on_fake_openai(
    base_url: &str,
    key: &str,
    model: &str,
    servers: &str,
    agents: &str,
) -> String {
    let servers = if servers.trim() == "{}" {
        "  servers: {}".to_owned()
    } else {
        format!("  servers:\n{servers}")
    };
    format!(
        "default_model: openai.{model}\nmodel_capabilities: {{ vision: true }}\n\
         openai: {{ api_key: {key}, base_url: \"{base_url}\" }}\nmcp:\n{servers}\nagents:\n{agents}"
    )
}
