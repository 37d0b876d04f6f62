//! [`TaskTurn`]: the one way task state is written. A turn of one task holds the task's lock
//! on this replica, and through it every write of the task:
//!
//! - [`TaskTurn::begin`]: the task is stored `working` by this replica (compare-and-set on
//!   the revision it read), and only then does anyone learn of the turn; the [`TurnLog`] it
//!   answers is where the turn's events go (the task's log, other replicas' followers);
//! - [`TaskTurn::end`], for every way a task ends (completed, failed, canceled,
//!   input-required, rejected, refused at shutdown, failed by a restart or a lost replica):
//!   stored first, then the task stands so here, is counted as changed, and only then are its
//!   closing events told — to this replica's subscribers and to other replicas' followers.
//!   When another writer stored an end first (a cancel that won, a lost lease), that end
//!   wins: the turn learns it and answers from it.
//!
//! Every write expects the revision of the task as the writer last read it through
//! [`TaskTurn::task`], not the one memory holds when the write goes out: the watch may bring
//! another replica's write in between, and a decision taken on what was read (this task waits
//! for input, this task still runs) must not land over a revision it never saw.
//!
//! A turn dropped after it began without ending (its worker panicked) is ended `failed` by a
//! task of its own, so no task is left `working` by a turn that is gone. A task too large for
//! the backend is refused when it begins and failed, saying so, when its end would not fit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use daedalus_contract::{StreamEvent, Task, TaskStatusUpdateEvent};
use tokio::sync::{OwnedMutexGuard, watch};

use super::TaskStore;
use super::backend::{self, BeganLater, TurnStep, Versioned, WriteError};
use super::replicas::Relay;
use super::stop::TurnStop;
use super::task_cell::{TaskCell, changes};
use crate::platform::identity::Principal;
use crate::stores::turn_writes::Pending;

/// How long an end keeps trying a backend that cannot be reached before it settles for
/// memory (this replica stores it later, once the backend answers).
pub const END_STORE_DEADLINE: Duration = Duration::from_secs(10);

/// The message of a task whose turn stopped without ending (its worker failed).
pub const TURN_STOPPED: &str = "the turn running this task stopped before it finished";

/// Why a turn could not begin.
#[derive(Debug, thiserror::Error)]
pub enum BeginError {
    /// Another replica wrote the task since this one read it (it began a turn of it, or ended
    /// it): this turn did not begin, and nothing was written.
    #[error("task {0} changed on another replica as this turn began")]
    Moved(String),
    /// The task, with the new message, is larger than the backend stores.
    #[error(
        "task {task_id} is {bytes} bytes with this message; the task store takes at most {limit}"
    )]
    TooLarge {
        task_id: String,
        bytes: usize,
        limit: usize,
    },
    /// The backend could not store the turn's beginning.
    #[error("the task store could not record the task")]
    Unavailable(#[source] backend::BackendError),
}

/// How a task ended.
#[derive(Debug)]
pub struct Ended {
    /// The task as stored: the end given, or the one that won.
    pub task: Task,
    /// What a listener of the turn hears now: the closing events given, or those that take it
    /// to the end that won.
    pub events: Vec<StreamEvent>,
    /// Whether the end given is the one stored.
    pub won: bool,
}

/// Where a running turn's events go: the task's log (this replica's subscribers) and other
/// replicas' followers. Its end does not go here: [`TaskTurn::end`] tells it once stored.
#[derive(Debug, Clone)]
pub struct TurnLog {
    task_id: String,
    cell: Arc<TaskCell>,
    relay: Option<Relay>,
}

impl TurnLog {
    /// Records one event of the turn (not its final status update).
    pub fn record(&self, event: &StreamEvent) {
        debug_assert!(
            !super::task_cell::is_final(event),
            "a turn's end goes through end()"
        );
        let seq = self.cell.record(event);
        if let Some(relay) = &self.relay {
            relay.publish(&self.task_id, seq, event);
        }
    }
}

/// The write handle of one task on this replica (see the module).
#[derive(Debug)]
pub struct TaskTurn {
    store: TaskStore,
    task_id: String,
    cell: Arc<TaskCell>,
    /// The revision of the task as this handle last read it (at opening, then at each
    /// [`TaskTurn::task`], and as its own begin stored it): what its next write expects.
    seen: AtomicU64,
    /// Says when a turn that began here has stopped; `None` before `begin`.
    running: Option<watch::Sender<bool>>,
    /// The `messageId` the end answers, when it answers one.
    answers: Option<String>,
    /// The turn's record, kept with its begin ([`TaskTurn::keeps_record`]).
    record: Option<String>,
    /// The begin kept a record: the end drops it.
    holds_record: bool,
    /// The turn is answered only when it ends: its begin may wait for the end's commit.
    begins_with_its_end: bool,
    /// The begin, queued to be committed with the end, and the task it stored (behind a lock
    /// only so that the handle may be shared: its end takes it).
    later: std::sync::Mutex<Option<LaterBegin>>,
    ended: bool,
    _lock: OwnedMutexGuard<()>,
}

