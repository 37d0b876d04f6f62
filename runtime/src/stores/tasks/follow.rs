//! Following a task: its events from here on, wherever its turn runs, until it ends or waits
//! for input again after a change.
//!
//! A follower reads the task's log here ([`Subscription`]): the events of a turn running
//! here, and the revisions stored elsewhere turned into events (a cancel, a failure for a lost
//! replica, a continuation). When the task runs on another replica sharing the NATS KV store,
//! the follower reads that turn's events over the relay instead, from the sequence number its
//! replica answered ([`super::replicas::relay`]); a gap in them (a follower that fell behind)
//! is filled with the task as it stands. Whatever the relay says, the store has the last
//! word: an end stored while following (the turn's own, or one that won over it) ends the
//! stream with the events that lead there. A follower never waits on a replica that is gone:
//! the store fails a lost replica's tasks ([`super::replicas`]), and the follower hears it.

use crate::platform::identity::Caller;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use daedalus_contract::{StreamEvent, Task};
use tokio::sync::watch;

use super::TaskStore;
use super::backend::running;
use super::replicas::{Feed, Now};
use super::task_cell::{self, Subscription, TaskCell, changes, is_final};

/// How long a follower of a turn on another replica goes without hearing anything before it
/// reads the task from the store again.
pub const QUIET: Duration = Duration::from_secs(15);

/// A task's events, from wherever its turn runs.
#[derive(Debug)]
pub struct Follow {
    store: TaskStore,
    task_id: String,
    cell: Arc<TaskCell>,
    mode: Mode,
    /// Events to hand out before reading on.
    pending: VecDeque<StreamEvent>,
    done: bool,
}

#[derive(Debug)]
enum Mode {
    /// The task's log here.
    Here(Subscription),
    /// A turn on another replica, over the relay.
    Elsewhere(Box<Remote>),
}

impl TaskStore {
    /// The task as it stands and its events from here on, wherever its turn runs. A task that
    /// is over has nothing to follow.
    pub async fn follow(
        &self,
        task_id: &str,
        caller: &Caller,
    ) -> Result<(Task, Follow), super::SubscribeRefusal> {
        let cell = self
            .find_for(task_id, caller)
            .await
            .ok_or(super::SubscribeRefusal::Unknown)?;
        let (task, subscription) = cell.subscribe()?;
        let mut follow = Follow {
            store: self.clone(),
            task_id: task_id.to_owned(),
            cell,
            mode: Mode::Here(subscription),
            pending: VecDeque::new(),
            done: false,
        };
        let task = match follow.go_elsewhere().await {
            Some(standing) => standing,
            None => task,
        };
        Ok((task, follow))
    }

    /// Whether the task in `cell` runs on another replica: stored running by one, not here.
    fn runs_elsewhere(&self, cell: &TaskCell) -> bool {
        let Some(me) = self.replica() else {
            return false;
        };
        self.relay().is_some()
            && !cell.is_running()
            && cell.state().is_some_and(running)
            && cell.revision().1.is_some_and(|owner| owner != me)
    }
}

