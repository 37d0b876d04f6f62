//! Both session stores keep the same promises: SQLite (one process) and the NATS JetStream KV
//! bucket (several replicas) against a real `nats-server`; and the default store, in the task
//! store's file, reading in the conversations an earlier version kept apart.

mod support;

use std::sync::Arc;
use std::time::Duration;

use daedalus_runtime::agents::llm::ToolCall;
use daedalus_runtime::stores::conversations::{
    ConversationStore, NatsKvStore, NewRow, RowRole, RowStatus, SqliteStore,
};
use daedalus_test_kit::NatsServer;
use futures::StreamExt;
use serde_json::json;

fn row(role: RowRole, content: &str, status: RowStatus) -> NewRow {
    NewRow::new(role, content, status)
}

/// Compaction on every store: the rows through a turn go, a summary takes the last one's
/// place and sorts first, rows after it stay as they were, a user row keeps its message id,
/// and a second compaction replaces the first summary.
async fn compacts(store: &dyn ConversationStore) {
    let context = "compact me";
    let mut rows: Vec<NewRow> = (0..6)
        .flat_map(|i| {
            let mut question = row(RowRole::User, &format!("q{i}"), RowStatus::Complete);
            question.message_id = Some(format!("client-{i}"));
            [
                question,
                row(RowRole::Assistant, &format!("a{i}"), RowStatus::Complete),
            ]
        })
        .collect();
    rows.push(row(RowRole::User, "unsettled", RowStatus::Pending));
    store
        .append(context, rows)
        .await
        .expect("the store answers");

    let removed = store
        .compact(context, 3, Some("q0 to q1, summarized".into()))
        .await
        .expect("the store answers");
    assert_eq!(removed, 4, "turns 0 to 3");
    let after = store
        .rows(context, usize::MAX)
        .await
        .expect("the store answers");
    assert_eq!(after[0].role, RowRole::Summary);
    assert_eq!(after[0].content, "q0 to q1, summarized");
    assert_eq!(after[0].status, RowStatus::Complete);
    let turns: Vec<i64> = after.iter().map(|r| r.turn).collect();
    assert_eq!(turns, [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
    assert_eq!(after[1].content, "q2");
    assert_eq!(after[1].message_id.as_deref(), Some("client-2"));
    assert_eq!(
        after[9].status,
        RowStatus::Pending,
        "later rows are untouched"
    );

    // Again, past the summary, without one (truncate): the old summary goes too.
    let removed = store
        .compact(context, 7, None)
        .await
        .expect("the store answers");
    assert_eq!(removed, 5, "the summary and turns 4 to 7");
    let after = store
        .rows(context, usize::MAX)
        .await
        .expect("the store answers");
    assert_eq!(after[0].content, "q4");
    assert!(after.iter().all(|r| r.role != RowRole::Summary));
    // New rows still get new turns.
    let ids = store
        .append(
            context,
            vec![row(RowRole::User, "next", RowStatus::Complete)],
        )
        .await
        .expect("the store answers");
    let last = store.rows(context, 1).await.expect("the store answers");
    assert_eq!(last[0].content, "next");
    assert_eq!(last[0].turn, 13);
    assert_eq!(ids.len(), 1);
    // A context that does not exist compacts to nothing.
    assert_eq!(
        store
            .compact("nobody", 5, None)
            .await
            .expect("the store answers"),
        0
    );
}

/// The promises every store keeps: ordered monotonic turns per context, tool calls and the
/// ids results answer round-trip, status changes stick, contexts never mix.
async fn keeps_conversations(store: &dyn ConversationStore) {
    let mut assistant = row(RowRole::Assistant, "", RowStatus::Pending);
    assistant.tool_calls = vec![ToolCall {
        id: "c1".into(),
        name: "fixture__add".into(),
        arguments: json!({"a": 1, "b": 2}),
    }];
    let ids = store
        .append(
            "ctx/one with spaces",
            vec![
                row(RowRole::User, "add 1 and 2", RowStatus::Pending),
                assistant,
            ],
        )
        .await
        .expect("the store answers");
    store
        .append(
            "other",
            vec![row(RowRole::User, "elsewhere", RowStatus::Complete)],
        )
        .await
        .expect("the store answers");
    let mut tool = row(RowRole::Tool, "3", RowStatus::Pending);
    tool.tool_call_id = Some("c1".into());
    tool.is_error = true;
    let more = store
        .append("ctx/one with spaces", vec![tool])
        .await
        .expect("the store answers");
    let all: Vec<i64> = ids.iter().chain(&more).copied().collect();
    store
        .set_status("ctx/one with spaces", &all, RowStatus::Complete)
        .await
        .expect("the store answers");

    let rows = store
        .rows("ctx/one with spaces", usize::MAX)
        .await
        .expect("the store answers");
    assert_eq!(rows.iter().map(|r| r.turn).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(rows[0].content, "add 1 and 2");
    assert_eq!(rows[1].tool_calls[0].arguments, json!({"a": 1, "b": 2}));
    assert_eq!(rows[2].tool_call_id.as_deref(), Some("c1"));
    assert!(rows[2].is_error);
    assert!(rows.iter().all(|r| r.status == RowStatus::Complete));
    let other = store
        .rows("other", usize::MAX)
        .await
        .expect("the store answers");
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].content, "elsewhere");
    assert!(
        store
            .rows("never-used", usize::MAX)
            .await
            .expect("the store answers")
            .is_empty()
    );
}

/// Concurrent appends to one context never reuse a turn.
async fn never_reuses_a_turn(store: Arc<dyn ConversationStore>) {
    let writers = (0..20).map(|i| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .append(
                    "busy",
                    vec![
                        row(RowRole::User, &format!("q{i}"), RowStatus::Complete),
                        row(RowRole::Assistant, &format!("a{i}"), RowStatus::Complete),
                    ],
                )
                .await
                .expect("the store answers")
        })
    });
    for w in writers {
        w.await.expect("the store answers");
    }
    let rows = store
        .rows("busy", usize::MAX)
        .await
        .expect("the store answers");
    assert_eq!(rows.len(), 40);
    assert_eq!(
        rows.iter().map(|r| r.turn).collect::<Vec<_>>(),
        (0..40).collect::<Vec<_>>()
    );
    // Each writer's two rows are adjacent: a reservation is contiguous.
    for pair in rows.chunks(2) {
        assert_eq!(pair[0].content[1..], pair[1].content[1..], "{pair:?}");
    }
}

