//! The runtime behind the proxy.
//!
//! - [`forwarder`]: the seam a worker sends a task through ([`Forwarder`]), and what came back;
//! - [`http`]: the runtime over the contract's HTTP endpoints (tasks, health, card, manifest),
//!   tasks to an `http://` runtime on HTTP/1 connections each worker drives itself;
//! - [`event_stream`]: a runtime's SSE answer read event by event, and the Task it rebuilds;
//! - [`availability`]: whether the runtime can take tasks now, shared by workers and `/healthz`;
//! - [`health_watch`]: the loop that polls `/health` and reports what it says.

pub mod availability;
pub mod event_stream;
pub mod forwarder;
pub mod health_watch;
pub mod http;
mod plain_http;

pub use forwarder::{ForwardError, Forwarder, Reply};
pub use http::{HttpRuntime, RuntimeCheckError, SUPPORTED_MAJOR};
