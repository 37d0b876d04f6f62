//! A turn's live events: the one translator from the agent loop's events to the A2A stream
//! events every face serializes (SSE, MCP progress, the A2A bindings' streams), and the
//! byte-bounded queue they wait in for their listener.
//!
//! What a stream says, in order:
//!
//! - the `task` as it stands (`submitted`), then a `statusUpdate` `working`;
//! - the model's text as it arrives, as chunks of one artifact (the **answer artifact**, its
//!   id fixed by its first chunk): the first chunk with `append: false`, the rest with
//!   `append: true`. Text the model writes in a step that ends in tool calls is streamed too,
//!   and the next step's first chunk replaces it (`append: false`): the answer artifact holds
//!   the model's last step, as the finished Task does. A provider retry after a partial
//!   answer starts over the same way, so no listener shows the same text twice;
//! - artifacts the agent streams itself (files, data, chunked output), as it sends them: a
//!   chunk with `append: true` adds to the artifact it names (the first chunk of one goes out
//!   with `append: false`), `lastChunk: true` closes it;
//! - each step as a `statusUpdate` `working` whose message says what happens, in the words
//!   MCP progress uses: `"{agent} step N (llm)"`, `"{agent} step N (tool)"`,
//!   `"{server}/{tool}: started|completed|failed"`;
//! - at the end the artifacts as the finished Task holds them (the answer artifact closed with
//!   `lastChunk: true`, or sent whole if what was streamed differs), then a `statusUpdate` with
//!   the final status and `final: true`, carrying the Task's `metadata`.
//!
//! The Task the turn returns agrees with its stream: its answer artifact has the streamed id,
//! and text streamed before a turn that ends without artifacts (failed, input-required) stays
//! in the Task as the artifact it was. A listener that falls behind by more than
//! [`QUEUE_BYTES`] misses chunks and steps, never the end: the artifacts then go out whole.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use daedalus_contract::{
    Artifact, Message, Part, RETRY_ELSEWHERE, Role, StreamEvent, Task, TaskArtifactUpdateEvent,
    TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use tokio::sync::mpsc;

use crate::agents::agent_loop::LoopEvent;
use crate::stores::tasks::TurnLog;
use crate::stores::tasks::size::event_bytes;

/// Bytes of events that may wait for a listener before chunks and steps are dropped.
pub const QUEUE_BYTES: usize = 1 << 20;

/// One queued event, boxed: a channel allocates its slots in blocks of 32, so a slot the
/// size of a pointer keeps a held turn's empty queue at half a KiB instead of eleven.
type Queued = (Box<StreamEvent>, usize);

/// The sending side of a task's event queue, and the task's log in the store, if it has one.
#[derive(Debug, Clone)]
pub(crate) struct EventSender {
    tx: mpsc::UnboundedSender<Queued>,
    queued: Arc<AtomicUsize>,
    /// Where a task's events are kept and told beyond the face that started the turn.
    log: Option<TurnLog>,
}

/// A task's live events, in order; `None` once the stream is over.
#[derive(Debug)]
pub struct EventReceiver {
    rx: mpsc::UnboundedReceiver<Queued>,
    queued: Arc<AtomicUsize>,
}

/// A new event queue.
pub(crate) fn queue() -> (EventSender, EventReceiver) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued = Arc::new(AtomicUsize::new(0));
    (
        EventSender {
            tx,
            queued: Arc::clone(&queued),
            log: None,
        },
        EventReceiver { rx, queued },
    )
}

impl EventSender {
    /// Every event (but the turn's end, which the store tells once stored) also goes to the
    /// task's `log`: what subscribers read, here and on other replicas.
    pub(crate) fn with_log(mut self, log: TurnLog) -> Self {
        self.log = Some(log);
        self
    }

    /// Whether anyone still listens (the task's log always does).
    pub(crate) fn is_listening(&self) -> bool {
        self.log.is_some() || !self.tx.is_closed()
    }

    /// Logs `event`, and queues it unless the queue is over [`QUEUE_BYTES`] and `droppable`;
    /// `false` when the queue dropped it (or nobody listens).
    fn send(&self, event: StreamEvent, droppable: bool) -> bool {
        if let Some(log) = &self.log {
            log.record(&event);
        }
        self.queue(event, droppable)
    }

