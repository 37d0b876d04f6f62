//! One agent's MCP sessions: rmcp's in-memory session manager, kept small and reported to the
//! runtime's [`SessionBook`] (the core's), which bounds every agent's sessions together. Each session is
//! entered in the book when it opens, marked when its handshake ends
//! (`notifications/initialized`), touched on every message, counted busy while a call's stream
//! is open, and struck out when it ends, however it ends (closed by its client, evicted,
//! expired, or its worker stopped).

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

use crate::services::state::{SessionBook, SessionCloser};

/// Messages a call's stream buffers before the session waits for its client: a call's answer
/// and its progress notifications go out as they come, so a few suffice (rmcp's default is
/// 16). It bounds what a slow client makes a session hold, not an idle session's cost.
const CHANNEL_CAPACITY: usize = 8;
/// How long a finished call's messages are kept for a client that resumes its stream
/// (rmcp's default is 60 s): a session that just answered a large result holds it this long.
const RESUME_CACHE: Duration = Duration::from_secs(10);

/// The session manager of one agent's MCP face.
#[derive(Debug)]
pub struct BoundedSessions {
    agent: Arc<str>,
    local: Arc<LocalSessionManager>,
    book: Arc<SessionBook>,
}

/// Ends sessions of one agent's local manager (for the book's evictions and expiries).
#[derive(Debug)]
struct LocalCloser(Arc<LocalSessionManager>);

impl SessionCloser for LocalCloser {
    fn close(&self, id: String) {
        let local = Arc::clone(&self.0);
        tokio::spawn(async move {
            let id: SessionId = Arc::from(id);
            if let Err(e) = local.close_session(&id).await {
                tracing::debug!(error = %e, "ending an MCP session");
            }
        });
    }
}

impl BoundedSessions {
    /// The sessions of `agent`, entered in `book`.
    pub fn new(agent: &str, book: Arc<SessionBook>) -> Self {
        let limits = book.limits();
        let mut config = SessionConfig::default();
        config.channel_capacity = CHANNEL_CAPACITY;
        config.completed_cache_ttl = RESUME_CACHE;
        // The book ends unfinished handshakes and idle sessions, and counts it; rmcp's own
        // timers stay as a safety net just behind.
        config.init_timeout = Some(limits.handshake_timeout + Duration::from_secs(5));
        config.keep_alive = Some(limits.idle + Duration::from_secs(5));
        let mut local = LocalSessionManager::default();
        local.session_config = config;
        Self {
            agent: Arc::from(agent),
            local: Arc::new(local),
            book,
        }
    }
}

impl SessionManager for BoundedSessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.local.create_session().await?;
        self.book.opened(
            &id,
            &self.agent,
            Arc::new(LocalCloser(Arc::clone(&self.local))),
        );
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.book.touch(id);
        self.local.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.local.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.book.closed(id);
        self.local.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let call = self.book.call(id);
        let stream = self.local.create_stream(id, message).await?;
        // The call is in flight while its stream is open.
        Ok(stream.map(move |message| {
            let _in_flight = &call;
            message
        }))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        let handshake_over = matches!(
            &message,
            ClientJsonRpcMessage::Notification(n)
                if matches!(n.notification, ClientNotification::InitializedNotification(_))
        );
        if handshake_over {
            self.book.initialized(id);
        } else {
            self.book.touch(id);
        }
        self.local.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.book.touch(id);
        self.local.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.book.touch(id);
        self.local.resume(id, last_event_id).await
    }
}
