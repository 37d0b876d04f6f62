//! The Daedalus runtime contract's data model.
//!
//! This crate owns three things every other part of the system shares:
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

#[cfg(feature = "cli")]
pub mod cli;
pub mod container;
pub mod model;
pub mod read;
pub mod redact;
#[cfg(feature = "service")]
pub mod service;
pub mod token;
pub mod validate;
pub mod write;

pub use model::*;
pub use read::ReadError;
pub use validate::{Schema, SchemaError, SchemaErrors, TaskRule};
pub use write::Dialect;

/// The contract version this crate implements, as the manifest spells it.
pub const CONTRACT_VERSION: &str = "v1";
