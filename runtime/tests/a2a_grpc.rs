//! The A2A gRPC binding, with tonic's client on the runtime's HTTP port: the stream rules,
//! every error's status code and `ErrorInfo`, the request's size limit, a client that goes away
//! or stops reading, authentication and tenants. (The official Python SDK's gRPC client is in
//! `a2a_python.rs`, the kit over gRPC in `.ci/tck`, a seeded fuzz in `fuzz_grpc.rs`.)

mod support;

use std::time::Duration;

use daedalus_contract::grpc::v1;
use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_test_kit::wait_until;
use support::grpc::{
    Heard, call, connect, connect_with_window, hear_all, reason, send, send_at_once, state, task_of,
};
use support::identity::api_key_file;
use support::runtime::Runtime;
use tonic::Code;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_answers_the_finished_task_and_get_and_list_find_it() {
    let rt = Runtime::passthrough("grpc").await;
    let mut client = connect(&rt.url).await;
    let task = task_of(
        client
            .send_message(call(send("g-1", "hello")))
            .await
            .expect("sent")
            .into_inner(),
    );
    assert_eq!(state(&task), v1::TaskState::Completed);
    let text = &task.artifacts[0].parts[0].content;
    assert_eq!(text, &Some(v1::part::Content::Text("hello".to_owned())));

    let got = client
        .get_task(call(v1::GetTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        }))
        .await
        .expect("found")
        .into_inner();
    assert_eq!(got.id, task.id);
    assert_eq!(got.history.len(), 1, "the user's message: {got:?}");

    let listed = client
        .list_tasks(call(v1::ListTasksRequest {
            context_id: task.context_id.clone(),
            ..Default::default()
        }))
        .await
        .expect("listed")
        .into_inner();
    assert_eq!(listed.total_size, 1);
    assert_eq!(listed.tasks[0].id, task.id);

    // With no authentication there is no extended card (A2A §13.3), and the card says so.
    let refused = client
        .get_extended_agent_card(call(v1::GetExtendedAgentCardRequest::default()))
        .await
        .expect_err("no extended card");
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    let card: daedalus_contract::AgentCard =
        reqwest::get(format!("{}/.well-known/agent-card.json", rt.url))
            .await
            .expect("the card")
            .json()
            .await
            .expect("JSON");
    assert_eq!(card.name, "grpc");
    assert_eq!(card.capabilities.extended_agent_card, Some(false));
    let grpc = card
        .supported_interfaces
        .iter()
        .find(|i| i.protocol_binding == "GRPC")
        .expect("the card lists its gRPC interface");
    assert_eq!(
        format!("http://{}", grpc.url),
        rt.url,
        "host:port of the HTTP port"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_send_gives_the_task_first_then_its_events_and_ends() {
    let rt = Runtime::passthrough("grpc").await;
    let mut client = connect(&rt.url).await;
    let stream = client
        .send_streaming_message(call(send("s-1", "streamed words")))
        .await
        .expect("a stream")
        .into_inner();
    let heard = hear_all(stream).await;
    assert_eq!(heard.kinds.first(), Some(&"task"), "{heard:?}");
    assert_eq!(heard.kinds.last(), Some(&"status"), "{heard:?}");
    assert!(heard.kinds.contains(&"artifact"), "{heard:?}");
    assert_eq!(heard.text, "streamed words");
    assert_eq!(heard.state, Some(v1::TaskState::Completed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_joins_a_running_task_and_cancel_ends_it() {
    let rt = Runtime::passthrough("grpc").await;
    let mut client = connect(&rt.url).await;
    let running = task_of(
        client
            .send_message(call(send_at_once("c-1", "***SLEEP 60s never")))
            .await
            .expect("started")
            .into_inner(),
    );
    assert_eq!(state(&running), v1::TaskState::Working);
    let subscription = client
        .subscribe_to_task(call(v1::SubscribeToTaskRequest {
            id: running.id.clone(),
            ..Default::default()
        }))
        .await
        .expect("subscribed")
        .into_inner();
    let canceled = client
        .cancel_task(call(v1::CancelTaskRequest {
            id: running.id.clone(),
            ..Default::default()
        }))
        .await
        .expect("canceled")
        .into_inner();
    assert_eq!(state(&canceled), v1::TaskState::Canceled);
    let heard = hear_all(subscription).await;
    assert_eq!(heard.kinds.first(), Some(&"task"), "{heard:?}");
    assert_eq!(heard.state, Some(v1::TaskState::Canceled), "{heard:?}");
}

/// Every refusal of the operations, with its code (§5.4) and `ErrorInfo` (§10.6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_carries_its_status_code_and_error_info() {
    let rt = Runtime::passthrough("grpc").await;
    let mut client = connect(&rt.url).await;
    let done = task_of(
        client
            .send_message(call(send("e-1", "done")))
            .await
            .expect("sent")
            .into_inner(),
    );
    let by_id = |id: &str| v1::GetTaskRequest {
        id: id.to_owned(),
        ..Default::default()
    };
    let mut refusals = Vec::new();
    refusals.push((
        "unknown task",
        client.get_task(call(by_id("no-such-task"))).await.err(),
        Code::NotFound,
        "TASK_NOT_FOUND",
    ));
    let cancel = v1::CancelTaskRequest {
        id: done.id.clone(),
        ..Default::default()
    };
    refusals.push((
        "cancel a finished task",
        client.cancel_task(call(cancel)).await.err(),
        Code::FailedPrecondition,
        "TASK_NOT_CANCELABLE",
    ));
    let subscribe = v1::SubscribeToTaskRequest {
        id: done.id.clone(),
        ..Default::default()
    };
    refusals.push((
        "subscribe to a finished task",
        client.subscribe_to_task(call(subscribe)).await.err(),
        Code::FailedPrecondition,
        "UNSUPPORTED_OPERATION",
    ));
    let mut more = send("e-2", "more");
    if let Some(message) = more.message.as_mut() {
        message.task_id.clone_from(&done.id);
    }
    refusals.push((
        "a message to a finished task",
        client.send_message(call(more)).await.err(),
        Code::FailedPrecondition,
        "UNSUPPORTED_OPERATION",
    ));
    refusals.push((
        "a send without a message",
        client
            .send_message(call(v1::SendMessageRequest::default()))
            .await
            .err(),
        Code::InvalidArgument,
        "INVALID_PARAMS",
    ));
    let mut negative = by_id(&done.id);
    negative.history_length = Some(-1);
    refusals.push((
        "a negative historyLength",
        client.get_task(call(negative)).await.err(),
        Code::InvalidArgument,
        "INVALID_PARAMS",
    ));
    let mut other_version = call(send("e-3", "hi"));
    other_version.metadata_mut().insert(
        "a2a-version",
        tonic::metadata::MetadataValue::from_static("99.0"),
    );
    refusals.push((
        "another protocol version",
        client.send_message(other_version).await.err(),
        Code::Unimplemented,
        "VERSION_NOT_SUPPORTED",
    ));
    refusals.push((
        "no version at all (0.3, §3.6)",
        client
            .send_message(tonic::Request::new(send("e-4", "hi")))
            .await
            .err(),
        Code::Unimplemented,
        "VERSION_NOT_SUPPORTED",
    ));
    for (what, refused, code, expected) in refusals {
        let status = refused.unwrap_or_else(|| panic!("{what}: refused"));
        assert_eq!(status.code(), code, "{what}: {status:?}");
        assert_eq!(
            reason(&status),
            (expected.to_owned(), "a2a-protocol.org".to_owned()),
            "{what}"
        );
        assert!(
            !status.message().is_empty(),
            "{what}: a message for a person"
        );
    }
    // Nothing refused was run: the one task is the first.
    let listed = client
        .list_tasks(call(v1::ListTasksRequest::default()))
        .await
        .expect("listed")
        .into_inner();
    assert_eq!(listed.total_size, 1, "{listed:?}");
}

/// A method of another service (v0.3's package, gRPC health) is `UNIMPLEMENTED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_of_another_service_is_unimplemented() {
    let rt = Runtime::passthrough("grpc").await;
    let channel = tonic::transport::Channel::from_shared(rt.url.clone())
        .expect("a URL")
        .connect()
        .await
        .expect("connects");
    for path in [
        "/a2a.v1.A2AService/SendMessage",
        "/grpc.health.v1.Health/Check",
        "/lf.a2a.v1.A2AService/NoSuchMethod",
    ] {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready().await.expect("ready");
        let answer: Result<tonic::Response<v1::Task>, _> = grpc
            .unary(
                call(send("u-1", "hi")),
                http::uri::PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::default(),
            )
            .await;
        let status = answer.expect_err("no such method");
        assert_eq!(status.code(), Code::Unimplemented, "{path}: {status:?}");
    }
}

/// A message over the body limit is refused before it is read whole, and the runtime serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_body_limit_is_resource_exhausted() {
    let rt =
        Runtime::passthrough_with("grpc", |config| config.limits.max_body_bytes = 64 * 1024).await;
    let mut client = connect(&rt.url).await;
    let big = "x".repeat(100 * 1024);
    let status = client
        .send_message(call(send("b-1", &big)))
        .await
        .expect_err("too big");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let task = task_of(
        client
            .send_message(call(send("b-2", "small")))
            .await
            .expect("the next call is served")
            .into_inner(),
    );
    assert_eq!(state(&task), v1::TaskState::Completed);
}

/// A client that reads the first event and goes away stops nothing: the turn finishes and is
/// stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_mid_stream_stops_nothing() {
    let rt = Runtime::passthrough("grpc").await;
    let mut client = connect(&rt.url).await;
    let mut stream = client
        .send_streaming_message(call(send("gone-1", "***SLEEP 300ms finished anyway")))
        .await
        .expect("a stream")
        .into_inner();
    let first = stream.message().await.expect("an event").expect("the task");
    let Some(v1::stream_response::Payload::Task(task)) = first.payload else {
        panic!("the Task first: {first:?}");
    };
    drop(stream);
    drop(client);
    let mut client = connect(&rt.url).await;
    let id = task.id.clone();
    wait_until("the turn finished", Duration::from_secs(10), || {
        let mut client = client.clone();
        let id = id.clone();
        async move {
            let got = client
                .get_task(call(v1::GetTaskRequest {
                    id,
                    ..Default::default()
                }))
                .await;
            got.is_ok_and(|t| state(t.get_ref()) == v1::TaskState::Completed)
        }
    })
    .await;
    let done = client
        .get_task(call(v1::GetTaskRequest {
            id,
            ..Default::default()
        }))
        .await
        .expect("found")
        .into_inner();
    let text = &done.artifacts[0].parts[0].content;
    assert_eq!(
        text,
        &Some(v1::part::Content::Text("finished anyway".to_owned()))
    );
}

