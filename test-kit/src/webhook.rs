//! [`Webhook`]: a real HTTP server on loopback that takes push notifications and keeps what it
//! was sent, and can be told to refuse (503) as a webhook that is down would, or to hang: take
//! each request and answer none until it is told to answer again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::Value;

/// One notification a webhook took.
#[derive(Debug, Clone)]
pub struct Notification {
    pub headers: HeaderMap,
    pub body: Value,
}

impl Notification {
    /// The id of the task it is about (a `task`, `statusUpdate` or `artifactUpdate`).
    pub fn task_id(&self) -> String {
        let b = &self.body;
        b["task"]["id"]
            .as_str()
            .or_else(|| b["statusUpdate"]["taskId"].as_str())
            .or_else(|| b["artifactUpdate"]["taskId"].as_str())
            .unwrap_or_default()
            .to_owned()
    }

    /// The task state it tells, if it tells one.
    pub fn state(&self) -> Option<String> {
        let b = &self.body;
        b["task"]["status"]["state"]
            .as_str()
            .or_else(|| b["statusUpdate"]["status"]["state"].as_str())
            .map(str::to_owned)
    }
}

#[derive(Debug)]
struct Shared {
    taken: Mutex<Vec<Notification>>,
    down: AtomicBool,
    refused: Mutex<usize>,
    /// While `true`, every request waits (the sender's timeout ends it first).
    hanging: tokio::sync::watch::Sender<bool>,
}

impl Default for Shared {
    fn default() -> Self {
        Self {
            taken: Mutex::default(),
            down: AtomicBool::default(),
            refused: Mutex::default(),
            hanging: tokio::sync::watch::Sender::new(false),
        }
    }
}

/// A webhook server on 127.0.0.1, stopped when dropped.
#[derive(Debug)]
pub struct Webhook {
    shared: Arc<Shared>,
    url: String,
    _server: tokio::task::JoinHandle<()>,
}

async fn take(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: String) -> StatusCode {
    let _ = shared
        .hanging
        .subscribe()
        .wait_for(|hanging| !hanging)
        .await;
    if shared.down.load(Ordering::SeqCst) {
        *shared
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let body = serde_json::from_str(&body).unwrap_or(Value::Null);
    shared
        .taken
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(Notification { headers, body });
    StatusCode::OK
}

impl Webhook {
    /// A webhook that takes everything, at `http://127.0.0.1:<port>/hook`.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let app = axum::Router::new()
            .route("/hook", post(take))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds a loopback port");
        let url = format!(
            "http://{}/hook",
            listener.local_addr().expect("a bound address")
        );
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            shared,
            url,
            _server: server,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// From now on answers 503 (down) or takes notifications again.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::SeqCst);
    }

    /// From now on answers nothing (every request waits until the sender gives up on it), or
    /// answers again: the requests waiting are taken then.
    pub fn set_hanging(&self, hanging: bool) {
        self.shared.hanging.send_replace(hanging);
    }

    /// How many notifications it refused while down.
    pub fn refused(&self) -> usize {
        *self
            .shared
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every notification taken, in arrival order.
    pub fn taken(&self) -> Vec<Notification> {
        self.shared
            .taken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The states told about task `task_id`, in arrival order.
    pub fn states_of(&self, task_id: &str) -> Vec<String> {
        self.taken()
            .iter()
            .filter(|n| n.task_id() == task_id)
            .filter_map(Notification::state)
            .collect()
    }

    /// Waits (at most `within`) until task `task_id` was told to be in `state`.
    pub async fn told(&self, task_id: &str, state: &str, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if self.states_of(task_id).iter().any(|s| s == state) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        false
    }
}