#[tokio::test]
async fn sqlite_keeps_and_compacts_conversations_and_never_reuses_a_turn() {
    let store = SqliteStore::open(":memory:").expect("the store answers");
    keeps_conversations(&store).await;
    compacts(&store).await;
    never_reuses_a_turn(Arc::new(store)).await;
}

#[tokio::test]
async fn nats_kv_keeps_and_compacts_conversations_and_never_reuses_a_turn() {
    let nats = NatsServer::start();
    let store = NatsKvStore::open(&nats.url(), "sessions", Duration::from_mins(1))
        .await
        .expect("the store answers");
    keeps_conversations(&store).await;
    compacts(&store).await;
    // Two replicas: two stores on one bucket.
    let replica = NatsKvStore::open(&nats.url(), "sessions", Duration::from_mins(1))
        .await
        .expect("the store answers");
    store
        .append(
            "shared",
            vec![row(RowRole::User, "from a", RowStatus::Complete)],
        )
        .await
        .expect("the store answers");
    replica
        .append(
            "shared",
            vec![row(RowRole::User, "from b", RowStatus::Complete)],
        )
        .await
        .expect("the store answers");
    let seen: Vec<String> = store
        .rows("shared", usize::MAX)
        .await
        .expect("the store answers")
        .into_iter()
        .map(|r| r.content)
        .collect();
    assert_eq!(seen, ["from a", "from b"]);
    never_reuses_a_turn(Arc::new(replica)).await;
}

#[tokio::test]
async fn nats_kv_conversations_survive_a_server_restart() {
    let mut nats = NatsServer::start();
    let store = NatsKvStore::open(&nats.url(), "sessions", Duration::from_mins(1))
        .await
        .expect("the store answers");
    store
        .append(
            "ctx",
            vec![row(RowRole::User, "remember me", RowStatus::Complete)],
        )
        .await
        .expect("the store answers");
    nats.restart();
    let reopened = NatsKvStore::open(&nats.url(), "sessions", Duration::from_mins(1))
        .await
        .expect("the store answers");
    assert_eq!(
        reopened
            .rows("ctx", usize::MAX)
            .await
            .expect("the store answers")[0]
            .content,
        "remember me"
    );
}

#[tokio::test]
async fn nats_kv_recovery_leaves_other_replicas_running_turns_alone() {
    let nats = NatsServer::start();
    let store = NatsKvStore::open(&nats.url(), "sessions", Duration::from_millis(300))
        .await
        .expect("the store answers");
    store
        .append(
            "crashed",
            vec![row(RowRole::Assistant, "half", RowStatus::Pending)],
        )
        .await
        .expect("the store answers");
    tokio::time::sleep(Duration::from_millis(400)).await;
    store
        .append(
            "running",
            vec![row(RowRole::Assistant, "busy", RowStatus::Pending)],
        )
        .await
        .expect("the store answers");

    // A replica starting now: the old pending row is from a turn that can no longer be
    // running; the fresh one may belong to a live replica.
    assert_eq!(store.recover().await.expect("the store answers"), 1);
    assert_eq!(
        store
            .rows("crashed", usize::MAX)
            .await
            .expect("the store answers")[0]
            .status,
        RowStatus::Error
    );
    assert_eq!(
        store
            .rows("running", usize::MAX)
            .await
            .expect("the store answers")[0]
            .status,
        RowStatus::Pending
    );
    assert_eq!(store.recover().await.expect("the store answers"), 0);
}

