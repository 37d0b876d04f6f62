//! One task in the store: the lock its turns take one at a time, what replay needs, and its
//! live side — the task as it stands and its event log — which anyone may read while a turn
//! runs.
//!
//! Every event of a turn gets the next sequence number and is applied to the task as it stands
//! (the rules of [`TaskRebuilder`]), then kept in the log. A subscriber takes the task as it
//! stands and its sequence number under one lock, then reads every later event from the log,
//! so nothing falls between the two. The log holds at most [`LOG_BYTES`]: a subscriber that
//! falls further behind gets the task as it stands again (nothing it shows is lost, only the
//! steps in between). A finished turn's log is emptied, its end being in the task, unless a
//! subscriber is still reading it.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use daedalus_contract::{StreamEvent, Task, TaskRebuilder, TaskState, TaskStatusUpdateEvent};
use tokio::sync::watch;

use super::size;

/// Bytes of events a task's log keeps for subscribers that fall behind.
pub const LOG_BYTES: usize = 1 << 20;

/// What replay and continuation need, held under the task's turn lock.
#[derive(Debug, Default)]
pub struct TaskRecord {
    /// The task's context, fixed by its first message.
    pub context_id: Option<String>,
    /// The `messageId` the task as it stands answers (the contract binding's replay of a
    /// redelivered message).
    pub answered: Option<String>,
}

/// One task: its turn lock and its live side.
#[derive(Debug)]
pub struct TaskCell {
    turn: tokio::sync::Mutex<TaskRecord>,
    live: Mutex<Live>,
    seq: watch::Sender<u64>,
    /// The final event of a turn, held back from other replicas until the store has the end.
    deferred_end: Mutex<Option<(u64, StreamEvent)>>,
}

#[derive(Debug, Default)]
struct Live {
    /// The task as it stands, with its own messages as history; `None` before its first turn.
    task: Option<Task>,
    /// The last event's sequence number.
    seq: u64,
    /// Recent events, oldest first, with their sequence numbers and sizes.
    log: VecDeque<(u64, StreamEvent, usize)>,
    log_bytes: usize,
    /// A turn of the task is running.
    running: bool,
}

impl Default for TaskCell {
    fn default() -> Self {
        Self {
            turn: tokio::sync::Mutex::default(),
            live: Mutex::default(),
            seq: watch::Sender::new(0),
            deferred_end: Mutex::default(),
        }
    }
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
    /// A cell holding `task` as it stands (a task read back from a backend).
    pub fn restored(task: Task) -> Self {
        let cell = Self::default();
        cell.live().task = Some(task);
        cell
    }

