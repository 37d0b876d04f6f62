//! What a face holds while a turn runs: the task's ids, its live events, and its finished
//! Task. Dropping the handle (a client that went away) does not stop the turn.

use daedalus_contract::{Message, SendMessageResponse, Task};
use tokio::task::JoinHandle;

use super::TurnError;
use super::stream::EventReceiver;

/// A finished turn: its Task, and whether the agent answered with a message instead (the
/// Task's status message), which the A2A bindings then answer.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) task: Task,
    pub(crate) replied: bool,
}

impl Finished {
    /// A turn that ended in a Task.
    pub(crate) fn task(task: Task) -> Self {
        Self {
            task,
            replied: false,
        }
    }
}

/// A started turn.
#[derive(Debug)]
pub struct TaskHandle {
    task_id: String,
    context_id: String,
    events: Option<EventReceiver>,
    done: JoinHandle<Result<Finished, TurnError>>,
    /// Whether its agent may answer with a message ([`crate::agents::agent_loop::Agent::may_reply`]).
    may_reply: bool,
    /// The task as the turn began it, when the caller hears it then.
    began: Option<Box<Task>>,
}

/// How a streamed turn answers once it has ended: with the message its agent replied with
/// (then the stream's only item, A2A §3.1.2), or with the events it queued meanwhile (`task`
/// first, the end last; the queue's byte bound drops chunks and steps, never the end).
#[derive(Debug)]
pub enum EndedStream {
    Reply(Message),
    Events(EventReceiver),
}

impl TaskHandle {
    pub(super) fn new(
        task_id: String,
        context_id: String,
        events: Option<EventReceiver>,
        done: JoinHandle<Result<Finished, TurnError>>,
        may_reply: bool,
    ) -> Self {
        Self {
            task_id,
            context_id,
            events,
            done,
            may_reply,
            began: None,
        }
    }

    pub(super) fn began_as(mut self, began: Option<Box<Task>>) -> Self {
        self.began = began;
        self
    }

    /// The task as its turn began it (`working`, its history shaped as asked), or as it was
    /// stored already for a message answered before, when the request was
    /// [`super::TurnRequest::answered_as_it_begins`]; the turn goes on without its caller.
    pub fn began(self) -> Option<Task> {
        self.began.map(|task| *task)
    }

    /// Whether the turn may end in a reply with a message rather than in a Task: its agent
    /// said so of its message as it started.
    pub fn may_reply(&self) -> bool {
        self.may_reply
    }

    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The task's context id.
    pub fn context_id(&self) -> &str {
        &self.context_id
    }

    /// The task's live events, in order (`task` first, the final status update last), for
    /// one listener; `None` once taken, or when the turn was run without listening.
    pub fn take_events(&mut self) -> Option<EventReceiver> {
        self.events.take()
    }

    /// Waits for the turn's finished Task (its events are no longer listened to).
    pub async fn finish(self) -> Result<Task, TurnError> {
        self.finished().await.map(|f| f.task)
    }

    /// Waits for the turn's answer as A2A's `SendMessage` gives it: the agent's message when
    /// it replied with one, else the finished Task.
    pub async fn answer(self) -> Result<SendMessageResponse, TurnError> {
        let Finished { task, replied } = self.finished().await?;
        Ok(match task.status.message {
            Some(message) if replied => SendMessageResponse::Message(message),
            _ => SendMessageResponse::Task(task),
        })
    }

    /// Waits for the turn's end, its events kept meanwhile, and says how its stream answers:
    /// its reply, or its events; `None` when they were taken already.
    pub async fn ended_stream(mut self) -> Option<EndedStream> {
        let events = self.events.take()?;
        match (&mut self.done).await {
            Ok(Ok(Finished {
                task,
                replied: true,
            })) if task.status.message.is_some() => task.status.message.map(EndedStream::Reply),
            // A Task, or a refusal: the events say how it ended.
            _ => Some(EndedStream::Events(events)),
        }
    }

    async fn finished(mut self) -> Result<Finished, TurnError> {
        drop(self.events.take());
        self.done
            .await
            .map_err(|join| TurnError::WorkerStopped(join.to_string()))?
    }
}