impl TaskTurn {
    pub(super) fn new(
        store: TaskStore,
        task_id: &str,
        cell: Arc<TaskCell>,
        lock: OwnedMutexGuard<()>,
    ) -> Self {
        let seen = AtomicU64::new(cell.revision().0);
        Self {
            store,
            task_id: task_id.to_owned(),
            cell,
            seen,
            running: None,
            answers: None,
            record: None,
            holds_record: false,
            begins_with_its_end: false,
            later: std::sync::Mutex::new(None),
            ended: false,
            _lock: lock,
        }
    }

    /// The task as it stands (`None`: a new task). Its revision is the one this handle's next
    /// write expects.
    pub fn task(&self) -> Option<Task> {
        let (task, revision) = self.cell.task_at();
        self.seen.store(revision, Ordering::SeqCst);
        task
    }

    /// The revision of the task as this handle last read it (`0`: never stored).
    pub fn revision(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }

    /// The replica that wrote the task last.
    pub fn owner(&self) -> Option<String> {
        self.cell.revision().1
    }

    /// The `messageId` the task as it stands answers.
    pub fn answered(&self) -> Option<String> {
        self.cell.answered()
    }

    /// Who the task belongs to.
    pub fn principal(&self) -> Option<Principal> {
        self.cell.principal()
    }

    /// A new task will belong to `principal` (a task that stands keeps its own).
    pub fn claim(&mut self, principal: Option<&Principal>) {
        self.cell.claim(principal);
    }

    /// The end will answer `message_id` (a redelivery of it is answered from the store).
    pub fn answers(&mut self, message_id: &str) {
        self.answers = Some(message_id.to_owned());
    }

    /// The turn's begin keeps `record` as its turn's record (durable turns), in the same step
    /// as the task where the backend can; its end drops it the same way.
    pub fn keeps_record(&mut self, record: String) {
        self.record = Some(record);
    }

    /// Nothing of the turn leaves the runtime before its end (its caller waits for the
    /// answer; nobody is told of its states): its begin may be committed with its end, in one
    /// commit, where the backend can (a store no other process writes). Anything that commits
    /// before the end (a checkpoint, before a tool call) commits the begin first.
    pub fn begins_with_its_end(&mut self) {
        self.begins_with_its_end = true;
    }

    /// The turn begins: `task` (working, its history with the new message) is stored by this
    /// replica, and the turn runs here, stopped by `stop` when canceled. Answers where its
    /// events go.
    pub async fn begin(&mut self, task: Task, stop: TurnStop) -> Result<TurnLog, BeginError> {
        self.running = Some(self.cell.start_running(stop));
        let expected = self.revision();
        self.cell.start_writing();
        let answered = self.cell.answered();
        let record = self.record.take();
        if self.begins_with_its_end
            && let Some(later) = self.store.begin_later(
                &self.cell,
                &task,
                answered.as_deref(),
                expected,
                record.as_deref(),
            )
        {
            self.holds_record = record.is_some();
            *self
                .later
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(LaterBegin(later));
            return Ok(self.begun(task, expected + 1));
        }
        let with_record = record
            .as_deref()
            .map_or(TurnStep::Untouched, TurnStep::Keep);
        let written = self
            .store
            .write(
                &self.cell,
                &task,
                answered.as_deref(),
                expected,
                with_record,
            )
            .await;
        self.holds_record = record.is_some() && written.is_ok();
        let revision = match written {
            Ok(revision) => revision,
            Err(e) => {
                self.cell.stop_running();
                let deferred = self.cell.stop_writing();
                self.not_running();
                if let Some(deferred) = deferred {
                    self.store.absorb(deferred);
                }
                return Err(match e {
                    WriteError::Conflict => {
                        self.store.refresh(&self.task_id).await;
                        BeginError::Moved(self.task_id.clone())
                    }
                    WriteError::TooLarge { bytes, limit } => BeginError::TooLarge {
                        task_id: self.task_id.clone(),
                        bytes,
                        limit,
                    },
                    WriteError::Unavailable(e) => BeginError::Unavailable(e),
                });
            }
        };
        Ok(self.begun(task, revision))
    }

    /// The begin stands at `revision` here: where the turn's events go.
    fn begun(&mut self, task: Task, revision: u64) -> TurnLog {
        let owner = self.store.replica().map(str::to_owned);
        self.cell.begun(task, revision, owner);
        self.seen.store(revision, Ordering::SeqCst);
        if let Some(deferred) = self.cell.stop_writing() {
            self.store.absorb(deferred);
        }
        self.store.touch(&self.task_id);
        TurnLog {
            task_id: self.task_id.clone(),
            cell: Arc::clone(&self.cell),
            relay: self.store.relay().cloned(),
        }
    }

