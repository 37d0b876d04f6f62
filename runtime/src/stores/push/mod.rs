//! What is kept of tasks' webhooks ([`record::PushRecord`]: each webhook's config and the
//! last state it took), beside the tasks in the task store's backend: a table of the SQLite
//! file ([`sqlite`]) or entries of the tasks' KV bucket ([`nats_kv`]), each changed by
//! compare-and-set on its own revision. The push service ([`crate::services::push`]) keeps the
//! rules: who may set webhooks, what is owed, when it is delivered.

pub mod nats_kv;
pub mod record;
pub mod sqlite;

pub use nats_kv::NatsKvPush;
pub use record::{PushBackend, PushRecord, Webhook};
pub use sqlite::SqlitePush;