    /// Queues `event` for the face alone (the store told the task's log already).
    fn queue(&self, event: StreamEvent, droppable: bool) -> bool {
        if self.tx.is_closed() {
            return self.log.is_some();
        }
        let size = event_bytes(&event);
        if droppable && self.queued.load(Ordering::Relaxed) + size > QUEUE_BYTES {
            return false;
        }
        self.queued.fetch_add(size, Ordering::Relaxed);
        if self.tx.send((Box::new(event), size)).is_err() {
            self.queued.fetch_sub(size, Ordering::Relaxed);
            return false;
        }
        true
    }
}

impl EventSender {
    /// Hands the face the end of its turn, as told: for a task, after the store stored it
    /// and told its log; else as the turn closed.
    pub(crate) fn deliver(&self, end: Vec<StreamEvent>) {
        for event in end {
            self.queue(event, false);
        }
    }
}

impl EventReceiver {
    /// The next event; `None` when the stream is over.
    pub async fn recv(&mut self) -> Option<StreamEvent> {
        let (event, size) = self.rx.recv().await?;
        self.queued.fetch_sub(size, Ordering::Relaxed);
        Some(*event)
    }
}

/// The answer artifact as streamed so far.
#[derive(Debug)]
struct Answer {
    artifact_id: String,
    text: String,
}

/// An artifact the agent streamed itself, as streamed so far.
#[derive(Debug)]
struct OwnArtifact {
    artifact: Artifact,
    /// Its last chunk went out.
    closed: bool,
    /// A chunk of it was dropped: it goes out whole at the end.
    dropped: bool,
}

/// Turns one task's loop events into its stream, and closes it with its finished Task.
#[derive(Debug)]
pub(crate) struct Translator {
    task_id: String,
    context_id: String,
    out: EventSender,
    answer: Option<Answer>,
    /// Artifacts the agent streamed itself, in the order they began.
    own: Vec<OwnArtifact>,
    /// The ids of the artifacts streamed, in the order a listener first saw them.
    seen: Vec<String>,
    /// The next chunk starts the answer artifact over (a new step, or a provider retry).
    start_over: bool,
    /// A chunk was dropped: the answer goes out whole at the end.
    dropped: bool,
}

impl Translator {
    /// Opens the stream of task `task_id`: the task, `submitted`, then `working`.
    pub(crate) fn open(task_id: &str, context_id: &str, out: EventSender) -> Self {
        let translator = Self {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            out,
            answer: None,
            own: Vec::new(),
            seen: Vec::new(),
            start_over: false,
            dropped: false,
        };
        let submitted = Task {
            id: task_id.to_owned(),
            context_id: Some(context_id.to_owned()),
            status: status(TaskState::Submitted, None),
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        };
        translator.out.send(StreamEvent::Task(submitted), false);
        translator.out.send(
            translator.status_update(status(TaskState::Working, None), false, None),
            false,
        );
        translator
    }

    /// Whether anyone still listens (nothing is translated for nobody).
    pub(crate) fn is_listening(&self) -> bool {
        self.out.is_listening()
    }

    /// Translates one loop event.
    pub(crate) fn on_event(&mut self, event: &LoopEvent) {
        match event {
            LoopEvent::TextDelta { depth: 0, text, .. } => self.chunk(text),
            LoopEvent::ArtifactChunk {
                depth: 0,
                artifact,
                append,
                last_chunk,
                ..
            } => self.own_chunk(artifact, *append, *last_chunk),
            LoopEvent::LlmRetrying { depth: 0, .. } => self.start_over = self.answer.is_some(),
            LoopEvent::LlmTurnStarted { depth, .. } => {
                if *depth == 0 {
                    self.start_over = self.answer.is_some();
                }
                self.step(event);
            }
            _ => self.step(event),
        }
    }