    /// The task ends as `task` (its history included), told by `closing` (the turn's last
    /// artifact updates and its final status update): stored, then standing so here, then
    /// told. If another end was stored first, that one stands and is told instead.
    pub async fn end(mut self, task: Task, closing: Vec<StreamEvent>) -> Ended {
        self.ended = true;
        let answered = self.answers.take().or_else(|| self.cell.answered());
        let owner = self.store.replica().map(str::to_owned);
        let began_here = self.running.is_some();
        self.cell.start_writing();
        // A begin waiting for the end is committed with it (the end's write is queued after
        // it, and holds it when it was left out).
        let mut later = self
            .later
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let (task, closing, outcome) = self
            .store_end_that_fits(task, closing, answered.as_deref(), &mut later)
            .await;
        let ended = match outcome {
            EndStored::At(revision) => {
                let first = self
                    .cell
                    .finish(task.clone(), revision, owner, answered, &closing);
                // Other replicas hear an end only once the store holds it: one kept here
                // alone (the store did not answer) reaches them when this replica stores it.
                if began_here
                    && revision > 0
                    && let Some(relay) = self.store.relay()
                {
                    for (i, event) in (first..).zip(&closing) {
                        relay.publish(&self.task_id, i, event);
                    }
                }
                Ended {
                    task,
                    events: closing,
                    won: true,
                }
            }
            EndStored::TooLarge { .. } => {
                tracing::error!(
                    task_id = self.task_id,
                    "not even the task's failure fits the task store; it stands in memory only"
                );
                self.cell.finish(task.clone(), 0, owner, answered, &closing);
                Ended {
                    task,
                    events: closing,
                    won: true,
                }
            }
            EndStored::Lost(winner) => self.yield_to(&task, winner).await,
        };
        if let Some(deferred) = self.cell.stop_writing() {
            self.store.absorb(deferred);
        }
        self.store.touch(&self.task_id);
        ended
    }

    /// Stores `task`'s end (see [`TaskTurn::store_end`]); an end larger than the backend takes
    /// is replaced by the task failing, saying so, in a form that fits (what it held when its
    /// turn began, without the answer). Answers the end that was tried last, its closing
    /// events, and how storing it went.
    async fn store_end_that_fits(
        &self,
        task: Task,
        closing: Vec<StreamEvent>,
        answered: Option<&str>,
        later: &mut Option<LaterBegin>,
    ) -> (Task, Vec<StreamEvent>, EndStored) {
        let outcome = self.store_end(&task, answered, later).await;
        let EndStored::TooLarge { bytes, limit } = outcome else {
            return (task, closing, outcome);
        };
        let why = format!(
            "the task's answer makes it {bytes} bytes, more than the task store takes ({limit}); nothing larger than that can be kept"
        );
        let mut failed = backend::failed_now(&self.cell.task().unwrap_or(task), &why);
        failed.artifacts.clear();
        let outcome = self.store_end(&failed, answered, later).await;
        let closing = vec![final_update(&failed)];
        (failed, closing, outcome)
    }

    /// Another writer stored the task's end first (`winner`, over this turn's `task`): it
    /// stands. The turn is over all the same; the events are what changes from the task as
    /// this replica held it to the winner.
    async fn yield_to(&mut self, task: &Task, winner: Versioned) -> Ended {
        if self.holds_record {
            self.store.keep_turn(&self.task_id, None).await;
        }
        let from = self.cell.task().unwrap_or_else(|| task.clone());
        let events = changes(&from, &winner.stored.task);
        tracing::info!(
            task_id = self.task_id,
            state = %winner.stored.task.status.state,
            writer = winner.stored.owner,
            "another end of the task was stored first; it stands"
        );
        self.cell.finish(
            winner.stored.task.clone(),
            winner.revision,
            Some(winner.stored.owner),
            winner.stored.answered,
            &events,
        );
        Ended {
            task: winner.stored.task,
            events,
            won: false,
        }
    }

    /// Stores the end: at the revision the task stands at, retrying a backend that cannot be
    /// reached until [`END_STORE_DEADLINE`]; a conflict reads the end that won. The begin that
    /// waited for it (`later`) is committed with it, or before; the end is told once stored.
    async fn store_end(
        &self,
        task: &Task,
        answered: Option<&str>,
        later: &mut Option<LaterBegin>,
    ) -> EndStored {
        let stored = self.try_store_end(task, answered).await;
        if let Some(began) = later.take() {
            match began.0.await {
                Ok(BeganLater::Written(_) | BeganLater::LeftOut) => {}
                Err(e) => tracing::warn!(
                    task_id = self.task_id,
                    error = %e,
                    "the turn's begin was not stored with its end; its end holds it"
                ),
            }
        }
        if let Some(revision) = stored.told {
            self.store.told_stored(task, revision);
        }
        stored.outcome
    }

