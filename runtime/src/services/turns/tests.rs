//! The turn service without a face: cancel by task id.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use daedalus_contract::{Message, Part, Role, TaskState};
use tokio_util::sync::CancellationToken;

use super::{CancelError, Memory, TurnError, TurnLimits, TurnRequest, TurnService};
use crate::agents::agent_loop::{Agent, AgentOutcome, AgentRequest, Passthrough};
use crate::agents::fleet::Fleet;
use crate::platform::identity::Caller;
use crate::platform::metrics::Metrics;
use crate::services::turns::Readiness;

/// Works until it is canceled.
#[derive(Debug)]
struct UntilCanceled;

#[async_trait]
impl Agent for UntilCanceled {
    async fn run(&self, _: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        cancel.cancelled().await;
        AgentOutcome::Canceled
    }
}

/// Works until it is canceled, and then finishes its answer anyway: the turn ends just as a
/// cancel lands, and the end it stores is `completed`.
#[derive(Debug)]
struct FinishesWhenCanceled;

#[async_trait]
impl Agent for FinishesWhenCanceled {
    async fn run(&self, _: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        cancel.cancelled().await;
        AgentOutcome::Completed {
            artifacts: vec![daedalus_contract::Artifact::text("a", "done first")],
        }
    }
}

fn service(agent: Arc<dyn Agent>) -> TurnService {
    let readiness = Arc::new(Readiness::default());
    readiness.set_ready();
    TurnService::new(
        Arc::new(Fleet::single("a", agent)),
        Arc::new(Metrics::new()),
        readiness,
        TurnLimits {
            request_timeout: Duration::from_mins(1),
            budgets: super::Budgets {
                max_turns: 8,
                memory: 1 << 30,
                agent_memory: 1 << 30,
            },
            max_tasks: 100,
            task_memory_bytes: 1 << 20,
            task_ttl: Duration::from_hours(1),
            max_resumes: crate::config::TURN_MAX_RESUMES_DEFAULT,
        },
    )
}

fn task_turn(message_id: &str, text: &str) -> TurnRequest {
    TurnRequest::new(
        "a",
        Message::new(message_id, Role::User, vec![Part::text(text)]),
        Memory::Task,
    )
}

#[tokio::test]
async fn a_running_task_canceled_by_id_ends_canceled_not_refused() {
    let turns = service(Arc::new(UntilCanceled));
    let handle = turns
        .start(task_turn("t-1", "work"))
        .await
        .expect("started");
    assert_eq!(handle.task_id(), "t-1");
    let canceled = turns
        .cancel("t-1", &Caller::Anyone)
        .await
        .expect("a running task can be canceled");
    assert_eq!(canceled.status.state, TaskState::Canceled);
    let answered = handle.finish().await.expect("a Task, not a refusal");
    assert_eq!(answered.status.state, TaskState::Canceled);
    assert_eq!(answered.id, canceled.id);

    assert_eq!(
        turns.cancel("t-1", &Caller::Anyone).await,
        Err(CancelError::NotCancelable {
            task_id: "t-1".into(),
            state: TaskState::Canceled,
        }),
        "a task that ended cannot be canceled again"
    );
    assert_eq!(
        turns.cancel("nobody", &Caller::Anyone).await,
        Err(CancelError::NotFound("nobody".into()))
    );
}

#[tokio::test]
async fn a_task_waiting_for_input_can_be_canceled_and_a_finished_one_cannot() {
    let turns = service(Arc::new(Passthrough));
    let asked = turns
        .run(task_turn("t-2", "***INPUT which one?"))
        .await
        .expect("ran");
    assert_eq!(asked.status.state, TaskState::InputRequired);
    let canceled = turns
        .cancel("t-2", &Caller::Anyone)
        .await
        .expect("cancelable");
    assert_eq!(canceled.status.state, TaskState::Canceled);

    let done = turns.run(task_turn("t-3", "hello")).await.expect("ran");
    assert_eq!(done.status.state, TaskState::Completed);
    assert!(matches!(
        turns.cancel("t-3", &Caller::Anyone).await,
        Err(CancelError::NotCancelable {
            state: TaskState::Completed,
            ..
        })
    ));
}

#[tokio::test]
async fn shutdown_still_refuses_what_it_cancels_so_the_task_goes_elsewhere() {
    let turns = service(Arc::new(UntilCanceled));
    let handle = turns
        .start(task_turn("t-4", "work"))
        .await
        .expect("started");
    turns.drain(Duration::from_millis(10)).await;
    assert!(matches!(
        handle.finish().await,
        Err(TurnError::CanceledByShutdown)
    ));
}