/// A reader that stops reading holds up neither the turn nor its memory: the turn finishes
/// while the stream waits unread, and the reader then gets the end (chunks it fell too far
/// behind on are dropped, and the answer comes whole).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_reading_holds_up_nothing_and_still_gets_the_end() {
    const KEY: &str = "sk-grpc";
    let fake = FakeLlm::start(KEY, &["gpt-grpc"]).await;
    // 3,000 words of 500 bytes in 1,500 chunks: 1.5 MB of events, past the reader's 64 KiB
    // HTTP/2 window and the 1 MiB the turn's queue holds for it.
    let word = format!("{} ", "w".repeat(499));
    let answer = word.repeat(3_000);
    fake.script([Reply::Text(answer.clone())]);
    let yaml = support::runtime::on_fake_openai(
        &fake.openai_base_url,
        KEY,
        "gpt-grpc",
        "    {}",
        "  slow: { instruction: Talk. }\n",
    );
    let rt = Runtime::start(&yaml).await;
    let mut client = connect_with_window(&rt.url, 64 * 1024).await;
    let mut stream = client
        .send_streaming_message(call(send("slow-1", "talk")))
        .await
        .expect("a stream")
        .into_inner();
    let mut heard = Heard::default();
    let first = stream.message().await.expect("an event").expect("the task");
    heard.hear(first.clone());
    let Some(v1::stream_response::Payload::Task(task)) = first.payload else {
        panic!("the Task first: {first:?}");
    };
    let other = connect(&rt.url).await;
    let id = task.id.clone();
    wait_until("the turn finished unread", Duration::from_mins(1), || {
        let mut other = other.clone();
        let id = id.clone();
        async move {
            let got = other
                .get_task(call(v1::GetTaskRequest {
                    id,
                    history_length: Some(0),
                    ..Default::default()
                }))
                .await;
            got.is_ok_and(|t| state(t.get_ref()) == v1::TaskState::Completed)
        }
    })
    .await;
    while let Some(response) = stream.message().await.expect("the stream goes on") {
        heard.hear(response);
    }
    assert_eq!(heard.state, Some(v1::TaskState::Completed));
    assert_eq!(heard.kinds.last(), Some(&"status"));
    assert_eq!(
        heard.text.trim_end().len(),
        answer.trim_end().len(),
        "the whole answer"
    );
    assert_eq!(heard.text.trim_end(), answer.trim_end());
}