    /// [`TaskTurn::store_end`]'s write, and the revision to tell when it was stored.
    async fn try_store_end(&self, task: &Task, answered: Option<&str>) -> TriedEnd {
        let told = |outcome: EndStored| TriedEnd {
            told: None,
            outcome,
        };
        let deadline = tokio::time::Instant::now() + END_STORE_DEADLINE;
        let mut pause = Duration::from_millis(50);
        let mut expected = self.revision();
        let step = if self.holds_record {
            TurnStep::Drop
        } else {
            TurnStep::Untouched
        };
        loop {
            let attempt = tokio::time::timeout_at(
                deadline,
                self.store
                    .write_untold(&self.cell, task, answered, expected, step),
            );
            let Ok(written) = attempt.await else {
                return told(self.unsaved("no answer from the task store in time"));
            };
            let why = match written {
                Ok(revision) => {
                    return TriedEnd {
                        told: Some(revision),
                        outcome: EndStored::At(revision),
                    };
                }
                Err(WriteError::TooLarge { bytes, limit }) => {
                    return told(EndStored::TooLarge { bytes, limit });
                }
                Err(WriteError::Conflict) => match self.store.load(&self.task_id).await {
                    Ok(Some(winner)) => return told(EndStored::Lost(winner)),
                    // Gone from the backend (past its TTL): this end is the only one there is.
                    Ok(None) => {
                        expected = 0;
                        "the task's entry was gone".to_owned()
                    }
                    Err(e) => e.to_string(),
                },
                Err(WriteError::Unavailable(e)) => e.to_string(),
            };
            if tokio::time::Instant::now() + pause > deadline {
                return told(self.unsaved(&why));
            }
            tracing::warn!(
                task_id = self.task_id,
                error = why,
                "storing the task's end; retrying"
            );
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// The end could not be stored in time: it stands in memory, and this replica stores it
    /// once the backend is back (the task is still its, running, in the store).
    fn unsaved(&self, why: &str) -> EndStored {
        tracing::error!(
            task_id = self.task_id,
            error = why,
            "the task's end could not be stored yet; it is kept here and stored once the task store answers"
        );
        EndStored::At(0)
    }

    /// Tells whoever waits for this turn that it has stopped.
    fn not_running(&mut self) {
        if let Some(ended) = self.running.take() {
            let _ = ended.send(true);
        }
    }
}

/// A begin queued to be committed with the end: what became of it, once committed. Nobody
/// is told of it (a begin is queued for later only when no observer watches the task).
struct LaterBegin(Pending<Result<BeganLater, WriteError>>);

impl std::fmt::Debug for LaterBegin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LaterBegin")
    }
}

/// An end's write, and the revision to tell observers of (`None`: not stored).
struct TriedEnd {
    told: Option<u64>,
    outcome: EndStored,
}

/// What storing an end found.
#[expect(
    clippy::large_enum_variant,
    reason = "made once per request and taken apart at once; a box would only add an allocation"
)]
enum EndStored {
    /// Stored at this revision (`0`: kept in memory only).
    At(u64),
    /// Another end was stored first.
    Lost(Versioned),
    /// This end is larger than the backend stores.
    TooLarge { bytes: usize, limit: usize },
}

impl TaskTurn {
    /// The turn stops here without ending its task (shutdown hands it off): the task stays
    /// running in the store as this replica wrote it last, for the record of its turn to be
    /// resumed, by a peer once this replica's lease goes or by this replica after a restart.
    pub fn hand_off(mut self) {
        self.ended = true;
        // Noted before the cell stops running, so no sweep finds it running nowhere.
        self.store.handed_off(&self.task_id);
        self.cell.stop_running();
    }
}

impl Drop for TaskTurn {
    fn drop(&mut self) {
        if self.running.is_none() {
            return;
        }
        if !self.ended {
            // The turn began and never ended: its worker is gone. End it for it, once this
            // handle has let go of the task's lock.
            self.cell.stop_running();
            tracing::error!(
                task_id = self.task_id,
                "a turn stopped without ending its task"
            );
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let (store, task_id) = (self.store.clone(), self.task_id.clone());
                runtime.spawn(async move { store.fail_task(&task_id, TURN_STOPPED, None).await });
            }
        }
        self.not_running();
    }
}

/// The final status update that tells `task`'s end.
pub fn final_update(task: &Task) -> StreamEvent {
    StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
        task_id: task.id.clone(),
        context_id: task.context_id.clone().unwrap_or_default(),
        status: task.status.clone(),
        r#final: true,
        metadata: task.metadata.clone(),
    })
}