#[tokio::test]
async fn a_cancel_that_lands_as_the_turn_completes_is_not_cancelable_and_the_task_stays_completed()
{
    // Fault 3: the cancel answered with the COMPLETED task, as if it had canceled it.
    let turns = service(Arc::new(FinishesWhenCanceled));
    let handle = turns
        .start(task_turn("t-5", "work"))
        .await
        .expect("started");
    assert_eq!(
        turns.cancel("t-5", &Caller::Anyone).await,
        Err(CancelError::NotCancelable {
            task_id: "t-5".into(),
            state: TaskState::Completed,
        })
    );
    let answered = handle.finish().await.expect("a Task");
    assert_eq!(answered.status.state, TaskState::Completed);
    assert_eq!(
        turns
            .find_task("t-5", &Caller::Anyone)
            .await
            .map(|t| t.status.state),
        Some(TaskState::Completed)
    );
}

/// Two replicas on one store: `a` runs a turn of task t-9; `b`, resuming the turn as a lost
/// replica `gone` left it (a peer that resumed it first is `a`), is refused: the task moved,
/// and one turn of it runs, not two.
#[tokio::test]
async fn a_resume_over_a_task_a_peer_began_since_its_replica_left_it_is_refused() {
    let dir = tempfile::tempdir().expect("a dir");
    let file = dir.path().join("tasks.sqlite");
    let on_the_file = |name: &'static str| {
        let file = file.to_str().expect("utf-8").to_owned();
        async move {
            let turns = service(Arc::new(UntilCanceled));
            let backend =
                crate::stores::tasks::SqliteTasks::open(&file, Duration::from_hours(1), 100)
                    .expect("the file opens");
            turns
                .task_store()
                .attach(Arc::new(backend), name)
                .await
                .expect("attached");
            turns
        }
    };
    let a = on_the_file("replica-a").await;
    let b = on_the_file("replica-b").await;
    let running = a.start(task_turn("t-9", "work")).await.expect("started");
    let record = super::record::TurnRecord {
        version: super::record::RECORD_VERSION,
        agent: "a".to_owned(),
        principal: None,
        message: Message::new("t-9", Role::User, vec![Part::text("work")]),
        conversation: "a2a/t-9".to_owned(),
        sampling: crate::config::sampling::SamplingParams::default(),
        controls: crate::agents::agent_loop::TurnControls::default(),
        stream: false,
        resumes: 0,
        handed_off: false,
        checkpoint: None,
        traceparent: None,
    };
    let mut resume = task_turn("t-9", "work");
    resume.replay = false;
    resume.resume = Some(super::record::Resume {
        record,
        left_by: "gone".to_owned(),
    });
    let refused = b.run(resume).await;
    assert!(
        matches!(&refused, Err(TurnError::TaskMoved(id)) if id == "t-9"),
        "{refused:?}"
    );
    a.cancel("t-9", &Caller::Anyone).await.expect("cancelable");
    let ended = running.finish().await.expect("a Task");
    assert_eq!(
        ended.status.state,
        TaskState::Canceled,
        "a's turn was left alone"
    );
}

/// A turn refused for want of room (`MAX_CONCURRENT_TASKS`) spends none of its caller's
/// `turns_per_minute`: once there is room, the caller's one turn of the minute runs.
#[tokio::test]
async fn a_turn_refused_for_room_spends_no_budget() {
    let turns = service(Arc::new(UntilCanceled));
    let plan: crate::config::deployment::budgets::BudgetPlan =
        serde_saphyr::from_str("principals: { ci-bot: { turns_per_minute: 1 } }").expect("a plan");
    turns.set_budgets(Some(plan));
    let ci_bot = || {
        let mut turn = task_turn(&uuid::Uuid::new_v4().to_string(), "work");
        turn.caller = Caller::known(crate::platform::identity::Known {
            principal: crate::platform::identity::Principal {
                issuer: None,
                subject: "ci-bot".to_owned(),
                tenant: None,
            },
            scopes: std::collections::BTreeSet::new(),
            admin: false,
            via: crate::platform::identity::Via::ApiKey,
        });
        turn
    };
    // Anyone else's turns fill the room (MAX_CONCURRENT_TASKS is 8 here).
    let mut fillers = Vec::new();
    for n in 0..8 {
        let id = format!("filler-{n}");
        fillers.push(turns.start(task_turn(&id, "work")).await.expect("room"));
    }
    let refused = turns.start(ci_bot()).await.map(|_| ());
    assert!(matches!(refused, Err(TurnError::Busy(_))), "{refused:?}");
    turns
        .cancel("filler-0", &Caller::Anyone)
        .await
        .expect("cancelable");
    let first = fillers.remove(0);
    first.finish().await.expect("a Task");
    // The canceled turn gives its room back as its future ends, just after its answer.
    let mut admitted = turns.start(ci_bot()).await.map(|_| ());
    for _ in 0..100 {
        if !matches!(admitted, Err(TurnError::Busy(_))) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        admitted = turns.start(ci_bot()).await.map(|_| ());
    }
    assert!(
        admitted.is_ok(),
        "the minute's turn was not spent: {admitted:?}"
    );
}

