//! Conversations are what turns are serialized on: one turn at a time per conversation,
//! whichever face it came through (the contract binding, the standard A2A bindings, the MCP
//! face), so no two turns ever interleave their rows in one conversation.
//!
//! Each face names its conversations in its own namespace: the MCP face's are `mcp/<agent>`
//! (or `mcp/<agent>/<session>`); a context id chosen by an A2A client goes through
//! [`ConversationKey::a2a`], which never lands in `mcp/`.

use crate::config::deployment::InstanceScope;
use crate::platform::identity::Caller;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// One async lock per live conversation; entries go when nobody holds them.
#[derive(Debug, Default)]
pub struct ConversationLocks(Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>);

impl ConversationLocks {
    /// The lock of conversation `key` (the same one for every caller while anyone holds it).
    pub fn get(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(lock) = map.get(key).and_then(Weak::upgrade) {
            return lock;
        }
        map.retain(|_, w| w.strong_count() > 0);
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        map.insert(key.to_owned(), Arc::downgrade(&lock));
        lock
    }
}

/// The prefix of the MCP face's conversations.
const MCP_PREFIX: &str = "mcp/";
/// The prefix that moves an A2A context id out of other faces' namespaces.
const A2A_PREFIX: &str = "a2a/";
/// Conversations of an authenticated caller: `owned/<principal key>/...`.
const OWNED_PREFIX: &str = "owned/";

/// The key a conversation is locked and stored under. Only these constructors make one, so
/// each face stays in its own namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConversationKey(String);

impl ConversationKey {
    /// The conversation of a context id an A2A client chose: the id itself, unless it starts
    /// with `mcp/` or `a2a/`, which get `a2a/` in front. So no A2A client reaches the MCP
    /// face's conversations, and two different ids never share a key.
    pub fn a2a(context_id: &str) -> Self {
        if context_id.starts_with(MCP_PREFIX)
            || context_id.starts_with(A2A_PREFIX)
            || context_id.starts_with(OWNED_PREFIX)
        {
            Self(format!("{A2A_PREFIX}{context_id}"))
        } else {
            Self(context_id.to_owned())
        }
    }

    /// Context `context_id` of a caller whose conversations live in `space` (its principal's
    /// key; `None` when authentication is off): two principals' (or tenants') equal context
    /// ids are two conversations.
    pub fn a2a_of(context_id: &str, space: Option<String>) -> Self {
        match space {
            None => Self::a2a(context_id),
            Some(space) => Self(format!("{OWNED_PREFIX}{space}/a2a/{context_id}")),
        }
    }

    /// Context `context_id` as `caller` holds it: theirs alone when they are authenticated.
    pub fn a2a_for(context_id: &str, caller: &Caller) -> Self {
        Self::a2a_of(context_id, caller.conversation_space())
    }

    /// This MCP conversation (as [`ConversationKey::mcp_shared`] or
    /// [`ConversationKey::mcp_session`] make it), kept apart for a caller in `space`.
    #[must_use]
    pub fn owned_by(self, space: Option<String>) -> Self {
        match space {
            None => self,
            Some(space) => Self(format!("{OWNED_PREFIX}{space}/{}", self.0)),
        }
    }

    /// The conversation an MCP call of `agent` continues, by the agent's `instance_scope`:
    /// everybody's (`shared`), the client's MCP session's (`connection`; none when the client
    /// has no session), or none (`request`: nothing is kept). An authenticated caller's
    /// conversations are its own, even on a shared agent.
    pub fn of_mcp_call(
        agent: &str,
        scope: InstanceScope,
        session: Option<&str>,
        caller: &Caller,
    ) -> Option<Self> {
        let key = match scope {
            InstanceScope::Shared => Some(Self::mcp_shared(agent)),
            InstanceScope::Connection => session.map(|session| Self::mcp_session(agent, session)),
            InstanceScope::Request => None,
        };
        key.map(|key| key.owned_by(caller.conversation_space()))
    }

