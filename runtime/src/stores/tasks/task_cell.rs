//! One task in the store: the lock its turns take one at a time, and its live side — the task
//! as it stands, the revision the backend holds it at, and its event log — which anyone may
//! read while a turn runs. Private to the store: every write goes through a
//! [`super::TaskTurn`], every read through the store.
//!
//! Every event of a turn run here gets the next sequence number and is applied to the task
//! as it stands (the rules of [`TaskRebuilder`]), then kept in the log. A revision written
//! elsewhere (another replica's turn, a cancel, a failure for a lost replica) becomes the
//! events that take the task there ([`changes`]): a subscriber hears it as it would have heard
//! a turn here, and a write that changes nothing logs nothing. A subscriber takes the task as
//! it stands and its sequence number under one lock, then reads every later event from the
//! log, so nothing falls between the two. The log holds at most [`LOG_BYTES`]: a subscriber
//! that falls further behind gets the task as it stands again (nothing it shows is lost, only
//! the steps in between). A finished turn's log is emptied unless a subscriber still reads it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use daedalus_contract::{
    StreamEvent, Task, TaskArtifactUpdateEvent, TaskRebuilder, TaskState, TaskStatusUpdateEvent,
};
use tokio::sync::{OwnedMutexGuard, watch};

use super::backend::{Versioned, running};
use super::size;
use super::stop::TurnStop;
use crate::platform::identity::Principal;

/// Bytes of events a task's log keeps for subscribers that fall behind.
pub const LOG_BYTES: usize = 1 << 20;

/// One task: its turn lock and its live side.
#[derive(Debug)]
pub(super) struct TaskCell {
    turn: Arc<tokio::sync::Mutex<()>>,
    live: Mutex<Live>,
    seq: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Live {
    /// The task as it stands, with its own messages as history; `None` before its first turn.
    task: Option<Task>,
    /// The backend's revision of the task as it stands (`0`: not stored).
    revision: u64,
    /// The replica that wrote it last (the one running it, while it runs).
    owner: Option<String>,
    /// The `messageId` the task as it stands answers.
    answered: Option<String>,
    /// Who the task belongs to (set by its first turn, never changed).
    principal: Option<Principal>,
    /// The last event's sequence number.
    seq: u64,
    /// Recent events, oldest first, with their sequence numbers and sizes. Boxed: the log's
    /// first block holds four entries, and a held turn has logged two events.
    log: VecDeque<(u64, Box<StreamEvent>, usize)>,
    log_bytes: usize,
    /// A turn of the task runs here.
    running: Option<RunningHere>,
    /// This replica is writing the task; an entry seen meanwhile waits in `deferred`.
    writing: bool,
    deferred: Option<Versioned>,
    /// The id of this replica's last write of the task: its echo from the bucket is not news.
    own_write: Option<String>,
}

/// A turn running here: how to stop it, and when it has stopped.
#[derive(Debug, Clone)]
pub(super) struct RunningHere {
    pub(super) stop: TurnStop,
    pub(super) ended: watch::Receiver<bool>,
}

/// What a revision from elsewhere did to the cell.
#[derive(Debug)]
pub(super) enum Absorbed {
    /// Nothing: the cell holds it or a newer one, or its writer here will settle it.
    Nothing,
    /// The task stands as the revision says.
    Applied,
    /// A turn runs here, and the revision ended the task: the turn has lost and should stop.
    EndedUnderTurn(TurnStop),
}

/// Why a task cannot be subscribed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubscribeRefusal {
    /// No turn of it has begun.
    Unknown,
    /// It is finished; there is nothing more to hear.
    Terminal(TaskState),
}

impl TaskCell {
    pub(super) fn new() -> Self {
        Self {
            turn: Arc::default(),
            live: Mutex::default(),
            seq: watch::Sender::new(0),
        }
    }

    /// A cell holding a task as a backend has it.
    pub(super) fn restored(versioned: Versioned) -> Self {
        let cell = Self::new();
        {
            let mut live = cell.live();
            live.revision = versioned.revision;
            live.owner = Some(versioned.stored.owner);
            live.answered = versioned.stored.answered;
            live.principal = versioned.stored.principal;
            live.task = Some(versioned.stored.task);
        }
        cell
    }

