//! What the runtime keeps, each store told apart by what it holds.
//!
//! - [`tasks`]: A2A tasks as they stand, their event logs and running turns; shared by
//!   replicas on a NATS KV bucket (leases, hand-offs, compare-and-set).
//! - [`conversations`]: a conversation's messages, across tasks and restarts.
//! - [`push`]: tasks' webhooks and what each took, beside the tasks.
//! - [`budget_usage`]: the budgets' windows, in the SQLite file (shared by replicas, they live
//!   in a KV bucket as [`versioned`] records).
//! - [`mcp_sessions`]: the live MCP sessions of every agent's MCP face, bounded in count and
//!   bytes.
//! - [`turn_writes`]: what a turn writes that is committed with its end.
//! - [`sqlite_file`]: the default store, one SQLite file every store above may live in, with
//!   its one writer ([`sqlite_writer`]: a thread and its group commit); [`kv_bucket`]: a
//!   JetStream KV bucket opened as asked, whose entries [`versioned`] reads and writes by
//!   compare-and-set.
//!
//! May import: `platform`.

pub mod budget_usage;
pub mod conversations;
pub mod kv_bucket;
pub mod mcp_sessions;
pub mod push;
pub mod sqlite_file;
pub mod sqlite_writer;
pub mod tasks;
pub mod turn_writes;
pub mod versioned;
