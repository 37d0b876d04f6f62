//! A worker's reply inbox against a real JetStream consumer. A task delivered for a pull the
//! worker had given up on (this test sends that pull "from the past", on the reply subject of
//! an earlier, finished pull) answers the next pull, or, when it lands while the worker waits
//! for an ack confirmation, is set aside and handed over by the next pull as late, without a
//! new pull request. Nothing is lost: every task ends acked.

mod support;

use std::time::Duration;

use async_nats::jetstream::consumer::{AckPolicy, pull};
use async_nats::jetstream::{self, AckKind, stream};
use daedalus_proxy::consume::inbox::{Inbox, Pulled};
use support::NatsServer;

const STREAM: &str = "INBOX_TEST";
const CONSUMER: &str = "worker";
const WAIT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_task_for_a_given_up_pull_is_worked_or_handed_back_never_lost() {
    let nats = NatsServer::start();
    let client = async_nats::connect(nats.url()).await.expect("connects");
    let js = jetstream::new(client.clone());
    let stream = js
        .create_stream(stream::Config {
            name: STREAM.into(),
            subjects: vec!["inbox-test.>".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            ..Default::default()
        })
        .await
        .expect("stream");
    stream
        .create_consumer(pull::Config {
            durable_name: Some(CONSUMER.into()),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let publish = |n: u32| {
        let js = js.clone();
        async move {
            js.publish("inbox-test.task", format!("task {n}").into())
                .await
                .expect("published")
                .await
                .expect("stored");
        }
    };
    let mut inbox = Inbox::open(&js, &client, STREAM, CONSUMER, Duration::from_secs(1))
        .await
        .expect("the inbox subscribes");

    // Pull 1 expires on the server with nothing to deliver.
    let pulled = inbox.pull(Duration::from_millis(200)).await;
    assert!(matches!(pulled, Ok(Pulled::Nothing)), "{pulled:?}");

    // A pull on pull 1's reply subject, as if the server answered it late.
    publish(1).await;
    client
        .publish_with_reply(
            format!("$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{CONSUMER}"),
            inbox.reply_subject(1),
            r#"{"batch":1,"expires":5000000000}"#.into(),
        )
        .await
        .expect("pull from the past");
    // Pull 2 gets that task: a task cannot be told apart by its pull, and the worker is idle.
    let first = match inbox.pull(WAIT).await {
        Ok(Pulled::Task(task)) => task,
        other => panic!("task 1 answers pull 2: {other:?}"),
    };
    assert_eq!(first.payload, "task 1");

    // Pull 2 itself is still waiting on the server: its task lands while the worker waits for
    // the confirmation of task 1's ack. It is set aside, and the ack is still confirmed.
    publish(2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    inbox
        .confirm(&first, AckKind::Ack)
        .await
        .expect("task 1's ack is confirmed");
    let late = match inbox.pull(WAIT).await {
        Ok(Pulled::Late(task)) => task,
        other => panic!("task 2, set aside, comes next as late: {other:?}"),
    };
    assert_eq!(late.payload, "task 2");

    // Handed back, it is delivered again to the next pull, and then acked.
    inbox
        .confirm(&late, AckKind::Nak(None))
        .await
        .expect("the hand back is confirmed");
    let again = match inbox.pull(WAIT).await {
        Ok(Pulled::Task(task)) => task,
        other => panic!("task 2 again: {other:?}"),
    };
    assert_eq!(again.payload, "task 2");
    assert_eq!(again.info().expect("a delivery").delivered, 2);
    inbox
        .confirm(&again, AckKind::Ack)
        .await
        .expect("task 2's ack is confirmed");

    let mut stream = js.get_stream(STREAM).await.expect("stream");
    let left = stream.info().await.expect("info").state.messages;
    assert_eq!(left, 0, "both tasks ended acked; none was lost or left");
}
