//! What every part stands on, and imports nothing of the runtime's own.
//!
//! - [`identity`]: who is calling: bearer tokens (JWKS), API keys, scopes and tenants;
//!   [`bearer`]: the caller's bearer token, carried to downstream servers that opt in.
//! - [`metrics`]: the Prometheus families and their exposition; [`telemetry`]: spans and the
//!   OTLP export.
//! - [`card_keys`]: the keys that sign this runtime's agent cards, and their rotation.
//! - [`heap`]: freed memory handed back to the operating system.
//! - [`tool_schema`]: the JSON Schema of a typed argument struct, as a tool's input.
//! - [`unknown_keys`]: one warning about each key a caller sent that nothing reads.
//!
//! May import: nothing of the runtime.

pub mod bearer;
pub mod card_keys;
pub mod heap;
pub mod identity;
pub mod metrics;
pub mod telemetry;
pub mod tool_schema;
pub mod unknown_keys;
