use std::sync::Arc;

use daedalus_contract::{Artifact, TaskStatus};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::stores::tasks::backend::StoredTask;

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

fn artifact(text: &str) -> Artifact {
    Artifact::text("a", text)
}

fn chunk(text: &str, append: bool) -> StreamEvent {
    StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: "t".into(),
        context_id: "c".into(),
        artifact: artifact(text),
        append,
        last_chunk: false,
        metadata: None,
    })
}

/// `task` as another replica stored it at `revision`.
fn stored_elsewhere(task: Task, revision: u64) -> Versioned {
    Versioned {
        stored: StoredTask::new(task, "replica-b", None),
        revision,
    }
}

/// A cell whose turn runs here, at `task`.
fn running(task: Task) -> Arc<TaskCell> {
    let cell = Arc::new(TaskCell::new());
    let _ended = cell.start_running(TurnStop::new(CancellationToken::new()));
    cell.begun(task, 0, None);
    cell
}

/// Waits for the subscription's next event, or says there was none in time.
async fn next_soon(sub: &mut Subscription) -> Option<StreamEvent> {
    tokio::time::timeout(std::time::Duration::from_millis(50), sub.next())
        .await
        .ok()
        .flatten()
}

#[tokio::test]
async fn a_late_subscriber_gets_the_task_as_it_stands_then_every_later_event() {
    let cell = running(task(TaskState::Working));
    cell.record(&chunk("hel", false));
    let (now, mut sub) = cell.subscribe().expect("running");
    assert_eq!(now.artifacts[0].parts[0].as_text(), Some("hel"));
    cell.record(&chunk("lo", true));
    let mut done = task(TaskState::Completed);
    done.artifacts = vec![artifact("hello")];
    cell.finish(done, 0, None, None, &[status(TaskState::Completed, true)]);
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
    let cell = running(task(TaskState::Working));
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
    cell.finish(
        task(TaskState::Completed),
        0,
        None,
        None,
        &[status(TaskState::Completed, true)],
    );
    assert_eq!(sub.next().await, Some(status(TaskState::Completed, true)));
    assert_eq!(sub.next().await, None);
}

#[tokio::test]
async fn a_finished_task_refuses_subscribers_and_one_waiting_for_input_takes_them() {
    let cell = Arc::new(TaskCell::new());
    assert_eq!(cell.subscribe().err(), Some(SubscribeRefusal::Unknown));
    cell.finish(task(TaskState::InputRequired), 1, None, None, &[]);
    let (_, mut sub) = cell.subscribe().expect("waiting for input");
    assert_eq!(next_soon(&mut sub).await, None, "nothing happened yet");
    cell.finish(
        task(TaskState::Canceled),
        2,
        None,
        None,
        &[status(TaskState::Canceled, true)],
    );
    assert_eq!(sub.next().await, Some(status(TaskState::Canceled, true)));
    assert_eq!(
        cell.subscribe().err(),
        Some(SubscribeRefusal::Terminal(TaskState::Canceled))
    );
}

#[tokio::test]
async fn a_revision_that_changes_nothing_a_listener_shows_is_not_an_event() {
    // Fault 4: a refresh that bumped the sequence number ended a subscription early.
    let cell = Arc::new(TaskCell::restored(stored_elsewhere(
        task(TaskState::InputRequired),
        5,
    )));
    let (_, mut sub) = cell.subscribe().expect("waiting for input");
    assert!(matches!(
        cell.absorb(stored_elsewhere(task(TaskState::InputRequired), 5)),
        Absorbed::Nothing
    ));
    assert!(matches!(
        cell.absorb(stored_elsewhere(task(TaskState::InputRequired), 6)),
        Absorbed::Applied
    ));
    assert_eq!(
        next_soon(&mut sub).await,
        None,
        "the same task again is no event, and the subscription stays open"
    );
    cell.absorb(stored_elsewhere(task(TaskState::Canceled), 7));
    assert_eq!(sub.next().await, Some(status(TaskState::Canceled, true)));
    assert_eq!(sub.next().await, None);
}

#[tokio::test]
async fn a_continuation_elsewhere_is_heard_and_does_not_end_the_stream() {
    let cell = Arc::new(TaskCell::restored(stored_elsewhere(
        task(TaskState::InputRequired),
        5,
    )));
    let (_, mut sub) = cell.subscribe().expect("waiting for input");
    cell.absorb(stored_elsewhere(task(TaskState::Working), 6));
    assert_eq!(sub.next().await, Some(status(TaskState::Working, false)));
    let mut done = task(TaskState::Completed);
    done.artifacts = vec![artifact("answer")];
    cell.absorb(stored_elsewhere(done, 7));
    let Some(StreamEvent::ArtifactUpdate(whole)) = sub.next().await else {
        panic!("the answer");
    };
    assert_eq!(
        (
            whole.artifact.parts[0].as_text(),
            whole.append,
            whole.last_chunk
        ),
        (Some("answer"), false, true)
    );
    assert_eq!(sub.next().await, Some(status(TaskState::Completed, true)));
}

#[tokio::test]
async fn an_older_revision_never_replaces_a_newer_one() {
    let cell = TaskCell::restored(stored_elsewhere(task(TaskState::Completed), 9));
    assert!(matches!(
        cell.absorb(stored_elsewhere(task(TaskState::Working), 8)),
        Absorbed::Nothing
    ));
    assert_eq!(cell.state(), Some(TaskState::Completed));
}

#[tokio::test]
async fn a_revision_seen_while_this_replica_writes_waits_for_the_writer() {
    let cell = TaskCell::restored(stored_elsewhere(task(TaskState::InputRequired), 5));
    cell.start_writing();
    assert!(matches!(
        cell.absorb(stored_elsewhere(task(TaskState::Working), 6)),
        Absorbed::Nothing
    ));
    assert_eq!(cell.state(), Some(TaskState::InputRequired));
    let deferred = cell.stop_writing().expect("kept for the writer");
    assert_eq!(deferred.revision, 6);
}

#[tokio::test]
async fn an_end_stored_elsewhere_under_a_running_turn_stops_the_turn_and_waits_for_its_end() {
    let cell = running(task(TaskState::Working));
    let won = cell.absorb(stored_elsewhere(task(TaskState::Canceled), 3));
    let Absorbed::EndedUnderTurn(stop) = won else {
        panic!("the turn is told: {won:?}");
    };
    stop.request();
    assert!(stop.requested() && stop.token().is_cancelled());
    assert_eq!(
        cell.state(),
        Some(TaskState::Working),
        "the turn settles the task when it stores its end"
    );
    assert!(matches!(
        cell.absorb(stored_elsewhere(task(TaskState::Working), 4)),
        Absorbed::Nothing
    ));
}

#[test]
fn changes_are_the_new_artifacts_whole_then_the_status_final_when_over_or_waiting() {
    let from = task(TaskState::Working);
    let mut to = task(TaskState::InputRequired);
    to.artifacts = vec![artifact("partial")];
    let events = changes(&from, &to);
    assert_eq!(events.len(), 2);
    assert!(matches!(&events[0], StreamEvent::ArtifactUpdate(u) if !u.append && u.last_chunk));
    assert_eq!(events[1], status(TaskState::InputRequired, true));
    assert!(changes(&to, &to).is_empty());
    assert_eq!(
        changes(&to, &task(TaskState::Working)),
        [status(TaskState::Working, false)]
    );
}
