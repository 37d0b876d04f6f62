//! Which MCP endpoint answers a request. The endpoints of a deployment, the ports they own and
//! the registry document form one [`Table`], read on every request and swapped whole when the
//! deployment is reloaded: "If an agent is added or removed … subsequent requests must reflect
//! the change" (`pallas-mcp-interface.txt`).
//!
//! An agent whose face is unchanged by a reload keeps its endpoint, and so its MCP sessions. A
//! changed or removed agent's endpoint is retired: new requests no longer reach it (a changed
//! agent's clients get 404 for their old session and open a new one, as Streamable HTTP
//! prescribes), and its sessions end once every turn they could have started is over.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use daedalus_contract::model::registry::ServerList;
use http::StatusCode;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::session_manager::BoundedSessions;
use super::{AgentServer, Face, OWN_PORT_PATH, ServiceSettings};
use crate::services::state::SessionsFull;

/// What each reload changed, told to every `subscriptions/listen` of every endpoint.
#[derive(Debug, Clone)]
pub struct ChangeFeed(tokio::sync::broadcast::Sender<Arc<Changes>>);

impl ChangeFeed {
    /// A few reloads' worth: a listener further behind is told its tools may have changed.
    const BACKLOG: usize = 16;

    fn new() -> Self {
        Self(tokio::sync::broadcast::channel(Self::BACKLOG).0)
    }

    /// The changes of the reloads from now on.
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<Arc<Changes>> {
        self.0.subscribe()
    }

    fn tell(&self, changes: Changes) {
        // No listener is not an error.
        let _ = self.0.send(Arc::new(changes));
    }
}

/// One agent's MCP server: its face, the Streamable HTTP service over it, and the token that
/// ends its sessions.
pub struct Endpoint {
    face: Arc<Face>,
    service: StreamableHttpService<AgentServer, BoundedSessions>,
    sessions: CancellationToken,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("agent", &self.face.name())
            .field("sessions_ended", &self.sessions.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    fn new(
        face: Arc<Face>,
        settings: &ServiceSettings,
        stop: &CancellationToken,
        changes: &ChangeFeed,
    ) -> Self {
        let sessions = stop.child_token();
        let service = super::service(&face, settings, sessions.clone(), changes.clone());
        Self {
            face,
            service,
            sessions,
        }
    }

    pub fn face(&self) -> &Arc<Face> {
        &self.face
    }

    /// Answers `request` to this endpoint, named `resource` (its URL) in refusals: who is
    /// calling is decided first, and only the principal that opened a session may use it.
    async fn answer(&self, mut request: Request, resource: &str) -> Response {
        let core = &self.face.core;
        let caller = match core.identity().authenticate(request.headers()).await {
            Ok(caller) => caller,
            Err(refusal) => {
                tracing::info!(agent = self.face.name(), %refusal, "MCP request refused");
                return super::auth::refused(&refusal, resource);
            }
        };
        let session = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(id) = &session
            && !core.mcp_session_book().open_to(id, &caller)
        {
            return super::auth::no_such_session();
        }
        request.extensions_mut().insert(caller.clone());
        let response = self.serve(request).await;
        if session.is_none()
            && let Some(opened) = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
        {
            core.mcp_session_book().claim(opened, caller.principal());
        }
        response
    }

    async fn serve(&self, request: Request) -> Response {
        // A POST without a session id opens a session: it needs a place in the runtime's
        // session book, held until its `initialize` is answered (and the session entered).
        let _admission = if opens_session(&request) {
            match self.face.core.mcp_session_book().admit() {
                Ok(admission) => Some(admission),
                Err(full) => return sessions_full(&full),
            }
        } else {
            None
        };
        match self.service.clone().oneshot(request).await {
            Ok(response) => response.map(axum::body::Body::new),
            Err(never) => match never {},
        }
    }
}

/// The endpoints of one deployment: by agent name, and by the own port an agent has; the
/// registry document that lists them; the settings they were made with.
#[derive(Debug)]
pub struct Table {
    agents: BTreeMap<String, Arc<Endpoint>>,
    ports: BTreeMap<u16, Arc<Endpoint>>,
    registry: Arc<ServerList>,
    settings: ServiceSettings,
}

impl Default for Table {
    fn default() -> Self {
        Self {
            agents: BTreeMap::new(),
            ports: BTreeMap::new(),
            registry: Arc::new(ServerList {
                servers: Vec::new(),
            }),
            settings: ServiceSettings::default(),
        }
    }
}

impl Table {
    /// The endpoint of `agent`.
    pub fn agent(&self, agent: &str) -> Option<&Arc<Endpoint>> {
        self.agents.get(agent)
    }

    /// The endpoint of the agent that owns `port`.
    pub fn on_port(&self, port: u16) -> Option<&Arc<Endpoint>> {
        self.ports.get(&port)
    }

    /// The agents' own ports.
    pub fn own_ports(&self) -> impl Iterator<Item = u16> + '_ {
        self.ports.keys().copied()
    }

    pub fn registry(&self) -> &Arc<ServerList> {
        &self.registry
    }

    /// The URL of the main port's endpoint at `path`.
    pub fn resource_of(&self, path: &str) -> String {
        format!("{}{path}", self.settings.public_base)
    }

    /// The URL of the endpoint on own port `port`.
    pub fn own_port_resource(&self, port: u16) -> String {
        format!("http://{}:{port}{OWN_PORT_PATH}", self.settings.host)
    }

    /// The agents served, by name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }
}

/// What a reload changed, by agent name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

impl Changes {
    /// Whether `agent`'s MCP server (its tools) changed or went away.
    pub fn touches(&self, agent: &str) -> bool {
        self.changed.iter().chain(&self.removed).any(|a| a == agent)
    }
}