    /// Takes the task's turn lock: one turn of a task at a time.
    pub async fn lock_turn(&self) -> tokio::sync::MutexGuard<'_, TaskRecord> {
        self.turn.lock().await
    }

    fn live(&self) -> MutexGuard<'_, Live> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The task as it stands.
    pub fn task(&self) -> Option<Task> {
        self.live().task.clone()
    }

    /// What `look` sees in the task as it stands, without copying it.
    pub fn peek<T>(&self, look: impl FnOnce(&Task) -> T) -> Option<T> {
        self.live().task.as_ref().map(look)
    }

    /// The task's state, if a turn of it has begun.
    pub fn state(&self) -> Option<TaskState> {
        self.live().task.as_ref().map(|t| t.status.state)
    }

    /// How many subscriptions are open on the task.
    pub fn subscribers(&self) -> usize {
        self.seq.receiver_count()
    }

    /// Whether a turn of the task is running.
    pub fn is_running(&self) -> bool {
        self.live().running
    }

    /// A turn begins: the task now stands as `task` (working, its history with the new
    /// message).
    pub fn begin(&self, task: Task) {
        let mut live = self.live();
        live.task = Some(task);
        live.running = true;
    }

    /// Records one event of the running turn: applied to the task, kept in the log. Answers
    /// its sequence number.
    pub fn record(&self, event: &StreamEvent) -> u64 {
        let mut live = self.live();
        if let Some(task) = live.task.take() {
            live.task = Some(apply(task, event));
        }
        live.seq += 1;
        let seq = live.seq;
        let size = size::event_bytes(event);
        live.log.push_back((seq, event.clone(), size));
        live.log_bytes += size;
        while live.log_bytes > LOG_BYTES && live.log.len() > 1 {
            if let Some((_, _, dropped)) = live.log.pop_front() {
                live.log_bytes -= dropped;
            }
        }
        drop(live);
        self.seq.send_replace(seq);
        seq
    }

    /// Holds back the turn's final event (number `seq`) until [`TaskCell::take_end`].
    pub fn defer_end(&self, seq: u64, event: StreamEvent) {
        *self
            .deferred_end
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((seq, event));
    }

    /// The final event held back, if any.
    pub fn take_end(&self) -> Option<(u64, StreamEvent)> {
        self.deferred_end
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// The task as it stands and the sequence number of the last event it holds.
    pub fn standing(&self) -> Option<(u64, Task)> {
        let live = self.live();
        live.task.clone().map(|task| (live.seq, task))
    }

    /// The task as another replica or a backend has it now, unless a turn of it runs here.
    pub fn refresh(&self, task: Task) {
        let mut live = self.live();
        if live.running {
            return;
        }
        live.task = Some(task);
        live.seq += 1;
        let seq = live.seq;
        drop(live);
        self.seq.send_replace(seq);
    }

    /// The turn ended with `task` (its history included): the task stands so. The log, whose
    /// end is now in the task, is emptied unless a subscriber is still reading it.
    pub fn finish(&self, task: Task) {
        let mut live = self.live();
        live.task = Some(task);
        live.running = false;
        if self.seq.receiver_count() == 0 {
            live.log.clear();
            live.log_bytes = 0;
        }
        live.seq += 1;
        let seq = live.seq;
        drop(live);
        self.seq.send_replace(seq);
    }

    /// A task that was not running ends as `task` (a cancel of a task waiting for input):
    /// subscribers hear its final status.
    pub fn end_idle(&self, task: Task) -> (u64, StreamEvent) {
        let update = StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: task.id.clone(),
            context_id: task.context_id.clone().unwrap_or_default(),
            status: task.status.clone(),
            r#final: true,
            metadata: task.metadata.clone(),
        });
        let seq = self.record(&update);
        self.finish(task);
        (seq, update)
    }

    /// Approximately how many bytes the cell holds.
    pub fn approx_bytes(&self) -> usize {
        let live = self.live();
        let task = live.task.as_ref().map_or(0, size::task_bytes);
        256 + task + live.log_bytes
    }

    /// The task as it stands and a subscription to every later event.
    pub fn subscribe(
        self: &std::sync::Arc<Self>,
    ) -> Result<(Task, Subscription), SubscribeRefusal> {
        let live = self.live();
        let Some(task) = live.task.clone() else {
            return Err(SubscribeRefusal::Unknown);
        };
        if !live.running && task.status.state.is_terminal() {
            return Err(SubscribeRefusal::Terminal(task.status.state));
        }
        let subscription = Subscription {
            cell: std::sync::Arc::clone(self),
            next: live.seq + 1,
            changed: self.seq.subscribe(),
            done: false,
        };
        Ok((task, subscription))
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

/// A subscriber's view of one task: every event after the task it was handed, in order.
#[derive(Debug)]
pub struct Subscription {
    cell: std::sync::Arc<TaskCell>,
    next: u64,
    changed: watch::Receiver<u64>,
    done: bool,
}

impl Subscription {
    /// The next event; `None` once the turn has ended (after its final status update) or the
    /// task is finished.
    pub async fn next(&mut self) -> Option<StreamEvent> {
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
            if matches!(event, StreamEvent::StatusUpdate(u) if u.r#final) {
                self.done = true;
            }
            return Some(event.clone());
        }
        if self.next > live.seq {
            return None;
        }
        // Fell behind the log (or the turn finished and emptied it): the task as it stands.
        self.next = live.seq + 1;
        let task = live.task.clone()?;
        if !live.running {
            self.done = true;
        }
        Some(StreamEvent::Task(task))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use daedalus_contract::{Artifact, Part, TaskStatus};

    use super::*;

    fn task(state: TaskState) -> Task {
        Task {
            id: "t".into(),
            context_id: Some("c".into()),
            status: TaskStatus::new(state),
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        }
    }

    fn status(state: TaskState, last: bool) -> StreamEvent {
        StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus::new(state),
            r#final: last,
            metadata: None,
        })
    }

    fn chunk(text: &str, append: bool) -> StreamEvent {
        StreamEvent::ArtifactUpdate(daedalus_contract::TaskArtifactUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Artifact {
                artifact_id: "a".into(),
                name: None,
                description: None,
                parts: vec![Part::text(text)],
                extensions: None,
                metadata: None,
            },
            append,
            last_chunk: false,
            metadata: None,
        })
    }

    #[tokio::test]
    async fn a_late_subscriber_gets_the_task_as_it_stands_then_every_later_event() {
        let cell = Arc::new(TaskCell::default());
        cell.begin(task(TaskState::Working));
        cell.record(&chunk("hel", false));
        let (now, mut sub) = cell.subscribe().expect("running");
        assert_eq!(now.artifacts[0].parts[0].as_text(), Some("hel"));
        cell.record(&chunk("lo", true));
        cell.record(&status(TaskState::Completed, true));
        assert_eq!(sub.next().await, Some(chunk("lo", true)));
        assert_eq!(sub.next().await, Some(status(TaskState::Completed, true)));
        assert_eq!(
            sub.next().await,
            None,
            "the stream ends at the final update"
        );
        let standing = cell.task().expect("task");
        assert_eq!(standing.artifacts[0].parts[0].as_text(), Some("hello"));
        assert_eq!(standing.status.state, TaskState::Completed);
    }

    #[tokio::test]
    async fn a_subscriber_behind_the_log_gets_the_task_again_and_the_end() {
        let cell = Arc::new(TaskCell::default());
        cell.begin(task(TaskState::Working));
        let (_, mut sub) = cell.subscribe().expect("running");
        let big = "x".repeat(LOG_BYTES / 2);
        cell.record(&chunk(&big, false));
        cell.record(&chunk(&big, true));
        cell.record(&chunk(&big, true));
        // The first chunk left the log: the subscriber is handed the task as it stands.
        let Some(StreamEvent::Task(resync)) = sub.next().await else {
            panic!("a task to catch up");
        };
        assert_eq!(
            resync.artifacts[0].parts[0].as_text().map(str::len),
            Some(3 * big.len())
        );
        cell.record(&status(TaskState::Completed, true));
        assert_eq!(sub.next().await, Some(status(TaskState::Completed, true)));
        assert_eq!(sub.next().await, None);
    }

    #[tokio::test]
    async fn a_finished_task_refuses_subscribers_and_wakes_those_waiting() {
        let cell = Arc::new(TaskCell::default());
        assert_eq!(cell.subscribe().err(), Some(SubscribeRefusal::Unknown));
        cell.begin(task(TaskState::Working));
        cell.finish(task(TaskState::InputRequired));
        // Waiting for input: a subscriber waits for the next turn, and a cancel ends it.
        let (_, mut sub) = cell.subscribe().expect("waiting for input");
        let waiter = tokio::spawn(async move { sub.next().await });
        cell.end_idle(task(TaskState::Canceled));
        let heard = waiter.await.expect("joined");
        assert!(
            matches!(&heard, Some(StreamEvent::StatusUpdate(u)) if u.status.state == TaskState::Canceled)
                || matches!(&heard, Some(StreamEvent::Task(t)) if t.status.state == TaskState::Canceled),
            "{heard:?}"
        );
        assert_eq!(
            cell.subscribe().err(),
            Some(SubscribeRefusal::Terminal(TaskState::Canceled))
        );
    }
}
