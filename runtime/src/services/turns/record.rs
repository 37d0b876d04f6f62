//! Durable turns: the record of an A2A task's running turn, kept in the task store beside the
//! task from the moment the turn begins until it ends — what was asked (the agent, the
//! message, the caller's sampling and controls) and the loop's last checkpoint. A runtime
//! restarted on a durable task store resumes each turn it left running from its record
//! instead of failing it ([`TurnService::resume_left_running`]); a turn that keeps losing its
//! runtime is failed after `TURN_MAX_RESUMES` resumes.
//!
//! What a record never holds: the caller's credentials. It keeps who the caller is (its
//! principal and tenant), so a resumed turn is held to and counted in the same budgets; it has
//! no bearer to hand on, so a downstream server that needs the caller's token
//! (`forward_inbound_auth`, `token_exchange`) is called without one.
//!
//! [`TurnService::resume_left_running`]: super::TurnService::resume_left_running

use async_trait::async_trait;
use daedalus_contract::Message;
use serde::{Deserialize, Serialize};

use crate::agents::agent_loop::{Checkpoint, Checkpointer, TurnControls};
use crate::config::sampling::SamplingParams;
use crate::platform::identity::Principal;
use crate::stores::tasks::TaskStore;

/// The version of a record's stored form; a record of another version is not resumed.
pub const RECORD_VERSION: u32 = 1;

/// What a restart needs to go on with a running turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnRecord {
    pub version: u32,
    /// The agent running the turn.
    pub agent: String,
    /// Who asked for the turn (its principal and tenant; never a credential): the turn goes on
    /// for them when resumed, held to their budgets. `None`: authentication was off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
    /// The message the turn answers (its task and context filled in).
    pub message: Message,
    /// The conversation the turn continues.
    pub conversation: String,
    #[serde(default)]
    pub sampling: SamplingParams,
    #[serde(default)]
    pub controls: TurnControls,
    /// Whether the model streams its answer.
    #[serde(default)]
    pub stream: bool,
    /// How many times the turn was resumed so far after its runtime was lost (a hand-off at
    /// shutdown is not counted: `TURN_MAX_RESUMES` stops poison turns, not rolling deploys).
    #[serde(default)]
    pub resumes: u32,
    /// The turn was handed off at its runtime's shutdown, from its last checkpoint.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handed_off: bool,
    /// The loop's last checkpoint (none before its first completed step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// The W3C `traceparent` of the turn's first run: a resumed turn's span continues it, so
    /// one trace holds the turn before and after its runtime stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// A turn to resume: its record, and the replica that left it running. It resumes only over
/// the task as that replica left it: a replica that began the task since (a peer that
/// resumed it first) has it, and the turn is left to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    pub record: TurnRecord,
    pub left_by: String,
}

impl TurnRecord {
    /// The tokens the turn's model calls used before its last checkpoint (what a resumed
    /// turn counts as spent already against `tokens_per_turn`).
    pub fn tokens_spent(&self) -> u64 {
        self.checkpoint.as_ref().map_or(0, |c| {
            c.usage.input_tokens.saturating_add(c.usage.output_tokens)
        })
    }

    /// The record as stored.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A stored record, if this runtime can resume it.
    pub fn from_json(json: &str) -> Option<Self> {
        serde_json::from_str::<Self>(json)
            .ok()
            .filter(|r| r.version == RECORD_VERSION)
    }
}

/// The checkpointer of one task's turn: each checkpoint replaces the one in the task's
/// record, kept in the task store before the loop's next step starts.
#[derive(Debug)]
pub struct StoredCheckpoints {
    store: TaskStore,
    task_id: String,
    record: tokio::sync::Mutex<TurnRecord>,
}

impl StoredCheckpoints {
    /// Keeps each checkpoint of task `task_id`'s turn into `record` (kept already, with the
    /// turn's begin).
    pub fn new(store: &TaskStore, task_id: &str, record: TurnRecord) -> Self {
        Self {
            store: store.clone(),
            task_id: task_id.to_owned(),
            record: tokio::sync::Mutex::new(record),
        }
    }
}

impl StoredCheckpoints {
    /// Marks the record handed off at shutdown (stored before this returns): its resume is a
    /// hand-off's, not counted against `TURN_MAX_RESUMES`.
    pub async fn hand_off(&self) {
        let mut record = self.record.lock().await;
        record.handed_off = true;
        self.store
            .keep_turn(&self.task_id, Some(&record.to_json()))
            .await;
    }
}

#[async_trait]
impl Checkpointer for StoredCheckpoints {
    async fn save(&self, checkpoint: &Checkpoint) {
        let mut record = self.record.lock().await;
        record.checkpoint = Some(checkpoint.clone());
        self.store
            .keep_turn(&self.task_id, Some(&record.to_json()))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{Part, Role};

    use super::*;

    #[test]
    fn a_record_round_trips_and_another_version_is_not_resumed() {
        let record = TurnRecord {
            version: RECORD_VERSION,
            agent: "agent".to_owned(),
            principal: Some(Principal {
                issuer: None,
                subject: "acme-bot".to_owned(),
                tenant: Some("acme".to_owned()),
            }),
            message: Message::new("m-1", Role::User, vec![Part::text("hi")]),
            conversation: "a2a/c".to_owned(),
            sampling: SamplingParams::default(),
            controls: TurnControls {
                system_append: Some("be brief".to_owned()),
                ..TurnControls::default()
            },
            stream: true,
            resumes: 1,
            handed_off: true,
            checkpoint: None,
            traceparent: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned()),
        };
        assert_eq!(
            TurnRecord::from_json(&record.to_json()),
            Some(record.clone())
        );
        let other = TurnRecord {
            version: RECORD_VERSION + 1,
            ..record
        };
        assert_eq!(TurnRecord::from_json(&other.to_json()), None);
        assert_eq!(TurnRecord::from_json("not json"), None);
    }
}