    /// Takes the task's turn lock: one writer of the task at a time on this replica.
    pub(super) async fn lock_turn(&self) -> OwnedMutexGuard<()> {
        Arc::clone(&self.turn).lock_owned().await
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Who the task belongs to (`None`: made while authentication was off).
    pub(super) fn principal(&self) -> Option<Principal> {
        self.live().principal.clone()
    }

    /// A new task (none stands yet) belongs to `principal`; a task that stands keeps its own.
    pub(super) fn claim(&self, principal: Option<&Principal>) {
        let mut live = self.live();
        if live.task.is_none() {
            live.principal = principal.cloned();
        }
    }

    /// The task as it stands.
    pub(super) fn task(&self) -> Option<Task> {
        self.live().task.clone()
    }

    /// The task as it stands and the revision it stands at, read together.
    pub(super) fn task_at(&self) -> (Option<Task>, u64) {
        let live = self.live();
        (live.task.clone(), live.revision)
    }

    /// What `look` sees in the task as it stands, without copying it.
    pub(super) fn peek<T>(&self, look: impl FnOnce(&Task) -> T) -> Option<T> {
        self.live().task.as_ref().map(look)
    }

    /// The task's state, if a turn of it has begun.
    pub(super) fn state(&self) -> Option<TaskState> {
        self.live().task.as_ref().map(|t| t.status.state)
    }

    /// The revision the task stands at, and who wrote it.
    pub(super) fn revision(&self) -> (u64, Option<String>) {
        let live = self.live();
        (live.revision, live.owner.clone())
    }

    /// The `messageId` the task as it stands answers.
    pub(super) fn answered(&self) -> Option<String> {
        self.live().answered.clone()
    }

    /// How many subscriptions are open on the task.
    pub(super) fn subscribers(&self) -> usize {
        self.seq.receiver_count()
    }

    /// Whether a turn of the task runs here.
    pub(super) fn is_running(&self) -> bool {
        self.live().running.is_some()
    }

    /// The turn running here, if one does.
    pub(super) fn running_here(&self) -> Option<RunningHere> {
        self.live().running.clone()
    }

    /// A turn starts here, stopped by `stop`; the sender says when it has stopped.
    pub(super) fn start_running(&self, stop: TurnStop) -> watch::Sender<bool> {
        let (ended, ended_rx) = watch::channel(false);
        self.live().running = Some(RunningHere {
            stop,
            ended: ended_rx,
        });
        ended
    }

    /// The turn running here stopped (its end is stored, or it never began).
    pub(super) fn stop_running(&self) {
        self.live().running = None;
    }

    /// This replica starts writing the task.
    pub(super) fn start_writing(&self) {
        self.live().writing = true;
    }

    /// This replica writes the task as the write `write_id`.
    pub(super) fn writes(&self, write_id: &str) {
        self.live().own_write = Some(write_id.to_owned());
    }

    /// Whether memory wants the bucket's entry of this task at `revision`, written as
    /// `write_id`: it holds an older revision, and the write is not this replica's own.
    pub(super) fn wants(&self, revision: u64, write_id: &str) -> bool {
        let live = self.live();
        revision > live.revision && live.own_write.as_deref() != Some(write_id)
    }

    /// This replica's write is settled; an entry from elsewhere seen meanwhile, if any.
    pub(super) fn stop_writing(&self) -> Option<Versioned> {
        let mut live = self.live();
        live.writing = false;
        live.deferred.take()
    }

    /// A turn began: the task stands as `task` (working, its history with the new message),
    /// stored at `revision` by `owner`.
    pub(super) fn begun(&self, task: Task, revision: u64, owner: Option<String>) {
        let mut live = self.live();
        live.task = Some(task);
        live.revision = revision;
        live.owner = owner;
    }

    /// Records one event of the turn running here: applied to the task, kept in the log.
    /// Answers its sequence number.
    pub(super) fn record(&self, event: &StreamEvent) -> u64 {
        let mut live = self.live();
        if let Some(task) = live.task.take() {
            live.task = Some(apply(task, event));
        }
        let seq = live.log(event.clone());
        drop(live);
        self.seq.send_replace(seq);
        seq
    }

    /// The task is stored as `task` at `revision`, answering `answered`: it stands so, no turn
    /// runs it here any more, and then subscribers hear `events` (the end as told). The log,
    /// whose end is now in the task, is emptied unless a subscriber is still reading it.
    /// Answers the sequence number of the first event.
    pub(super) fn finish(
        &self,
        task: Task,
        revision: u64,
        owner: Option<String>,
        answered: Option<String>,
        events: &[StreamEvent],
    ) -> u64 {
        let mut live = self.live();
        live.task = Some(task);
        live.revision = live.revision.max(revision);
        live.owner = owner;
        live.answered = answered;
        live.running = None;
        let first = live.seq + 1;
        let readers = self.seq.receiver_count() > 0;
        let mut seq = live.seq;
        for event in events {
            seq = live.log(event.clone());
        }
        if !readers {
            live.clear_log();
        }
        drop(live);
        if !events.is_empty() {
            self.seq.send_replace(seq);
        }
        first
    }

    /// The task as a backend holds it, written elsewhere: the task stands so, and subscribers
    /// hear the events that take it there. A revision the cell holds already changes nothing,
    /// nor one written while this replica writes the task (its writer settles it).
    pub(super) fn absorb(&self, versioned: Versioned) -> Absorbed {
        let mut live = self.live();
        if live.principal.is_none() {
            live.principal.clone_from(&versioned.stored.principal);
        }
        if versioned.revision <= live.revision {
            return Absorbed::Nothing;
        }
        if live.own_write.as_deref() == Some(versioned.stored.write_id.as_str()) {
            // This replica's own write: memory holds it already (or its writer settles it);
            // only a revision its writer never learned (an answer lost) is news.
            if !live.writing {
                live.revision = versioned.revision;
            }
            return Absorbed::Nothing;
        }
        if live.writing {
            if live
                .deferred
                .as_ref()
                .is_none_or(|d| d.revision < versioned.revision)
            {
                live.deferred = Some(versioned);
            }
            return Absorbed::Nothing;
        }
        if let Some(turn) = &live.running {
            // Only this replica's turn writes a task it runs; a write from elsewhere that ends
            // it (a cancel that won, a lost lease) ends the turn too, which learns so when it
            // stores its end.
            if running(versioned.stored.task.status.state) {
                return Absorbed::Nothing;
            }
            return Absorbed::EndedUnderTurn(turn.stop.clone());
        }
        let events = live
            .task
            .as_ref()
            .map(|from| changes(from, &versioned.stored.task))
            .unwrap_or_default();
        live.revision = versioned.revision;
        live.owner = Some(versioned.stored.owner);
        live.answered = versioned.stored.answered;
        live.task = Some(versioned.stored.task);
        if events.is_empty() || self.seq.receiver_count() == 0 {
            return Absorbed::Applied;
        }
        let mut seq = live.seq;
        for event in events {
            seq = live.log(event);
        }
        drop(live);
        self.seq.send_replace(seq);
        Absorbed::Applied
    }

    /// The task as it stands and the sequence number of the last event it holds.
    pub(super) fn standing(&self) -> Option<(u64, Task)> {
        let live = self.live();
        live.task.clone().map(|task| (live.seq, task))
    }

    /// Approximately how many bytes the cell holds.
    pub(super) fn approx_bytes(&self) -> usize {
        let live = self.live();
        let task = live.task.as_ref().map_or(0, size::task_bytes);
        let deferred = live
            .deferred
            .as_ref()
            .map_or(0, |d| size::task_bytes(&d.stored.task));
        256 + task + live.log_bytes + deferred
    }

    /// A receiver that changes with every event the cell logs.
    pub(super) fn changes_seen(&self) -> watch::Receiver<u64> {
        self.seq.subscribe()
    }

    /// The task as it stands and a subscription to every later event.
    pub(super) fn subscribe(self: &Arc<Self>) -> Result<(Task, Subscription), SubscribeRefusal> {
        let live = self.live();
        let Some(task) = live.task.clone() else {
            return Err(SubscribeRefusal::Unknown);
        };
        if live.running.is_none() && task.status.state.is_terminal() {
            return Err(SubscribeRefusal::Terminal(task.status.state));
        }
        let subscription = Subscription {
            cell: Arc::clone(self),
            next: live.seq + 1,
            changed: self.seq.subscribe(),
            done: false,
        };
        Ok((task, subscription))
    }
}

impl Live {
    /// Keeps `event` in the log under the next sequence number, which it answers.
    fn log(&mut self, event: StreamEvent) -> u64 {
        self.seq += 1;
        let size = size::event_bytes(&event);
        self.log.push_back((self.seq, Box::new(event), size));
        self.log_bytes += size;
        while self.log_bytes > LOG_BYTES && self.log.len() > 1 {
            if let Some((_, _, dropped)) = self.log.pop_front() {
                self.log_bytes -= dropped;
            }
        }
        self.seq
    }