impl Follow {
    /// The next event; `None` once the stream is over.
    pub async fn next(&mut self) -> Option<StreamEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                if is_final(&event) {
                    self.done = true;
                    self.pending.clear();
                }
                return Some(event);
            }
            if self.done {
                return None;
            }
            match &mut self.mode {
                Mode::Here(subscription) => {
                    let event = subscription.next().await?;
                    if !is_final(&event)
                        && let Some(standing) = self.go_elsewhere().await
                    {
                        self.pending.push_back(StreamEvent::Task(standing));
                    }
                    return Some(event);
                }
                Mode::Elsewhere(remote) => match remote.next(&self.store, &self.task_id).await {
                    Heard::Event(event) => self.pending.push_back(event),
                    Heard::Stored(events) => self.pending.extend(events),
                    Heard::Gone => self.follow_here(),
                },
            }
        }
    }

    /// If the task runs on another replica, follows it there: subscribes to its events, then
    /// asks its replica where it stands (nothing falls between the two). The task as it
    /// stands, to hand out first; `None` when it does not run elsewhere (or its replica does
    /// not answer for it: the store will tell how it ended).
    async fn go_elsewhere(&mut self) -> Option<Task> {
        if !self.store.runs_elsewhere(&self.cell) {
            return None;
        }
        let relay = self.store.relay()?.clone();
        let owner = self.cell.revision().1?;
        let events = relay.events(&self.task_id).await?;
        let Ok(Now::Running { seq, task }) = relay.ask_now(&owner, &self.task_id).await else {
            return None;
        };
        self.mode = Mode::Elsewhere(Box::new(Remote {
            relay,
            owner,
            events,
            after: seq,
            task: task.clone(),
            stored: self.cell.changes_seen(),
            revision: self.cell.revision().0,
        }));
        Some(task)
    }

    /// Follows the task's log here again, from the task as it stands.
    fn follow_here(&mut self) {
        match self.cell.subscribe() {
            Ok((_, subscription)) => self.mode = Mode::Here(subscription),
            Err(_) => self.done = true,
        }
    }
}

/// A turn on another replica, followed over the relay.
#[derive(Debug)]
struct Remote {
    relay: super::Relay,
    owner: String,
    events: Feed,
    /// The last sequence number heard; earlier events are in the task already.
    after: u64,
    /// The task as the events so far make it.
    task: Task,
    /// Changes with every revision of the task memory takes.
    stored: watch::Receiver<u64>,
    /// The revision the task stood at when the follower joined.
    revision: u64,
}

/// What following a remote turn heard.
#[expect(
    clippy::large_enum_variant,
    reason = "made once per request and taken apart at once; a box would only add an allocation"
)]
enum Heard {
    /// One event of the turn.
    Event(StreamEvent),
    /// The store holds a newer revision: the events that lead to it.
    Stored(Vec<StreamEvent>),
    /// The relay has nothing more to say: follow the store.
    Gone,
}

impl Remote {
    async fn next(&mut self, store: &TaskStore, task_id: &str) -> Heard {
        loop {
            tokio::select! {
                relayed = self.events.next() => {
                    let Some(relayed) = relayed else {
                        return Heard::Gone;
                    };
                    if relayed.seq <= self.after {
                        continue;
                    }
                    if relayed.seq > self.after + 1 {
                        // Missed some (a slow reader): the task as it stands, then on.
                        return match self.relay.ask_now(&self.owner, task_id).await {
                            Ok(Now::Running { seq, task }) => {
                                self.after = seq;
                                self.task = task.clone();
                                Heard::Event(StreamEvent::Task(task))
                            }
                            _ => Heard::Gone,
                        };
                    }
                    self.after = relayed.seq;
                    self.task = task_cell::apply(self.task.clone(), &relayed.event);
                    return Heard::Event(relayed.event);
                }
                changed = self.stored.changed() => {
                    if changed.is_err() {
                        return Heard::Gone;
                    }
                    if let Some(events) = self.settled(store, task_id) {
                        return Heard::Stored(events);
                    }
                }
                () = tokio::time::sleep(QUIET) => {
                    store.refresh(task_id).await;
                    if let Some(events) = self.settled(store, task_id) {
                        return Heard::Stored(events);
                    }
                }
            }
        }
    }

    /// If memory holds a newer revision in which no turn runs (the task ended, or waits),
    /// the events from what this follower told to it, the last one final.
    fn settled(&self, store: &TaskStore, task_id: &str) -> Option<Vec<StreamEvent>> {
        let cell = store.existing(task_id)?;
        let (revision, _) = cell.revision();
        let task = cell.task()?;
        if revision <= self.revision || running(task.status.state) {
            return None;
        }
        let mut events = changes(&self.task, &task);
        if !events.iter().any(is_final) {
            events.push(super::turn::final_update(&task));
        }
        Some(events)
    }
}
