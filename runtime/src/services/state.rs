//! The runtime-wide core every face shares: the deployment's agents, the turn service that
//! runs them, the conversation store, the metrics, the LLM provider checks, the bounded book
//! of live MCP sessions, who is calling, push notifications, and the runtime's readiness.
//! Per-face state (the A2A face's discovery documents, an MCP face's agent definition) lives
//! with its face and holds a [`Core`].
//!
//! A reload ([`Core::redeploy`]) swaps the fleet and the provider checks; everything else lives
//! as long as the process.

use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::agents::llm::preflight::Preflight;
use crate::platform::card_keys::CardKeys;
use crate::platform::identity::Identity;
use crate::platform::metrics::Metrics;
use crate::services::push::{Push, PushSettings};
use crate::services::turns::Readiness;
use crate::services::turns::{TurnLimits, TurnService};
use crate::stores::conversations::ConversationStore;
use crate::stores::mcp_sessions::SessionLimits;

// What the core holds, as the faces name it: the agents it runs, and the book of live MCP
// sessions (with how a session is ended for room, and the refusal when none can be).
pub use crate::agents::fleet::Fleet;
pub use crate::stores::mcp_sessions::{SessionBook, SessionCloser, SessionsFull};

/// What every face shares. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Core(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    turns: TurnService,
    conversations: Option<Arc<dyn ConversationStore>>,
    metrics: Arc<Metrics>,
    preflight: ArcSwap<Preflight>,
    readiness: Arc<Readiness>,
    mcp_session_book: Arc<SessionBook>,
    identity: Identity,
    push: Push,
    /// The keys that sign the agent cards served.
    card_keys: CardKeys,
}

impl Core {
    /// The core over `fleet`, starting (not yet ready).
    pub fn new(
        fleet: Fleet,
        conversations: Option<Arc<dyn ConversationStore>>,
        preflight: Preflight,
        limits: TurnLimits,
        mcp_sessions: SessionLimits,
        push: PushSettings,
    ) -> Self {
        let metrics = Arc::new(Metrics::new());
        let readiness = Arc::new(Readiness::default());
        let turns = TurnService::new(
            Arc::new(fleet),
            Arc::clone(&metrics),
            Arc::clone(&readiness),
            limits,
        );
        let mcp_session_book = Arc::new(SessionBook::new(mcp_sessions, Arc::clone(&metrics)));
        let push = Push::new(push, turns.task_store(), Arc::clone(&metrics));
        Self(Arc::new(Shared {
            turns,
            conversations,
            metrics,
            preflight: ArcSwap::from_pointee(preflight),
            readiness,
            mcp_session_book,
            identity: Identity::off(),
            push,
            card_keys: CardKeys::default(),
        }))
    }

    /// Every agent of the deployment, with its downstream servers, as of now.
    pub fn fleet(&self) -> Arc<Fleet> {
        self.0.turns.fleet()
    }

    /// The one way a turn runs.
    pub fn turns(&self) -> &TurnService {
        &self.0.turns
    }

    /// Where agents keep conversations (`None` when turned off).
    pub fn conversations(&self) -> Option<&Arc<dyn ConversationStore>> {
        self.0.conversations.as_ref()
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.0.metrics
    }

    /// Every live MCP session of the runtime, and their bounds.
    pub fn mcp_session_book(&self) -> &Arc<SessionBook> {
        &self.0.mcp_session_book
    }

    /// The LLM provider checks behind `/healthz` and `get_health`, as of now.
    pub fn preflight(&self) -> Arc<Preflight> {
        self.0.preflight.load_full()
    }

    /// Who is calling: the one decision every face asks for (off until startup configures
    /// it, and swapped on reload).
    pub fn identity(&self) -> &Identity {
        &self.0.identity
    }

    /// Push notifications: tasks' webhooks and their deliveries.
    pub fn push(&self) -> &Push {
        &self.0.push
    }

    /// The keys that sign the agent cards served (none until configured).
    pub fn card_keys(&self) -> &CardKeys {
        &self.0.card_keys
    }

    pub fn readiness(&self) -> &Readiness {
        &self.0.readiness
    }

    /// New turns run on `fleet`, and health checks `preflight`'s providers; turns already
    /// running finish on the agents they began with.
    pub fn redeploy(&self, fleet: Fleet, preflight: Preflight) {
        self.0.preflight.store(Arc::new(preflight));
        self.0.turns.replace_fleet(Arc::new(fleet));
    }
}
