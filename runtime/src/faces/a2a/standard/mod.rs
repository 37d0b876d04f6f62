//! The standard A2A bindings, each a translation of its wire into the shared
//! [`operations`](super::operations) and back:
//!
//! - [`jsonrpc`]: JSON-RPC 2.0 on `POST /` (A2A v1.0), with [`v03`] for v0.3 clients on the
//!   same path and [`method`] for what the two share;
//! - [`rest`]: HTTP+JSON under `/a2a/rest`;
//! - [`grpc`]: `lf.a2a.v1.A2AService` on the same port (HTTP/2).

pub(super) mod grpc;
pub(super) mod jsonrpc;
pub(super) mod method;
pub(super) mod rest;
pub(super) mod v03;

#[cfg(test)]
mod jsonrpc_tests;
#[cfg(test)]
mod rest_tests;
#[cfg(test)]
mod v03_tests;
