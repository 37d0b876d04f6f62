//! The Daedalus runtime contract, as a crate: everything the contract fixes that more than
//! one part of the system needs.
//!
//! It is named for what it holds, the contract (it lives in `schemas/` next to the contract's
//! JSON Schemas). The contract fixes wire shapes and also a container interface, so both are
//! here; the plumbing that implements the container interface the same way in every binary
//! stays here too, behind features, rather than in a crate of its own:
//!
//! - **The container interface** ([`container`]): the environment variables and their
//!   defaults, the endpoint paths, the duration format, agent names; ([`token`]) how an id
//!   becomes a NATS subject token or header; ([`redact`]) what never reaches a log line.
//! - **Feature `cli`** ([`cli`]): clap parsing with environment fallbacks as a pure function.
//! - **Feature `service`** ([`service`]): JSON-lines logging and the SIGTERM/SIGINT sequence
//!   (contract levels 1 and 2).
//! - **Feature `telemetry`** ([`telemetry`]): W3C trace context over `tracing` spans and OTLP
//!   export (contract level 2).
//! - **Feature `grpc`** (`grpc`): the A2A gRPC binding's service, client and messages, generated
//!   at build time from the vendored normative proto, and the one mapping between its messages
//!   and the typed model (their ProtoJSON).
//!
//! And the wire:
//!
//! - **The typed model** ([`model`]): Message, Part, Task, AgentCard, SendMessageRequest, the
//!   stream events and the runtime-contract manifest, as plain Rust structs.
//! - **Reading is lenient** ([`read`]): the model's `Deserialize` impls accept the contract
//!   spellings (`"user"`, `"input-required"`), the A2A v1 spellings (`ROLE_USER`,
//!   `TASK_STATE_COMPLETED`, snake_case field names) and the A2A v0.3 shapes (`kind`,
//!   `file: {bytes|uri, mimeType}`).
//! - **Writing is exact** ([`write`]): the model's `Serialize` impls emit exactly the contract
//!   dialect; [`write::a2a_v1`] emits strict A2A v1.0 JSON.
//! - **Validation** ([`validate`]) against the contract's JSON Schemas (embedded from the crate
//!   root, `*.schema.json`) and the vendored A2A v1.0 JSON Schema.

#[cfg(feature = "signing")]
pub mod card_signing;
#[cfg(feature = "cli")]
pub mod cli;
pub mod container;
#[cfg(feature = "credentials")]
pub mod credentials;
pub mod error_chain;
#[cfg(feature = "grpc")]
pub mod grpc;
#[cfg(feature = "service")]
pub mod healthcheck;
#[cfg(feature = "telemetry")]
pub mod launch;
#[cfg(feature = "service")]
pub mod log_file;
pub mod model;
pub mod outline;
pub mod read;
pub mod redact;
#[cfg(feature = "service")]
pub mod service;
#[cfg(feature = "telemetry")]
pub mod telemetry;
pub mod token;
pub mod validate;
pub mod write;

pub use model::*;
pub use read::ReadError;
pub use validate::{Schema, SchemaError, SchemaErrors, TaskRule};
pub use write::Dialect;

/// The contract version this crate implements, as the manifest spells it.
pub const CONTRACT_VERSION: &str = "v1";
