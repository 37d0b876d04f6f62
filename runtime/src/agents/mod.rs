//! The agents of a deployment and what one agent's turn is made of.
//!
//! - [`fleet`]: every agent of the deployment, built from the validated configuration.
//! - [`agent_loop`]: one agent's turn: the LLM tool loop ([`agent_loop::LlmAgent`]), the
//!   passthrough and conformance-kit models, sub-agents, the toolbox, compaction.
//! - [`llm`]: the OpenAI and Anthropic providers, each only its wire.
//! - [`mcp_client`]: the client of downstream MCP servers; [`a2a_tools`]: other A2A agents as
//!   tools; [`downstream_auth`]: the runtime's own credential for downstream servers.
//! - [`budgets`]: what each principal, tenant and agent may spend, held at a turn's admission
//!   and before each of its model calls.
//! - [`migrate`]: `migrate-module`, a fast-agent module read into `agents.yaml`.
//!
//! May import: `config`, `stores`, `platform`.

pub mod a2a_tools;
pub mod agent_loop;
pub mod budgets;
pub mod downstream_auth;
pub mod fleet;
pub mod llm;
pub mod mcp_client;
pub mod migrate;
