//! `daedalus-proxy`: the NATS JetStream sidecar of the Daedalus runtime contract. It pulls the
//! agent's tasks from a durable consumer, sends each to the runtime beside it, and publishes
//! the answer as the task's result (docs/design.md §5).
//!
//! Each concern lives in one place:
//!
//! - [`lifecycle`]: [`run`] as named steps: startup (each step retried until
//!   `STARTUP_TIMEOUT`), consuming, drain, and the supervision of every background task;
//! - [`consume`]: taking tasks from the consumer and working each to its end (worker, job,
//!   lease, inbox, durable stores, give-up, max-deliveries advisories, consumer keeper);
//! - [`forward`]: the runtime behind the proxy (the HTTP client, its health, its availability);
//! - [`wire`]: what travels on NATS (subjects, a task's ids, result and dead-letter headers,
//!   trace context);
//! - [`nats`]: connecting, and the streams and the consumer as the configuration asks;
//! - [`config`]: the typed configuration, parsed once by a pure function;
//! - [`endpoints`] and [`metrics`]: `/healthz` and `/metrics`;
//! - [`publish`]: the `publish` subcommand (a task onto NATS, and its result back), with its
//!   terminal output in `publish::terminal`;
//! - [`error`]: why the proxy stopped.
//!
//! Modules depend one way: `lifecycle` on everything, `consume` on `forward` and `wire`, and
//! nothing back; the architecture test checks that no module circle appears, and none between
//! these top-level modules.

pub mod config;
pub mod consume;
pub mod endpoints;
pub mod error;
pub mod forward;
pub mod lifecycle;
pub mod metrics;
pub mod nats;
pub mod publish;
pub mod wire;

pub use error::ProxyError;
pub use lifecycle::serve::{run, run_with};