/// Authentication is the other bindings': no credential is `UNAUTHENTICATED`, a key in
/// `authorization` passes, a request naming another tenant than the key's is
/// `PERMISSION_DENIED`, and another principal's task is not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_authenticated_and_keep_to_their_tenant() {
    let dir = tempfile::tempdir().expect("a dir");
    let keys = dir.path().join("api-keys.yaml");
    api_key_file(
        &keys,
        &[
            ("key-of-ci", "ci-bot", "acme"),
            ("key-of-bob", "bob", "acme"),
        ],
    );
    let rt = support::process::runtime()
        .env("AUTH_API_KEYS_FILE", keys.to_str().expect("utf-8"))
        .start();
    let mut client = connect(rt.url("").trim_end_matches('/')).await;
    let with_key = |key: &str, request: v1::SendMessageRequest| {
        let mut request = call(request);
        let bearer = format!("Bearer {key}").parse().expect("ASCII");
        request.metadata_mut().insert("authorization", bearer);
        request
    };

    let status = client
        .send_message(call(send("a-1", "who?")))
        .await
        .expect_err("no credential");
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert_eq!(reason(&status).0, "UNAUTHENTICATED");
    let status = client
        .send_message(with_key("key-of-nobody", send("a-2", "who?")))
        .await
        .expect_err("an unknown key");
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");

    let task = task_of(
        client
            .send_message(with_key("key-of-ci", send("a-3", "***INPUT which?")))
            .await
            .expect("a known key")
            .into_inner(),
    );
    assert_eq!(state(&task), v1::TaskState::InputRequired);

    let mut elsewhere = send("a-4", "hi");
    elsewhere.tenant = "globex".to_owned();
    let status = client
        .send_message(with_key("key-of-ci", elsewhere))
        .await
        .expect_err("another tenant");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let mut at_home = send("a-5", "hi");
    at_home.tenant = "acme".to_owned();
    client
        .send_message(with_key("key-of-ci", at_home))
        .await
        .expect("its own tenant");

    let get = |key: &str| {
        let mut request = call(v1::GetTaskRequest {
            id: task.id.clone(),
            ..Default::default()
        });
        let bearer = format!("Bearer {key}").parse().expect("ASCII");
        request.metadata_mut().insert("authorization", bearer);
        request
    };
    client
        .get_task(get("key-of-ci"))
        .await
        .expect("its owner sees it");
    let status = client
        .get_task(get("key-of-bob"))
        .await
        .expect_err("another principal");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
}