    fn clear_log(&mut self) {
        self.log.clear();
        self.log_bytes = 0;
    }
}

/// `task` with `event` applied (a `task` event is the stream's opening; the task as it
/// stands, with its history, stays).
pub(super) fn apply(task: Task, event: &StreamEvent) -> Task {
    if matches!(event, StreamEvent::Task(_)) {
        return task;
    }
    let mut rebuilder = TaskRebuilder::resume(task);
    // An event that does not fit (another task's, an append to nothing) changes nothing: the
    // rebuilder refuses it before touching the task.
    let _ = rebuilder.apply(event);
    rebuilder
        .into_task()
        .expect("a resumed rebuilder holds its task")
}

/// The events that take a listener from `from` to `to`: each artifact `to` holds that `from`
/// lacks or holds otherwise, whole, then `to`'s status if it changed, final when `to` is over
/// or waits for input. Nothing when nothing a listener shows changed.
pub(super) fn changes(from: &Task, to: &Task) -> Vec<StreamEvent> {
    let context_id = to.context_id.clone().unwrap_or_default();
    let mut events: Vec<StreamEvent> = to
        .artifacts
        .iter()
        .filter(|a| !from.artifacts.contains(a))
        .map(|artifact| {
            StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: to.id.clone(),
                context_id: context_id.clone(),
                artifact: artifact.clone(),
                append: false,
                last_chunk: true,
                metadata: None,
            })
        })
        .collect();
    if from.status != to.status {
        events.push(StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: to.id.clone(),
            context_id,
            status: to.status.clone(),
            r#final: !running(to.status.state),
            metadata: to.metadata.clone(),
        }));
    }
    events
}