    /// Closes the stream with `task`, the turn's finished Task, which this makes agree with
    /// what was streamed (the answer artifact's id; a streamed answer the Task would lack).
    /// Answers the closing events (the artifacts as the Task holds them, then the final
    /// status update), which are told once the end is stored.
    pub(crate) fn close(mut self, task: &mut Task) -> Vec<StreamEvent> {
        // What the agent streamed itself stays in the Task, even if its outcome lacks it.
        for own in &self.own {
            if !task
                .artifacts
                .iter()
                .any(|a| a.artifact_id == own.artifact.artifact_id)
            {
                task.artifacts.push(own.artifact.clone());
            }
        }
        let answer = self.answer.take();
        if let Some(answer) = &answer {
            let first = task.artifacts.iter_mut().find(|a| {
                !self
                    .own
                    .iter()
                    .any(|o| o.artifact.artifact_id == a.artifact_id)
            });
            match first {
                Some(first) => first.artifact_id.clone_from(&answer.artifact_id),
                None if !answer.text.is_empty() => task
                    .artifacts
                    .push(Artifact::text(&answer.artifact_id, answer.text.clone())),
                None => {}
            }
        }
        // The Task lists its artifacts as a listener first saw them; the rest follow.
        let first_seen = |id: &str| self.seen.iter().position(|s| s == id).unwrap_or(usize::MAX);
        task.artifacts.sort_by_key(|a| first_seen(&a.artifact_id));
        let mut closing = Vec::new();
        for artifact in &task.artifacts {
            if let Some(answer) = answer
                .as_ref()
                .filter(|a| a.artifact_id == artifact.artifact_id)
            {
                let streamed_whole = !self.dropped
                    && artifact.parts.len() == 1
                    && artifact.parts[0].as_text() == Some(answer.text.as_str());
                if streamed_whole {
                    // Everything is out: close the artifact with an empty last chunk.
                    let mut close = artifact.clone();
                    close.parts = vec![Part::text("")];
                    closing.push(self.artifact_update(close, true, true));
                    continue;
                }
            } else if self
                .own
                .iter()
                .any(|o| o.closed && !o.dropped && o.artifact == *artifact)
            {
                // Streamed whole and closed by the agent: nothing more to say.
                continue;
            }
            closing.push(self.artifact_update(artifact.clone(), false, true));
        }
        closing.push(self.status_update(task.status.clone(), true, task.metadata.clone()));
        closing
    }

    /// The end of a turn that was refused or canceled before it finished (shutdown): a
    /// final `failed` status saying why, marked [`RETRY_ELSEWHERE`] (the stream's 503: the
    /// task was not done, and a proxy sends it to another replica).
    pub(crate) fn abort(self, why: &super::TurnError) -> StreamEvent {
        let mut message = Message::new(
            uuid::Uuid::new_v4().to_string(),
            Role::Agent,
            vec![Part::text(why.to_string())],
        );
        message.task_id = Some(self.task_id.clone());
        message.context_id = Some(self.context_id.clone());
        let mut marker = daedalus_contract::Metadata::new();
        marker.insert(RETRY_ELSEWHERE.to_owned(), true.into());
        self.status_update(status(TaskState::Failed, Some(message)), true, Some(marker))
    }

    fn chunk(&mut self, text: &str) {
        let append = match &mut self.answer {
            Some(answer) if !self.start_over => {
                answer.text.push_str(text);
                true
            }
            Some(answer) => {
                text.clone_into(&mut answer.text);
                false
            }
            None => {
                let artifact_id = uuid::Uuid::new_v4().to_string();
                self.seen.push(artifact_id.clone());
                self.answer = Some(Answer {
                    artifact_id,
                    text: text.to_owned(),
                });
                false
            }
        };
        self.start_over = false;
        let Some(answer) = &self.answer else { return };
        let artifact = Artifact::text(&answer.artifact_id, text);
        if !self.send_artifact(artifact, append, false, true) {
            self.dropped = true;
        }
    }