/// The live table, and the token whose firing (at shutdown) ends every MCP session.
#[derive(Debug)]
pub struct Routes {
    table: ArcSwap<Table>,
    stop: CancellationToken,
    changes: ChangeFeed,
}

impl Routes {
    /// Routes with no endpoint yet; `stop` ends every session, now or future.
    pub fn new(stop: CancellationToken) -> Self {
        Self {
            table: ArcSwap::from_pointee(Table::default()),
            stop,
            changes: ChangeFeed::new(),
        }
    }

    /// The token that ends every session.
    pub fn stop_token(&self) -> &CancellationToken {
        &self.stop
    }

    /// The table as of now.
    pub fn table(&self) -> Arc<Table> {
        self.table.load_full()
    }

    /// A table serving `faces` with `settings`, listing `registry`. A face that shows its
    /// clients the same server as one served now, with the same settings, keeps that endpoint
    /// (and its sessions).
    pub fn plan(
        &self,
        faces: Vec<Arc<Face>>,
        registry: ServerList,
        settings: ServiceSettings,
    ) -> Table {
        let current = self.table.load();
        let same_settings = current.settings == settings;
        let mut table = Table {
            registry: Arc::new(registry),
            settings,
            ..Table::default()
        };
        for face in faces {
            let endpoint = match current.agent(face.name()) {
                Some(kept) if same_settings && kept.face.serves_as(&face) => Arc::clone(kept),
                _ => Arc::new(Endpoint::new(
                    face,
                    &table.settings,
                    &self.stop,
                    &self.changes,
                )),
            };
            if let Some(port) = endpoint.face.def.port {
                table.ports.insert(port, Arc::clone(&endpoint));
            }
            table
                .agents
                .insert(endpoint.face.name().to_owned(), endpoint);
        }
        table
    }

    /// Serves `table` from the next request on. The endpoints it no longer serves end their
    /// sessions after `linger` (the longest a turn they started may still run), or at
    /// shutdown, whichever comes first.
    pub fn install(&self, table: Table, linger: Duration) -> Changes {
        let new = Arc::new(table);
        let old = self.table.swap(Arc::clone(&new));
        let mut changes = Changes::default();
        for (name, endpoint) in &new.agents {
            match old.agent(name) {
                None => changes.added.push(name.clone()),
                Some(before) if !Arc::ptr_eq(before, endpoint) => {
                    changes.changed.push(name.clone());
                }
                Some(_) => {}
            }
        }
        for (name, endpoint) in &old.agents {
            match new.agent(name) {
                Some(now) if Arc::ptr_eq(now, endpoint) => {}
                now => {
                    if now.is_none() {
                        changes.removed.push(name.clone());
                    }
                    retire(endpoint.sessions.clone(), linger);
                }
            }
        }
        self.changes.tell(changes.clone());
        changes
    }
}

/// Ends a retired endpoint's sessions after `linger`; its token is a child of the runtime's
/// stop token, so shutdown ends them earlier.
fn retire(sessions: CancellationToken, linger: Duration) {
    tokio::spawn(async move {
        tokio::select! {
            () = tokio::time::sleep(linger) => sessions.cancel(),
            () = sessions.cancelled() => {}
        }
    });
}

/// Every agent's MCP endpoint on the main port, at `/agents/{agent}/mcp`.
pub fn main_port_routes(routes: Arc<Routes>) -> Router {
    Router::new()
        .route("/agents/{agent}/mcp", any(by_agent))
        .with_state(routes)
        .layer(axum::middleware::from_fn(super::delete_answers_200))
}

/// The MCP endpoint of whichever agent owns `port`, at `/mcp`.
pub fn own_port_routes(routes: Arc<Routes>, port: u16) -> Router {
    Router::new()
        .route(OWN_PORT_PATH, any(by_port))
        .with_state((routes, port))
        .layer(axum::middleware::from_fn(super::delete_answers_200))
}

async fn by_agent(
    State(routes): State<Arc<Routes>>,
    Path(agent): Path<String>,
    request: Request,
) -> Response {
    let table = routes.table.load();
    let endpoint = table.agent(&agent).cloned();
    let resource = table.resource_of(&super::main_port_path(&agent));
    drop(table);
    match endpoint {
        Some(endpoint) => endpoint.answer(request, &resource).await,
        None => no_such_agent(),
    }
}

async fn by_port(State((routes, port)): State<(Arc<Routes>, u16)>, request: Request) -> Response {
    let table = routes.table.load();
    let endpoint = table.on_port(port).cloned();
    let resource = table.own_port_resource(port);
    drop(table);
    match endpoint {
        Some(endpoint) => endpoint.answer(request, &resource).await,
        None => no_such_agent(),
    }
}

/// Whether `request` would open a new session: a POST without `Mcp-Session-Id` that does not
/// declare MCP 2026-07-28 or newer, which has no sessions (rmcp answers any such POST but an
/// `initialize` with 400, opening nothing; the place is then released).
fn opens_session(request: &Request) -> bool {
    request.method() == http::Method::POST
        && !request.headers().contains_key("mcp-session-id")
        && !declares_stateless(request.headers())
}

/// Whether the request's `MCP-Protocol-Version` is 2026-07-28 or newer (dates compare as
/// text).
fn declares_stateless(headers: &http::HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

/// 503 with `Retry-After` and a JSON-RPC error saying why: every session has a call in flight.
fn sessions_full(full: &SessionsFull) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32000, "message": full.to_string()},
    });
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(http::header::RETRY_AFTER, "1")],
        axum::Json(body),
    )
        .into_response()
}

fn no_such_agent() -> Response {
    (
        StatusCode::NOT_FOUND,
        "no agent of this deployment is served here\n",
    )
        .into_response()
}