#[tokio::test]
async fn nats_kv_reads_only_the_last_rows_asked_for_and_bounds_long_context_keys() {
    let nats = NatsServer::start();
    let store = NatsKvStore::open(&nats.url(), "sessions", Duration::from_mins(1))
        .await
        .expect("the store answers");
    let long_context = "c".repeat(5_000);
    let rows: Vec<NewRow> = (0..10)
        .map(|i| row(RowRole::User, &i.to_string(), RowStatus::Complete))
        .collect();
    store
        .append(&long_context, rows)
        .await
        .expect("a 5,000-character context id is stored under a bounded key");
    let last: Vec<i64> = store
        .rows(&long_context, 3)
        .await
        .expect("the store answers")
        .iter()
        .map(|r| r.turn)
        .collect();
    assert_eq!(last, [7, 8, 9]);
}

#[tokio::test]
async fn nats_kv_gets_the_retention_as_max_age_and_recovery_skips_a_bad_row() {
    let nats = NatsServer::start();
    let ttl = Duration::from_hours(24);
    let store = NatsKvStore::open_with_ttl(&nats.url(), "kept", Duration::ZERO, Some(ttl))
        .await
        .expect("the store answers");
    let client = async_nats::connect(nats.url()).await.expect("connects");
    let js = async_nats::jetstream::new(client);
    let kv = js.get_key_value("kept").await.expect("the bucket");
    let max_age = || async {
        let mut stream = js.get_stream("KV_kept").await.expect("the bucket's stream");
        stream.info().await.expect("stream info").config.max_age
    };
    assert_eq!(max_age().await, ttl);
    // Reopening with another retention brings the existing bucket to it.
    let shorter = Duration::from_hours(1);
    let _ = NatsKvStore::open_with_ttl(&nats.url(), "kept", Duration::ZERO, Some(shorter))
        .await
        .expect("the store answers");
    assert_eq!(max_age().await, shorter);

    // A pending row that cannot be read, beside one that can: recovery goes on.
    store
        .append(
            "ctx",
            vec![row(RowRole::Assistant, "half", RowStatus::Pending)],
        )
        .await
        .expect("the store answers");
    kv.put("p.bad.0", bytes::Bytes::new()).await.expect("put");
    kv.put("r.bad.0", bytes::Bytes::from_static(b"{not json"))
        .await
        .expect("put");
    assert_eq!(
        store.recover().await.expect("recovery survives a bad row"),
        1
    );
    assert_eq!(
        store
            .rows("ctx", usize::MAX)
            .await
            .expect("the store answers")[0]
            .status,
        RowStatus::Error
    );
    // Settled rows leave no pending mark behind: the next recovery has only the bad one.
    let marks = kv
        .stream
        .info_with_subjects("$KV.kept.p.>")
        .await
        .expect("subjects")
        .count()
        .await;
    assert_eq!(marks, 1, "only the unreadable row's mark is left");
}

/// On the defaults, conversations live in the task store's file: a runtime started on a
/// `WORK_DIR` where an earlier version kept them in `daedalus-sessions.sqlite` reads them in
/// once (that file is renamed `.imported`), and a context goes on where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_store_reads_an_earlier_versions_conversations_in_once() {
    let dir = tempfile::tempdir().expect("a work dir");
    let legacy = dir.path().join("daedalus-sessions.sqlite");
    {
        let old = SqliteStore::open(legacy.to_str().expect("utf-8")).expect("the old file");
        let mut asked = row(RowRole::User, "the code is 4711", RowStatus::Complete);
        asked.message_id = Some("m-before".into());
        old.append(
            "ctx-kept",
            vec![asked, row(RowRole::Assistant, "noted", RowStatus::Complete)],
        )
        .await
        .expect("written");
    }
    let rt = support::process::runtime()
        .env_remove("SESSIONS_DB")
        .env("WORK_DIR", dir.path().to_str().expect("utf-8"))
        .start();
    let task: serde_json::Value = reqwest::Client::new()
        .post(rt.url("/"))
        .json(
            &json!({"message": {"messageId": "m-after", "contextId": "ctx-kept",
            "role": "user", "parts": [{"text": "what was the code?"}]},
            "configuration": {"historyLength": 10}}),
        )
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("a task");
    let history = task["history"].as_array().expect("history");
    assert_eq!(history[0]["messageId"], "m-before", "{task}");
    assert_eq!(history.len(), 4, "{task}");
    assert!(!legacy.exists(), "the old file is read once");
    let metrics = reqwest::get(rt.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let commits = metrics
        .lines()
        .find_map(|l| l.strip_prefix("daedalus_runtime_store_commits_total{store=\"tasks\"} "))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("the store's commits are counted:\n{metrics}"));
    assert!(commits > 0);
    assert!(
        !metrics.contains("store=\"sessions\""),
        "one store file, one writer"
    );
    assert!(
        dir.path()
            .join("daedalus-sessions.sqlite.imported")
            .exists()
    );
    drop(rt);
    let kept = SqliteStore::open(
        dir.path()
            .join("daedalus-tasks.sqlite")
            .to_str()
            .expect("utf-8"),
    )
    .expect("the task store's file");
    let rows = kept.rows("ctx-kept", usize::MAX).await.expect("rows");
    assert_eq!(
        rows.len(),
        4,
        "the conversation and its new turn in one file"
    );
}
