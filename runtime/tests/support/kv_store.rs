//! A NATS KV task store that replica processes share, for the replica drills.

use daedalus_test_kit::{A2aClient, NatsServer};
use serde_json::Value;

use super::process::{Runtime, runtime};

/// A NATS server and the task store URL replicas share on it.
pub struct Store {
    pub nats: NatsServer,
    pub tasks_db: String,
}

impl Store {
    pub fn start() -> Self {
        let nats = NatsServer::start();
        let tasks_db = format!("{}/drill-tasks", nats.url());
        Self { nats, tasks_db }
    }

    /// A replica named `name` on this store.
    pub fn replica(&self, name: &str) -> (Runtime, A2aClient) {
        self.replica_with(name, &[])
    }

    /// A replica named `name` on this store, with more environment.
    pub fn replica_with(&self, name: &str, env: &[(&str, &str)]) -> (Runtime, A2aClient) {
        let mut builder = runtime()
            .env("TASKS_DB", &self.tasks_db)
            .env("REPLICA_ID", name)
            .env("REPLICA_LEASE", "2s");
        for (key, value) in env {
            builder = builder.env(key, value);
        }
        let process = builder.start();
        let client = A2aClient::new(process.url("/"));
        (process, client)
    }

    /// The state the bucket holds for task `id` (contract spelling: `completed`, ...).
    pub async fn stored_state(&self, id: &str) -> Option<String> {
        let client = async_nats::connect(self.nats.url())
            .await
            .expect("connects");
        let kv = async_nats::jetstream::new(client)
            .get_key_value("drill-tasks")
            .await
            .expect("the bucket");
        let key = format!("t.{}", daedalus_contract::token::token(id));
        let entry = kv.get(key).await.expect("read")?;
        let stored: Value = serde_json::from_slice(&entry).expect("JSON");
        stored["task"]["status"]["state"]
            .as_str()
            .map(str::to_owned)
    }
}
