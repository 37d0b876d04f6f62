//! What every crate's tests share, so a test reads like the behaviour it checks:
//!
//! - [`NatsServer`]: a real `nats-server` with JetStream, on free ports;
//! - [`Runtime`]: the real runtime in-process on port 0, ready (`/health` 200) before the test
//!   goes on, stopped when dropped;
//! - [`AgentsYaml`]: an `agents.yaml` fixture, built up key by key;
//! - [`RuntimeProcess`]: the runtime binary as a child process, to SIGKILL and start again;
//! - [`open_mcp_session`]: an MCP session opened by hand (a flood's); [`rss_bytes`];
//! - [`wait_until`]: polling for a positive signal under a deadline, instead of sleeping;
//! - [`OidcProvider`]: a real OpenID provider (discovery, JWKS, client credentials, token
//!   exchange) whose tokens the identity tests present;
//! - [`OtlpReceiver`]: an OTLP/HTTP trace receiver that decodes what it is sent;
//! - [`SseEvents`]: an SSE response read event by event as it arrives;
//! - [`EchoAgent`]: the official A2A Python SDK serving an echo agent (another agent to call);
//! - [`A2aClient`]: an A2A v1 JSON-RPC client (send, get, list, cancel, subscribe, push
//!   configs);
//! - [`Webhook`]: a push notification receiver on loopback that can be down;
//! - [`fake_llm_client`]: a provider client on the strict fake LLM;
//! - [`runtime_config`]: the runtime's configuration as its pure parser builds it;
//! - the architecture checks ([`architecture`]): the module graph read from `use` lines;
//! - the README and `docs/` as a reader meets them: links, anchors, and shell blocks run as
//!   written in a sandbox ([`docs`]);
//! - every documented setting tried through a binary's `--check-config` ([`documented`]);
//! - the Kubernetes manifests rendered and read ([`kubernetes`]), the pod's binaries run on a
//!   rendered container's environment ([`pod`]), beside what
//!   `docker-compose.yml` and the Dockerfiles say of the pod ([`compose`]).
//!
//! Only integration tests and benchmarks use it. It links the runtime's public library (to
//! serve it in-process) and the fake LLM, and no other workspace crate: the proxy's tests build the proxy's
//! configuration through its own public `ProxyConfig::for_agent`.

pub mod a2a_client;
mod a2a_echo;
pub mod architecture;
mod binaries;
pub mod compose;
mod config;
mod conventions;
pub mod docs;
pub mod documented;
mod fixture;
pub mod kubernetes;
mod llm;
mod mcp;
mod nats;
mod oidc;
mod otlp;
pub mod pod;
mod runtime;
mod runtime_process;
mod rust_sdk_echo;
mod sse;
mod wait;
mod webhook;

pub use a2a_client::{A2aClient, Canceled};
pub use a2a_echo::{EchoAgent, a2a_python};
pub use binaries::{conformance_binary, proxy_binary, runtime_binary};
pub use config::{card_signing_key_file, card_signing_plan, runtime_config};
pub use conventions::Conventions;
pub use fixture::AgentsYaml;
pub use llm::{FakeFace, SUMS, fake_llm_client, script_a_turn_cut_at_step_three};
pub use mcp::{McpOpened, ModernClient, modern_mcp_request, open_mcp_session, rss_bytes};
pub use nats::{NatsCluster, NatsServer, binary as nats_server_binary, free_port};
pub use oidc::{AUDIENCE, Alg, OidcClient, OidcProvider, now as unix_now};
pub use otlp::{OtlpReceiver, ReceivedSpan, SpanKind, Value as AttributeValue};
pub use runtime::Runtime;
pub use runtime_process::RuntimeProcess;
pub use rust_sdk_echo::RustSdkEcho;
pub use sse::SseEvents;
pub use wait::{wait_until, wait_until_some};
pub use webhook::{Notification, Webhook};
