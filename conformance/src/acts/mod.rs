//! ACTS, the A2A Conformance Test Suite: the official corpus of declarative tests (vendored,
//! pinned, in `conformance/acts/`), run against any A2A server by URL over each binding its
//! card declares.
//!
//! - [`corpus`]: the documents, read into their types (an unknown key fails the load);
//! - [`scope`]: dot-paths, captures and `{{...}}` references;
//! - [`assertions`]: the assertion language of `expect`, `expect_error` and `until`;
//! - [`stream`]: `expect_stream` over a stream's events;
//! - [`wire`]: operations and errors as each binding carries them (A2A §5.3, §5.4);
//! - [`dispatch`]: a step's request on a binding, and what came back;
//! - [`run`]: the tests over each binding, and what each came to ([`steps`]: one test's
//!   steps); [`disputed`]: the tests the
//!   released specification contradicts;
//! - [`webhook`]: the runner's own webhook receiver, for the push-delivery tests.

pub mod assertions;
pub mod corpus;
pub mod dispatch;
pub mod disputed;
pub mod grpc;
pub mod report;
pub mod run;
pub mod scope;
mod steps;
pub mod stream;
pub mod webhook;
pub mod wire;
