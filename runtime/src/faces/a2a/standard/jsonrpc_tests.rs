//! The JSON-RPC binding on `POST /`, without a socket: every task it writes validates against
//! the A2A v1.0 schema, and each rule of the spec is answered with the spec's error.

use axum::body::Body;
use axum::http::{Request, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::faces::a2a::tests::passthrough;
use crate::faces::a2a::{A2aFace, router};
use daedalus_contract::Schema;
use daedalus_contract::write::a2a_v1;

/// Calls `method` with `params` as A2A 1.0 (or with `version`, `None` for no header).
async fn rpc_as(state: &A2aFace, version: Option<&str>, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = Request::post("/").header(header::CONTENT_TYPE, "application/json");
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let response = router(state.clone())
        .oneshot(request.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        200,
        "JSON-RPC answers 200, errors included"
    );
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["jsonrpc"], "2.0");
    assert_eq!(answer["id"], 1);
    answer
}

async fn rpc(state: &A2aFace, method: &str, params: Value) -> Value {
    rpc_as(state, Some("1.0"), method, params).await
}

fn send(message_id: &str, text: &str) -> Value {
    json!({"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// The result's task, checked against the A2A v1.0 schema.
fn task_of(answer: &Value) -> Value {
    let task = answer["result"]
        .get("task")
        .unwrap_or(&answer["result"])
        .clone();
    if let Err(e) = Schema::A2aV1Task.validate(&task) {
        panic!("not an A2A v1.0 Task: {e}\n{task}");
    }
    task
}

/// The error's code and `ErrorInfo` reason.
fn error_of(answer: &Value) -> (i64, String) {
    assert!(answer.get("result").is_none(), "{answer}");
    let reason = answer["error"]["data"][0]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (answer["error"]["code"].as_i64().unwrap(), reason)
}

#[tokio::test]
async fn send_message_makes_a_new_task_with_a_server_id_and_get_task_finds_it() {
    let state = passthrough();
    let first = task_of(&rpc(&state, "SendMessage", send("m-1", "hello")).await);
    assert_eq!(first["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(first["artifacts"][0]["parts"][0]["text"], "hello");
    let id = first["id"].as_str().unwrap().to_owned();
    assert_ne!(id, "m-1", "the server names a new task");

    let again = task_of(&rpc(&state, "SendMessage", send("m-1", "hello")).await);
    assert_ne!(
        again["id"], first["id"],
        "a repeated messageId is a new task, never a replay"
    );

    let got = task_of(&rpc(&state, "GetTask", json!({"id": id})).await);
    assert_eq!(got["id"], first["id"]);
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        error_of(&rpc(&state, "GetTask", json!({"id": "nobody"})).await),
        (-32001, "TASK_NOT_FOUND".to_owned())
    );
}

#[tokio::test]
async fn a_message_to_an_unknown_or_finished_task_is_refused_as_the_spec_says() {
    let state = passthrough();
    let mut unknown = send("m-2", "hi");
    unknown["message"]["taskId"] = json!("no-such-task");
    assert_eq!(
        error_of(&rpc(&state, "SendMessage", unknown).await),
        (-32001, "TASK_NOT_FOUND".to_owned())
    );
    let done = task_of(&rpc(&state, "SendMessage", send("m-3", "hi")).await);
    let mut more = send("m-4", "more");
    more["message"]["taskId"] = done["id"].clone();
    assert_eq!(
        error_of(&rpc(&state, "SendMessage", more).await),
        (-32004, "UNSUPPORTED_OPERATION".to_owned())
    );
    assert_eq!(
        error_of(&rpc(&state, "CancelTask", json!({"id": done["id"]})).await),
        (-32002, "TASK_NOT_CANCELABLE".to_owned())
    );
}

#[tokio::test]
async fn input_required_is_continued_by_its_task_id_or_canceled() {
    let state = passthrough();
    let asked = task_of(&rpc(&state, "SendMessage", send("m-5", "***INPUT which one?")).await);
    assert_eq!(asked["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let mut answer = send("m-6", "the blue one");
    answer["message"]["taskId"] = asked["id"].clone();
    let continued = task_of(&rpc(&state, "SendMessage", answer).await);
    assert_eq!(continued["id"], asked["id"]);
    assert_eq!(continued["status"]["state"], "TASK_STATE_COMPLETED");

    let asked = task_of(&rpc(&state, "SendMessage", send("m-7", "***INPUT why?")).await);
    let canceled = task_of(&rpc(&state, "CancelTask", json!({"id": asked["id"]})).await);
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
}

#[tokio::test]
async fn a_running_task_is_working_until_canceled_and_then_canceled() {
    let state = passthrough();
    let mut slow = send("m-8", "***SLEEP 60s late");
    slow["configuration"] = json!({"returnImmediately": true});
    let started = task_of(&rpc(&state, "SendMessage", slow).await);
    assert_eq!(started["status"]["state"], "TASK_STATE_WORKING");
    let id = started["id"].clone();
    let now = task_of(&rpc(&state, "GetTask", json!({"id": id})).await);
    assert_eq!(now["status"]["state"], "TASK_STATE_WORKING");
    let canceled = task_of(&rpc(&state, "CancelTask", json!({"id": id})).await);
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    let after = task_of(&rpc(&state, "GetTask", json!({"id": id})).await);
    assert_eq!(after["status"]["state"], "TASK_STATE_CANCELED");
}

#[tokio::test]
async fn versions_methods_and_params_get_the_spec_errors() {
    let state = passthrough();
    let old = rpc_as(&state, None, "SendMessage", send("m-9", "hi")).await;
    assert_eq!(error_of(&old), (-32009, "VERSION_NOT_SUPPORTED".to_owned()));
    let patch = rpc_as(&state, Some("1.0.1"), "GetTask", json!({"id": "x"})).await;
    assert_eq!(
        error_of(&patch).0,
        -32001,
        "a patch version is the same protocol"
    );
    assert_eq!(
        error_of(&rpc(&state, "Frobnicate", json!({})).await),
        (-32601, "METHOD_NOT_FOUND".to_owned())
    );
    assert_eq!(
        error_of(
            &rpc(
                &state,
                "GetTaskPushNotificationConfig",
                json!({"taskId": "x"})
            )
            .await
        ),
        (-32001, "TASK_NOT_FOUND".to_owned()),
        "a config of a task that is not there"
    );
    let off = crate::faces::a2a::tests::state_with(
        std::sync::Arc::new(crate::agents::agent_loop::Passthrough),
        |c| {
            c.push.enabled = false;
        },
    );
    assert_eq!(
        error_of(&rpc(&off, "GetTaskPushNotificationConfig", json!({})).await),
        (-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED".to_owned())
    );
    assert_eq!(
        error_of(&rpc(&state, "GetTask", json!({"historyLength": 1})).await).0,
        -32602
    );
}

#[tokio::test]
async fn a_body_that_is_jsonrpc_but_not_a_request_is_an_invalid_request() {
    let response = router(passthrough())
        .oneshot(
            Request::post("/")
                .header(header::CONTENT_TYPE, "application/json")
                .header("A2A-Version", "1.0")
                .body(Body::from(r#"{"jsonrpc": "2.0", "id": 3}"#))
                .unwrap(),
        )
        .await
        .unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
}

#[tokio::test]
async fn a_streamed_message_is_json_rpc_responses_of_v1_events_that_simply_end() {
    let body = json!({"jsonrpc": "2.0", "id": "s-1", "method": "SendStreamingMessage",
        "params": send("m-10", "stream me")});
    let response = router(passthrough())
        .oneshot(
            Request::post("/")
                .header(header::CONTENT_TYPE, "application/json")
                .header("A2A-Version", "1.0")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let results: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|data| {
            let response: Value = serde_json::from_str(data.trim()).unwrap();
            assert_eq!(response["jsonrpc"], "2.0");
            assert_eq!(
                response["id"], "s-1",
                "each data is a whole JSON-RPC response"
            );
            response["result"].clone()
        })
        .collect();
    for result in &results {
        if let Err(e) = Schema::A2aV1StreamResponse.validate(result) {
            panic!("not an A2A v1.0 StreamResponse: {e}\n{result}");
        }
        assert!(
            !result.to_string().contains("\"final\""),
            "v1 has no final: {result}"
        );
    }
    assert!(
        results[0].get("task").is_some(),
        "the Task comes first: {results:?}"
    );
    let last = results.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let text_out: String = results
        .iter()
        .filter_map(|r| r["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text_out, "stream me");
}

/// The JSON-RPC responses of an SSE body, each one's `result` checked as a v1 StreamResponse.
fn stream_results(text: &str, id: &Value) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|data| {
            let response: Value = serde_json::from_str(data.trim()).unwrap();
            assert_eq!(
                &response["id"], id,
                "each data is a whole JSON-RPC response"
            );
            let result = response["result"].clone();
            if let Err(e) = Schema::A2aV1StreamResponse.validate(&result) {
                panic!("not an A2A v1.0 StreamResponse: {e}\n{result}");
            }
            result
        })
        .collect()
}

/// Calls `method` and reads its whole SSE answer.
async fn rpc_stream(state: &A2aFace, method: &str, params: Value) -> Vec<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let response = router(state.clone())
        .oneshot(
            Request::post("/")
                .header(header::CONTENT_TYPE, "application/json")
                .header("A2A-Version", "1.0")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    stream_results(std::str::from_utf8(&bytes).unwrap(), &json!(7))
}

#[tokio::test]
async fn send_message_answers_a_send_message_response_with_the_tasks_own_history() {
    let state = passthrough();
    let answer = rpc(&state, "SendMessage", send("m-h", "remember me")).await;
    if let Err(e) = Schema::A2aV1SendMessageResponse.validate(&answer["result"]) {
        panic!("not a SendMessageResponse: {e}\n{answer}");
    }
    let history = answer["result"]["task"]["history"].as_array().unwrap();
    assert_eq!(history.len(), 1, "the task's own message: {history:?}");
    assert_eq!(history[0]["messageId"], "m-h");
    let mut cut = send("m-h2", "no history");
    cut["configuration"] = json!({"historyLength": 0});
    let answer = rpc(&state, "SendMessage", cut).await;
    assert!(
        answer["result"]["task"].get("history").is_none(),
        "{answer}"
    );
}

#[tokio::test]
async fn list_tasks_filters_pages_and_shows_artifacts_only_when_asked() {
    let state = passthrough();
    let mut in_context = Vec::new();
    for i in 0..5 {
        let mut message = send(&format!("l-{i}"), &format!("task {i}"));
        message["message"]["contextId"] = json!("ctx-list");
        in_context.push(task_of(&rpc(&state, "SendMessage", message).await)["id"].clone());
    }
    let asking = task_of(&rpc(&state, "SendMessage", send("l-q", "***INPUT which?")).await);

    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = rpc(
            &state,
            "ListTasks",
            json!({"contextId": "ctx-list", "pageSize": 2, "pageToken": token}),
        )
        .await;
        let result = &page["result"];
        if let Err(e) = Schema::A2aV1ListTasksResponse.validate(result) {
            panic!("not a ListTasksResponse: {e}\n{result}");
        }
        assert_eq!(result["totalSize"], 5);
        assert_eq!(result["pageSize"], 2);
        for task in result["tasks"].as_array().unwrap() {
            assert!(
                task.get("artifacts").is_none(),
                "omitted unless asked: {task}"
            );
            seen.push(task["id"].clone());
        }
        token = result["nextPageToken"].as_str().unwrap().to_owned();
        if token.is_empty() {
            break;
        }
    }
    let mut expected = in_context.clone();
    expected.reverse();
    assert_eq!(seen, expected, "newest first, each once");

    let waiting = rpc(
        &state,
        "ListTasks",
        json!({"status": "TASK_STATE_INPUT_REQUIRED", "includeArtifacts": true}),
    )
    .await;
    let tasks = waiting["result"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0]["id"], asking["id"]);
    let with_artifacts = rpc(&state, "ListTasks", json!({"includeArtifacts": true})).await;
    let completed = with_artifacts["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == in_context[0])
        .unwrap()
        .clone();
    assert_eq!(completed["artifacts"][0]["parts"][0]["text"], "task 0");

    for bad in [
        json!({"pageSize": 0}),
        json!({"pageSize": 101}),
        json!({"pageToken": "forged"}),
        json!({"status": "TASK_STATE_SLEEPING"}),
        json!({"statusTimestampAfter": "yesterday"}),
    ] {
        assert_eq!(
            error_of(&rpc(&state, "ListTasks", bad.clone()).await).0,
            -32602,
            "{bad}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_subscriber_to_a_running_task_gets_it_then_every_later_event_and_the_end() {
    let state = passthrough();
    let mut slow = send("s-1", "***SLEEP 300ms late answer");
    slow["configuration"] = json!({"returnImmediately": true});
    let started = task_of(&rpc(&state, "SendMessage", slow).await);
    let events = rpc_stream(&state, "SubscribeToTask", json!({"id": started["id"]})).await;
    let first = &events[0]["task"];
    assert_eq!(first["id"], started["id"], "the Task first: {events:?}");
    assert_eq!(first["status"]["state"], "TASK_STATE_WORKING");
    let last = events.last().unwrap();
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let text: String = events
        .iter()
        .filter_map(|r| r["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "late answer", "no chunk lost: {events:?}");

    let finished = rpc(&state, "SubscribeToTask", json!({"id": started["id"]})).await;
    assert_eq!(
        error_of(&finished),
        (-32004, "UNSUPPORTED_OPERATION".to_owned()),
        "a finished task has nothing to subscribe to"
    );
    assert_eq!(
        error_of(&rpc(&state, "SubscribeToTask", json!({"id": "nobody"})).await),
        (-32001, "TASK_NOT_FOUND".to_owned())
    );
}

#[tokio::test]
async fn a_subscriber_to_a_task_waiting_for_input_hears_its_cancel() {
    let state = passthrough();
    let asking = task_of(&rpc(&state, "SendMessage", send("w-1", "***INPUT which?")).await);
    let listening = {
        let state = state.clone();
        let id = asking["id"].clone();
        tokio::spawn(async move { rpc_stream(&state, "SubscribeToTask", json!({"id": id})).await })
    };
    // The cancel comes once the subscriber holds its subscription.
    let id = asking["id"].as_str().unwrap().to_owned();
    wait_until(|| state.core().turns().task_subscribers(&id) == 1).await;
    let canceled = task_of(&rpc(&state, "CancelTask", json!({"id": asking["id"]})).await);
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    let events = listening.await.unwrap();
    assert!(!events.is_empty(), "the subscriber heard the task");
    assert_eq!(events[0]["task"]["id"], asking["id"]);
    let last = events.last().unwrap();
    let state_of = |r: &Value| {
        r["statusUpdate"]["status"]["state"]
            .as_str()
            .or(r["task"]["status"]["state"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(state_of(last), "TASK_STATE_CANCELED", "{events:?}");
}

/// Waits (yielding, up to 10 s) until `ready` holds.
async fn wait_until(ready: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !ready() {
        assert!(tokio::time::Instant::now() < deadline, "never ready");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn without_authentication_there_is_no_extended_card_and_the_card_says_so() {
    let state = passthrough();
    let refused = rpc(&state, "GetExtendedAgentCard", json!({})).await;
    assert_eq!(
        refused["error"]["code"], -32004,
        "UnsupportedOperationError: {refused}"
    );
    let card = serde_json::to_value(a2a_v1::of(&*state.card())).unwrap();
    assert_eq!(card["capabilities"]["extendedAgentCard"], false);
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    let v03 = rpc_as(
        &state,
        None,
        "agent/getAuthenticatedExtendedCard",
        json!({}),
    )
    .await;
    assert_eq!(v03["error"]["code"], -32004, "{v03}");
}

#[tokio::test]
async fn with_streaming_off_the_card_says_so_and_streams_are_refused() {
    let state = crate::faces::a2a::tests::state_with(
        std::sync::Arc::new(crate::agents::agent_loop::Passthrough),
        |config| config.a2a_streaming = false,
    );
    let card = serde_json::to_value(a2a_v1::of(&*state.card())).unwrap();
    assert_eq!(card["capabilities"]["streaming"], false);
    let send = json!({"message": {"role": "ROLE_USER", "messageId": "m-1",
        "parts": [{"text": "hi"}]}});
    for (method, params) in [
        ("SendStreamingMessage", send.clone()),
        ("SubscribeToTask", json!({"id": "no-such-task"})),
    ] {
        let refused = rpc(&state, method, params).await;
        assert_eq!(refused["error"]["code"], -32004, "{method}: {refused}");
    }
    // The same message, unstreamed, is answered.
    let answered = rpc(&state, "SendMessage", send).await;
    assert!(answered.get("result").is_some(), "{answered}");
}

#[tokio::test]
async fn a_jsonrpc_request_in_another_media_type_gets_the_spec_error() {
    let body = json!({"jsonrpc": "2.0", "id": "ct-1", "method": "GetTask", "params": {"id": "x"}});
    let response = router(passthrough())
        .oneshot(
            Request::post("/")
                .header(header::CONTENT_TYPE, "text/plain")
                .header("A2A-Version", "1.0")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        200,
        "a JSON-RPC error, not the contract's 415"
    );
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["id"], "ct-1");
    assert_eq!(
        error_of(&answer),
        (-32005, "CONTENT_TYPE_NOT_SUPPORTED".to_owned())
    );
}

#[tokio::test]
async fn history_length_shows_the_last_messages_zero_none_and_unset_each_operations_default() {
    let state = passthrough();
    let first = rpc(&state, "SendMessage", send("hl-1", "one")).await;
    let task_id = first["result"]["task"]["id"].as_str().unwrap().to_owned();
    let history_of =
        |answer: &Value, at: &str| answer.pointer(at).and_then(Value::as_array).map(Vec::len);
    // SendMessage and GetTask: unset shows the task's own messages, all of them.
    let own = history_of(&first, "/result/task/history").expect("its history");
    assert!(own >= 1, "{first}");
    let got = rpc(&state, "GetTask", json!({"id": task_id})).await;
    assert_eq!(history_of(&got, "/result/history"), Some(own), "{got}");
    let last = rpc(
        &state,
        "GetTask",
        json!({"id": task_id, "historyLength": 1}),
    )
    .await;
    assert_eq!(history_of(&last, "/result/history"), Some(1), "{last}");
    let none = rpc(
        &state,
        "GetTask",
        json!({"id": task_id, "historyLength": 0}),
    )
    .await;
    assert!(none["result"].get("history").is_none(), "{none}");
    // ListTasks: unset shows none; a length, that many.
    let context = first["result"]["task"]["contextId"].clone();
    let listed = rpc(&state, "ListTasks", json!({"contextId": context})).await;
    assert!(
        listed["result"]["tasks"][0].get("history").is_none(),
        "{listed}"
    );
    let listed = rpc(
        &state,
        "ListTasks",
        json!({"contextId": context, "historyLength": 1}),
    )
    .await;
    assert_eq!(
        history_of(&listed, "/result/tasks/0/history"),
        Some(1),
        "{listed}"
    );
    // A negative length is the caller's error.
    let refused = rpc(
        &state,
        "GetTask",
        json!({"id": task_id, "historyLength": -1}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[tokio::test]
async fn a_send_that_returns_at_once_answers_its_task_as_it_began_with_the_history_asked() {
    let state = passthrough();
    // The agent answers at once: the answer is still the task as its turn began it, not
    // whatever the turn reached by the time the face looked (it does not look again).
    let mut quick = send("at-once-1", "quick answer");
    quick["configuration"] = json!({"returnImmediately": true});
    let began = task_of(&rpc(&state, "SendMessage", quick).await);
    assert_eq!(began["status"]["state"], "TASK_STATE_WORKING", "{began}");
    assert_eq!(began["history"][0]["parts"][0]["text"], "quick answer");
    assert!(began.get("artifacts").is_none(), "{began}");

    let mut cut = send("at-once-2", "***SLEEP 60s late");
    cut["configuration"] = json!({"returnImmediately": true, "historyLength": 0});
    let began = task_of(&rpc(&state, "SendMessage", cut).await);
    assert_eq!(began["status"]["state"], "TASK_STATE_WORKING", "{began}");
    assert!(began.get("history").is_none(), "historyLength 0: {began}");
}