    /// A chunk of an artifact the agent streams itself.
    fn own_chunk(&mut self, chunk: &Artifact, append: bool, last_chunk: bool) {
        let known = self
            .own
            .iter()
            .position(|o| o.artifact.artifact_id == chunk.artifact_id);
        // An append to an artifact not yet sent begins it: a stream never appends to nothing.
        let append = append && known.is_some();
        let i = known.unwrap_or_else(|| {
            self.seen.push(chunk.artifact_id.clone());
            self.own.push(OwnArtifact {
                artifact: chunk.clone(),
                closed: false,
                dropped: false,
            });
            self.own.len() - 1
        });
        let own = &mut self.own[i];
        if known.is_some() {
            if append {
                own.artifact.append_chunk(chunk);
            } else {
                own.artifact = chunk.clone();
            }
        }
        own.closed = last_chunk;
        let update = StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact: chunk.clone(),
            append,
            last_chunk,
            metadata: None,
        });
        if !self.out.send(update, true) {
            own.dropped = true;
        }
    }

    /// A step of the turn, as a `working` status update whose message says what happens. A
    /// compaction of the served agent's conversation also carries its report in `metadata`.
    fn step(&self, event: &LoopEvent) {
        let report = match event {
            LoopEvent::Compacted {
                depth: 0, report, ..
            } => Some(report),
            _ => None,
        };
        if let Some(text) = step_text(event) {
            let mut message = Message::new(
                uuid::Uuid::new_v4().to_string(),
                Role::Agent,
                vec![Part::text(text)],
            );
            message.task_id = Some(self.task_id.clone());
            message.context_id = Some(self.context_id.clone());
            let mut metadata = None;
            if let Some(report) = report {
                report.insert_into(&mut metadata);
            }
            let update =
                self.status_update(status(TaskState::Working, Some(message)), false, metadata);
            // A report is not a progress line a slow listener may miss.
            self.out.send(update, report.is_none());
        }
    }

    fn send_artifact(
        &self,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
        droppable: bool,
    ) -> bool {
        self.out.send(
            self.artifact_update(artifact, append, last_chunk),
            droppable,
        )
    }

    fn artifact_update(&self, artifact: Artifact, append: bool, last_chunk: bool) -> StreamEvent {
        StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact,
            append,
            last_chunk,
            metadata: None,
        })
    }

    fn status_update(
        &self,
        status: TaskStatus,
        last: bool,
        metadata: Option<daedalus_contract::Metadata>,
    ) -> StreamEvent {
        StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            status,
            r#final: last,
            metadata,
        })
    }
}

/// The stream of a message answered before (a replay): the finished Task, then its status as
/// the final update.
pub(crate) fn replay(task: &Task, out: &EventSender) {
    if !out.is_listening() {
        return;
    }
    let context_id = task.context_id.clone().unwrap_or_default();
    out.send(StreamEvent::Task(task.clone()), false);
    out.send(
        StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: task.id.clone(),
            context_id,
            status: task.status.clone(),
            r#final: true,
            metadata: task.metadata.clone(),
        }),
        false,
    );
}

fn status(state: TaskState, message: Option<Message>) -> TaskStatus {
    TaskStatus {
        message,
        ..TaskStatus::now(state)
    }
}

/// What a step says, for the stream and for MCP progress (the words Daedalus renders).
pub fn step_text(event: &LoopEvent) -> Option<String> {
    match event {
        LoopEvent::LlmTurnStarted { agent, step, .. } => Some(format!("{agent} step {step} (llm)")),
        LoopEvent::LlmTurnFinished {
            agent,
            step,
            tool_calls,
            ..
        } if *tool_calls > 0 => Some(format!("{agent} step {step} (tool)")),
        LoopEvent::ToolStarted { server, tool, .. } => Some(format!("{server}/{tool}: started")),
        LoopEvent::ToolFinished { server, tool, .. } => Some(format!("{server}/{tool}: completed")),
        LoopEvent::ToolFailed { server, tool, .. } => Some(format!("{server}/{tool}: failed")),
        LoopEvent::Compacted { agent, report, .. } => Some(format!(
            "{agent} compacted the conversation ({}: {} → {} messages)",
            report.strategy.as_str(),
            report.messages_before,
            report.messages_after
        )),
        LoopEvent::LlmTurnFinished { .. }
        | LoopEvent::LlmRetrying { .. }
        | LoopEvent::TextDelta { .. }
        | LoopEvent::ArtifactChunk { .. }
        | LoopEvent::Final { .. } => None,
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