    /// The MCP face's one conversation of `agent` (`instance_scope: shared`).
    pub fn mcp_shared(agent: &str) -> Self {
        Self(format!("{MCP_PREFIX}{agent}"))
    }

    /// The MCP face's conversation of `agent` in one MCP session (`instance_scope: connection`).
    pub fn mcp_session(agent: &str, session: &str) -> Self {
        Self(format!("{MCP_PREFIX}{agent}/{session}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key a resumed turn's record kept: one of the constructors above made it when the
    /// turn began.
    pub(super) fn resumed(key: String) -> Self {
        Self(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a2a_ids_never_reach_the_mcp_namespace_and_never_collide() {
        let a2a = |id: &str| ConversationKey::a2a(id).as_str().to_owned();
        assert_eq!(a2a("ctx-1"), "ctx-1");
        assert_eq!(a2a("mcp/agent"), "a2a/mcp/agent");
        assert_eq!(a2a("a2a/mcp/agent"), "a2a/a2a/mcp/agent");
        assert_eq!(a2a("owned/x"), "a2a/owned/x");
        let space = Some("k".to_owned());
        assert_ne!(
            ConversationKey::a2a_of("c", space.clone()),
            ConversationKey::a2a_of("c", Some("j".to_owned()))
        );
        assert_ne!(
            ConversationKey::a2a_of("c", space.clone()).as_str(),
            a2a("c")
        );
        assert!(
            ConversationKey::a2a_of("c", space.clone())
                .as_str()
                .starts_with(OWNED_PREFIX)
        );
        assert!(!a2a("owned/k/a2a/c").starts_with(OWNED_PREFIX));
        for id in ["mcp/a", "mcp/a/s", "a2a/x", "x", "mcpx", ""] {
            assert!(!a2a(id).starts_with(MCP_PREFIX), "{id}");
        }
        assert_ne!(a2a("mcp/a"), a2a("a2a/mcp/a"));
        assert_ne!(
            ConversationKey::mcp_shared("a"),
            ConversationKey::a2a("mcp/a")
        );
    }

    #[test]
    fn an_mcp_call_continues_its_scopes_conversation_and_a_known_callers_own() {
        use crate::config::deployment::InstanceScope::{Connection, Request, Shared};
        let anyone = Caller::Anyone;
        let key = |scope, session, caller: &Caller| {
            ConversationKey::of_mcp_call("agent", scope, session, caller).map(|k| k.0)
        };
        assert_eq!(key(Shared, None, &anyone).as_deref(), Some("mcp/agent"));
        assert_eq!(
            key(Shared, Some("s"), &anyone).as_deref(),
            Some("mcp/agent")
        );
        assert_eq!(
            key(Connection, Some("s"), &anyone).as_deref(),
            Some("mcp/agent/s")
        );
        assert_eq!(
            key(Connection, None, &anyone),
            None,
            "no session, nothing kept"
        );
        assert_eq!(key(Request, Some("s"), &anyone), None);
        let known = Caller::known(crate::platform::identity::Known {
            principal: crate::platform::identity::Principal {
                issuer: None,
                subject: "alice".to_owned(),
                tenant: None,
            },
            scopes: std::collections::BTreeSet::new(),
            admin: false,
            via: crate::platform::identity::Via::ApiKey,
        });
        let alices = key(Shared, None, &known).expect("kept");
        assert!(alices.starts_with(OWNED_PREFIX), "{alices}");
        assert_ne!(
            Some(alices),
            key(Shared, None, &anyone),
            "a shared agent's, but hers"
        );
    }

    #[tokio::test]
    async fn one_key_one_lock_while_held() {
        let locks = ConversationLocks::default();
        let a = locks.get("c");
        let b = locks.get("c");
        assert!(Arc::ptr_eq(&a, &b));
        let _held = a.lock().await;
        assert!(b.try_lock().is_err(), "the second caller waits");
        assert!(locks.get("other").try_lock().is_ok());
    }
}
