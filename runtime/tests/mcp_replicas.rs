//! MCP 2026-07-28 is stateless, so any replica answers any call: two runtime processes on one
//! NATS KV task store and one conversation file, behind a round-robin forwarder that sends
//! each connection to the next replica. 1,000 modern calls alternate between them with no
//! error; a conversation goes on whichever replica a turn lands on, and a task started on one
//! is polled to its answer on the other.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use daedalus_fake_llm::{FakeLlm, Reply};
use daedalus_test_kit::{ModernClient, modern_mcp_request};
use serde_json::{Value, json};
use support::kv_store::Store;

const KEY: &str = "sk-replicas";
const CALLS: usize = 1_000;

/// A TCP forwarder on loopback that hands each connection to the next of `backends`; counts
/// the connections each got.
async fn round_robin(backends: Vec<std::net::SocketAddr>) -> (String, Arc<Vec<AtomicUsize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("addr");
    let counts: Arc<Vec<AtomicUsize>> =
        Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
    let seen = Arc::clone(&counts);
    tokio::spawn(async move {
        let mut next = 0;
        while let Ok((mut inbound, _)) = listener.accept().await {
            let i = next % backends.len();
            next += 1;
            seen[i].fetch_add(1, Ordering::SeqCst);
            let backend = backends[i];
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(backend).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (format!("http://{addr}"), counts)
}

/// One 2026-07-28 request, on a connection of its own.
async fn modern(http: &reqwest::Client, url: &str, method: &str, params: Value) -> Value {
    let client = ModernClient::named("replica-drill");
    modern_mcp_request(http, url, &client, method, params).await
}

/// [`modern`] from a client that declares the tasks extension.
async fn with_tasks(http: &reqwest::Client, url: &str, method: &str, params: Value) -> Value {
    let client = ModernClient::named("replica-drill").with_tasks();
    modern_mcp_request(http, url, &client, method, params).await
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_calls_alternate_between_two_replicas_without_an_error() {
    let turns = CALLS / 4;
    let fake = FakeLlm::start(KEY, &["gpt-replicas"]).await;
    fake.script((0..turns).map(|i| Reply::Text(format!("answer {i}"))));
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("agents.yaml");
    std::fs::write(
        &config,
        daedalus_test_kit::AgentsYaml::on_openai(&fake.openai_base_url, KEY, "gpt-replicas")
            .agent(
                "pal",
                "{ instruction: Answer., instance_scope: connection }",
            )
            .build(),
    )
    .expect("written");
    let config = config.to_string_lossy().into_owned();
    let conversations = dir.path().join("conversations.db");
    let conversations = conversations.to_string_lossy().into_owned();
    let env = [
        ("AGENTS_CONFIG", config.as_str()),
        ("AGENT_NAME", "pal"),
        ("SESSIONS_DB", conversations.as_str()),
    ];
    let store = Store::start();
    let (a, _) = store.replica_with("replica-a", &env);
    let (b, _) = store.replica_with("replica-b", &env);
    let (front, connections) = round_robin(vec![a.addr, b.addr]).await;
    let url = format!("{front}/agents/pal/mcp");
    // No connection is reused: each request is a new connection, so the next replica's.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("client");

    let mut conversation: Option<String> = None;
    let mut answered = 0;
    for i in 0..CALLS {
        let answer = match i % 4 {
            0 => {
                let mut arguments = json!({"message": format!("turn {}", i / 4)});
                if let Some(id) = &conversation {
                    arguments["conversation_id"] = json!(id);
                }
                // Every other turn as a task, polled (through the other replica) to its end.
                let params = json!({"name": "send_message", "arguments": arguments});
                let answer = if i % 8 == 4 {
                    let first = with_tasks(&http, &url, "tools/call", params).await;
                    assert_eq!(first["result"]["resultType"], "task", "{first}");
                    let task_id = first["result"]["taskId"]
                        .as_str()
                        .expect("a task id")
                        .to_owned();
                    poll_to_end(&http, &url, &task_id).await
                } else {
                    modern(&http, &url, "tools/call", params).await
                };
                let said = text(&answer);
                assert_eq!(said, format!("answer {answered}"), "{answer}");
                answered += 1;
                if let Some(id) = answer["result"]["_meta"]["conversation_id"].as_str() {
                    conversation.get_or_insert_with(|| id.to_owned());
                }
                answer
            }
            1 => modern(&http, &url, "tools/list", json!({})).await,
            2 => {
                modern(
                    &http,
                    &url,
                    "tools/call",
                    json!({"name": "get_health", "arguments": {}}),
                )
                .await
            }
            _ => modern(&http, &url, "server/discover", json!({})).await,
        };
        assert!(answer.get("error").is_none(), "call {i}: {answer}");
    }
    assert_eq!(answered, turns);
    let per_replica: Vec<usize> = connections
        .iter()
        .map(|c| c.load(Ordering::SeqCst))
        .collect();
    assert!(
        per_replica.iter().all(|n| *n >= CALLS / 3),
        "both replicas answered: {per_replica:?}"
    );
    // One conversation, every turn of it, whichever replica ran the turn.
    let history = modern(
        &http,
        &url,
        "prompts/get",
        json!({"name": "pal_history", "arguments": {"conversation_id": conversation.expect("named")}}),
    )
    .await;
    let messages = history["result"]["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), turns * 2, "{history}");
}

/// Polls `tasks/get` until the task ends; answers its result as a `tools/call` answer.
async fn poll_to_end(http: &reqwest::Client, url: &str, task_id: &str) -> Value {
    for _ in 0..400 {
        let got = with_tasks(http, url, "tasks/get", json!({"taskId": task_id})).await;
        match got["result"]["status"].as_str() {
            Some("completed") => return json!({"result": got["result"]["result"]}),
            Some("working") => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            _ => panic!("task {task_id}: {got}"),
        }
    }
    panic!("task {task_id} never ended");
}

/// An HTTP forwarder on loopback that hands each request (not each connection: a client keeps
/// its connection) to the next of `backends`, streaming the answer back; counts the requests
/// each got.
async fn request_round_robin(
    backends: Vec<std::net::SocketAddr>,
) -> (String, Arc<Vec<AtomicUsize>>) {
    use axum::body::Body;
    use axum::extract::{Request, State};
    use axum::response::Response;
    struct Forwarder {
        backends: Vec<std::net::SocketAddr>,
        next: AtomicUsize,
        counts: Arc<Vec<AtomicUsize>>,
        http: reqwest::Client,
    }
    async fn forward(State(to): State<Arc<Forwarder>>, request: Request) -> Response {
        let i = to.next.fetch_add(1, Ordering::SeqCst) % to.backends.len();
        to.counts[i].fetch_add(1, Ordering::SeqCst);
        let (parts, body) = request.into_parts();
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let body = axum::body::to_bytes(body, 64 << 20).await.expect("a body");
        let mut headers = parts.headers.clone();
        headers.remove(http::header::HOST);
        let answer = to
            .http
            .request(parts.method, format!("http://{}{path}", to.backends[i]))
            .headers(headers)
            .body(body)
            .send()
            .await
            .expect("the replica answers");
        let mut response = Response::builder().status(answer.status());
        for (name, value) in answer.headers() {
            if name != http::header::CONTENT_LENGTH && name != http::header::TRANSFER_ENCODING {
                response = response.header(name, value);
            }
        }
        response
            .body(Body::from_stream(answer.bytes_stream()))
            .expect("a response")
    }
    let counts: Arc<Vec<AtomicUsize>> =
        Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
    let forwarder = Arc::new(Forwarder {
        backends,
        next: AtomicUsize::new(0),
        counts: Arc::clone(&counts),
        http: reqwest::Client::new(),
    });
    let app = axum::Router::new().fallback(forward).with_state(forwarder);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), counts)
}

/// The official Python client pinned to 2026-07-28 does everything it does against one runtime
/// (`mcp_modern.rs`) against two replicas behind a balancer that sends each request to the
/// next one: a conversation, its history, a question answered on the other replica, tasks
/// polled, answered and canceled wherever the request lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_on_2026_07_28_works_across_two_replicas() {
    use daedalus_mcp_fixture::McpFixture;
    use support::modern;
    let fx = McpFixture::start().await;
    let fake = FakeLlm::start(modern::KEY, &[modern::MODEL]).await;
    fake.script(modern::script());
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("agents.yaml");
    std::fs::write(&config, modern::deployment(&fake, &fx)).expect("written");
    let config = config.to_string_lossy().into_owned();
    let conversations = dir.path().join("conversations.db");
    let conversations = conversations.to_string_lossy().into_owned();
    let env = [
        ("AGENTS_CONFIG", config.as_str()),
        ("AGENT_NAME", modern::AGENT),
        ("SESSIONS_DB", conversations.as_str()),
    ];
    let store = Store::start();
    let (a, _) = store.replica_with("replica-a", &env);
    let (b, _) = store.replica_with("replica-b", &env);
    let (front, requests) = request_round_robin(vec![a.addr, b.addr]).await;
    let url = format!("{front}/agents/{}/mcp", modern::AGENT);

    let result = modern::drive("2026-07-28", &url, &fx).await;
    modern::check(&result, &fx, &fake).await;
    let per_replica: Vec<usize> = requests.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert!(
        per_replica.iter().all(|n| *n >= 10),
        "both replicas answered: {per_replica:?}"
    );
}