/// Whether `event` ends a stream.
pub(super) fn is_final(event: &StreamEvent) -> bool {
    matches!(event, StreamEvent::StatusUpdate(u) if u.r#final)
}

/// A subscriber's view of one task: every event after the task it was handed, in order.
#[derive(Debug)]
pub(super) struct Subscription {
    cell: Arc<TaskCell>,
    next: u64,
    changed: watch::Receiver<u64>,
    done: bool,
}

impl Subscription {
    /// The next event; `None` once the task has ended or waits for input again (after its
    /// final status update).
    pub(super) async fn next(&mut self) -> Option<StreamEvent> {
        loop {
            if self.done {
                return None;
            }
            if let Some(event) = self.take() {
                return Some(event);
            }
            if self.changed.changed().await.is_err() {
                return None;
            }
        }
    }

    /// The next event if there is one now.
    fn take(&mut self) -> Option<StreamEvent> {
        let live = self.cell.live();
        let front = live.log.front().map_or(u64::MAX, |(seq, ..)| *seq);
        let at = self
            .next
            .checked_sub(front)
            .and_then(|i| usize::try_from(i).ok());
        if let Some((_, event, _)) = at.and_then(|i| live.log.get(i)) {
            self.next += 1;
            if is_final(event) {
                self.done = true;
            }
            return Some(StreamEvent::clone(event));
        }
        if self.next > live.seq {
            return None;
        }
        // Fell behind the log (or a finished turn emptied it): the task as it stands, which
        // ends the stream when nothing runs it any more.
        self.next = live.seq + 1;
        let task = live.task.clone()?;
        if live.running.is_none() && !running(task.status.state) {
            self.done = true;
        }
        Some(StreamEvent::Task(task))
    }
}

#[cfg(test)]
mod tests;