/// The push service beside `turns`, allowed to call loopback webhooks.
fn push_beside(turns: &TurnService) -> crate::services::push::Push {
    let settings = crate::config::push::PushSettings {
        allow: crate::config::push::AllowList::parse(&["127.0.0.1".to_owned()])
            .expect("an address"),
        ..Default::default()
    };
    crate::services::push::Push::new(settings, turns.task_store(), Arc::new(Metrics::new()))
}

/// A webhook nothing listens at.
fn a_webhook() -> daedalus_contract::TaskPushNotificationConfig {
    serde_json::from_value(serde_json::json!({"url": "http://127.0.0.1:9/hook"}))
        .expect("a webhook config")
}

fn standard_turn(message_id: &str, task_id: Option<&str>) -> TurnRequest {
    let mut message = Message::new(message_id, Role::User, vec![Part::text("hi")]);
    message.task_id = task_id.map(str::to_owned);
    TurnRequest::standard("a", message, super::Origin::default())
}

async fn webhooks_of(push: &crate::services::push::Push, task_id: &str) -> usize {
    let request = daedalus_contract::ListPushConfigsRequest {
        task_id: task_id.to_owned(),
        ..Default::default()
    };
    push.list(&Caller::Anyone, &request)
        .await
        .map_or(0, |page| page.configs.len())
}

#[tokio::test]
async fn a_standard_send_gets_a_task_id_of_the_servers_and_never_a_replay() {
    let turns = service(Arc::new(Passthrough));
    let push = push_beside(&turns);
    let first = turns
        .send_standard(&push, standard_turn("m-1", None), None)
        .await
        .expect("started");
    assert_ne!(
        first.task_id(),
        "m-1",
        "the server names the task, not the messageId"
    );
    assert!(
        uuid::Uuid::parse_str(first.task_id()).is_ok(),
        "{}",
        first.task_id()
    );
    let first_id = first.task_id().to_owned();
    first.answer().await.expect("answered");
    // The same messageId again is a new message: a new task, not the stored answer.
    let second = turns
        .send_standard(&push, standard_turn("m-1", None), None)
        .await
        .expect("started");
    assert_ne!(second.task_id(), first_id);
}

#[tokio::test]
async fn a_standard_send_to_a_task_it_does_not_know_is_refused_and_sets_up_no_webhook() {
    let turns = service(Arc::new(Passthrough));
    let push = push_beside(&turns);
    let refused = turns
        .send_standard(&push, standard_turn("m-1", Some("nope")), Some(a_webhook()))
        .await
        .expect_err("no such task");
    assert!(
        matches!(refused, super::SendError::Turn(TurnError::TaskNotFound(ref id)) if id == "nope"),
        "{refused:?}"
    );
    assert_eq!(webhooks_of(&push, "nope").await, 0);
}

#[tokio::test]
async fn a_finished_task_takes_no_message_and_keeps_its_webhooks_as_they_were() {
    let turns = service(Arc::new(Passthrough));
    let push = push_beside(&turns);
    let done = turns
        .send_standard(&push, standard_turn("m-1", None), None)
        .await
        .expect("started");
    let task_id = done.task_id().to_owned();
    done.answer().await.expect("completed");
    let refused = turns
        .send_standard(
            &push,
            standard_turn("m-2", Some(&task_id)),
            Some(a_webhook()),
        )
        .await
        .expect_err("a finished task");
    assert!(
        matches!(
            refused,
            super::SendError::Turn(TurnError::TaskFinished {
                state: TaskState::Completed,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(
        webhooks_of(&push, &task_id).await,
        0,
        "the refused send added no webhook"
    );
}

#[tokio::test]
async fn a_new_tasks_webhook_is_dropped_when_its_turn_does_not_begin() {
    let turns = service(Arc::new(Passthrough));
    let push = push_beside(&turns);
    // An agent the deployment does not have: the turn is refused after the webhook was set
    // up for the task the server named.
    let mut missing = standard_turn("m-1", None);
    missing.agent = "missing".to_owned();
    let refused = turns
        .send_standard_as(&push, missing, Some(a_webhook()), "fresh-1".to_owned())
        .await
        .expect_err("no such agent");
    assert!(
        matches!(refused, super::SendError::Turn(TurnError::UnknownAgent(_))),
        "{refused:?}"
    );
    // A task later given the same id does not inherit the refused send's webhook...
    let later = turns
        .send_standard_as(
            &push,
            standard_turn("m-2", None),
            None,
            "fresh-1".to_owned(),
        )
        .await
        .expect("started");
    later.answer().await.expect("answered");
    assert_eq!(
        webhooks_of(&push, "fresh-1").await,
        0,
        "the refused send's webhook is gone"
    );
    // ...while a send that began keeps its own.
    let kept = turns
        .send_standard_as(
            &push,
            standard_turn("m-3", None),
            Some(a_webhook()),
            "fresh-2".to_owned(),
        )
        .await
        .expect("started");
    kept.answer().await.expect("answered");
    assert_eq!(webhooks_of(&push, "fresh-2").await, 1);
}
