//! A streamed answer's events, whichever binding writes them (SSE on `POST /`, JSON-RPC and
//! HTTP+JSON; a server stream on gRPC): the turn a request started, or a task as it stands and
//! then its log, until the final status update.
//!
//! The events wait in the turn service's byte-bounded queue ([`crate::services::turns::stream`]): a reader
//! that falls behind misses chunks and steps, never the end. A reader that goes away drops the
//! stream and stops nothing. The stream holds its place among in-flight requests until it
//! ends, so a SIGTERM drain waits for it.
//!
//! A standard binding's stream of a turn that may reply with a message (its agent says so as
//! it starts) waits for the turn's end: a reply is streamed as that Message alone (A2A
//! §3.1.2), and a Task's events, kept in the queue meanwhile, follow once it ended.

use daedalus_contract::{StreamEvent, StreamResponse, Task};
use futures::Stream;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::platform::telemetry::a2a::LastState;
use crate::services::turns::{EndedStream, EventReceiver, Following, TaskHandle};

/// Where a stream's events come from.
pub(super) enum Events {
    /// The turn this request started.
    Turn(EventReceiver),
    /// The turn this request started, which may reply with a message: nothing until it ends.
    Held(Option<Box<TaskHandle>>),
    /// A task as it stands, then every later event of its log.
    Task(Option<Box<Task>>, Following),
}

impl Events {
    /// The events of a turn just started, as they come; `None` if they were taken already.
    pub(super) fn of_turn(mut handle: TaskHandle) -> Option<Self> {
        handle.take_events().map(Events::Turn)
    }

    /// The answer of a turn just started to a standard binding's stream: its events as they
    /// come, or, when it may reply with a message, its reply or its events once it ended.
    pub(super) fn answering(handle: TaskHandle) -> Option<Self> {
        if handle.may_reply() {
            Some(Events::Held(Some(Box::new(handle))))
        } else {
            Self::of_turn(handle)
        }
    }

    /// `task` as it stands, then what its subscription hears.
    pub(super) fn of_task(task: Task, subscription: Following) -> Self {
        Events::Task(Some(Box::new(task)), subscription)
    }

    async fn next(&mut self) -> Option<StreamResponse> {
        loop {
            return match self {
                Events::Turn(events) => events.recv().await.map(StreamResponse::Event),
                Events::Held(handle) => match Box::pin(handle.take()?.ended_stream()).await? {
                    EndedStream::Reply(message) => Some(StreamResponse::Message { message }),
                    EndedStream::Events(events) => {
                        *self = Events::Turn(events);
                        continue;
                    }
                },
                Events::Task(first, subscription) => match first.take() {
                    Some(task) => Some(StreamResponse::Event(StreamEvent::Task(*task))),
                    // Boxed: its future is kilobytes, and a held turn's stream never waits on it.
                    None => Box::pin(subscription.next())
                        .await
                        .map(StreamResponse::Event),
                },
            };
        }
    }

    /// The events, each written by `write`, until the final one (a final status update, or a
    /// reply); `inflight` is held until then.
    pub(super) fn until_final<T, W>(
        self,
        inflight: TaskTrackerToken,
        write: W,
    ) -> impl Stream<Item = T> + Send + 'static
    where
        T: Send + 'static,
        W: Fn(&StreamResponse) -> T + Send + 'static,
    {
        // The request's span ([`super::traced`]) lasts as long as its stream, and ends with
        // the last state the stream carried.
        let span = LastState::of(tracing::Span::current());
        futures::stream::unfold(Some((self, inflight, write, span)), |state| async move {
            let (mut events, inflight, write, mut span) = state?;
            let item = events.next().await?;
            let last = match &item {
                StreamResponse::Event(event) => {
                    span.saw(event);
                    matches!(event, StreamEvent::StatusUpdate(u) if u.r#final)
                }
                StreamResponse::Message { .. } => true,
            };
            let written = write(&item);
            let next = (!last).then_some((events, inflight, write, span));
            Some((written, next))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A held turn's stream is allocated once per turn and lives as long as the turn: it must
    /// not carry the room of a subscription's (kilobytes) it never waits on.
    #[tokio::test]
    async fn a_turns_event_stream_is_a_fraction_of_a_kib() {
        let tracker = tokio_util::task::TaskTracker::new();
        let (_out, events) = crate::services::turns::stream::queue();
        let stream = Events::Turn(events).until_final(tracker.token(), |_| String::new());
        let bytes = std::mem::size_of_val(&stream);
        assert!(bytes <= 512, "a turn's event stream takes {bytes} bytes");
    }
}
