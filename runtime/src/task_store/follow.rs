//! Following a task: its events from here on, wherever its turn runs. A turn running on this
//! replica is followed in its log ([`Subscription`]); one running on another replica sharing
//! the NATS KV store, over the relay ([`super::relay`]). A follower never waits forever: when
//! no replica answers for the task any more, it is told the task failed.

use std::time::Duration;

use daedalus_contract::{Message, Part, Role, StreamEvent, Task, TaskState};
use futures::StreamExt;

use super::cell::{self, Subscription};
use super::relay::{Relay, RelayedEvent};

/// How long a follower of a remote task waits for an event before it asks whether any
/// replica still runs the task.
pub const LIVENESS: Duration = Duration::from_secs(15);

/// The message of a task no replica runs any more.
pub const ORPHANED: &str = "the replica running this task stopped before it finished";

/// A task's events, from wherever its turn runs.
#[derive(Debug)]
pub enum Follow {
    /// The turn runs here (or the task waits for input here).
    Local(Subscription),
    /// The turn runs on another replica.
    Remote(Box<RemoteFollow>),
    /// Nothing more will come (the answer so far was the whole story).
    Ended,
}

impl Follow {
    /// The next event; `None` once the turn has ended.
    pub async fn next(&mut self) -> Option<StreamEvent> {
        match self {
            Follow::Local(subscription) => subscription.next().await,
            Follow::Remote(remote) => remote.next().await,
            Follow::Ended => None,
        }
    }
}

/// A task running on another replica, followed over the relay.
#[derive(Debug)]
pub struct RemoteFollow {
    task_id: String,
    relay: Relay,
    events: async_nats::Subscriber,
    /// The last sequence number heard; earlier events are in the task already.
    after: u64,
    /// The task as the events so far make it.
    task: Task,
    done: bool,
}

impl RemoteFollow {
    pub(super) fn new(
        task_id: &str,
        relay: Relay,
        events: async_nats::Subscriber,
        after: u64,
        task: Task,
    ) -> Self {
        Self {
            task_id: task_id.to_owned(),
            relay,
            events,
            after,
            task,
            done: false,
        }
    }

    async fn next(&mut self) -> Option<StreamEvent> {
        while !self.done {
            let heard = tokio::time::timeout(LIVENESS, self.events.next()).await;
            match heard {
                Ok(Some(message)) => {
                    let Ok(relayed) =
                        daedalus_contract::read::from_slice::<RelayedEvent>(&message.payload)
                    else {
                        continue;
                    };
                    if relayed.seq <= self.after {
                        continue;
                    }
                    self.after = relayed.seq;
                    self.task = cell::apply(self.task.clone(), &relayed.event);
                    if matches!(&relayed.event, StreamEvent::StatusUpdate(u) if u.r#final) {
                        self.done = true;
                    }
                    return Some(relayed.event);
                }
                Ok(None) => return Some(self.orphaned()),
                Err(_) => {
                    if self.relay.ask_now(&self.task_id).await.is_none() {
                        return Some(self.orphaned());
                    }
                }
            }
        }
        None
    }

    /// No replica runs the task any more: it is over, failed.
    fn orphaned(&mut self) -> StreamEvent {
        self.done = true;
        StreamEvent::Task(orphaned(self.task.clone()))
    }
}

/// `task`, failed because no replica runs it any more.
pub fn orphaned(mut task: Task) -> Task {
    let mut message = Message::new(
        uuid::Uuid::new_v4().to_string(),
        Role::Agent,
        vec![Part::text(ORPHANED)],
    );
    message.task_id = Some(task.id.clone());
    message.context_id.clone_from(&task.context_id);
    task.status.state = TaskState::Failed;
    task.status.message = Some(message);
    task.status.timestamp =
        Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
    task
}
