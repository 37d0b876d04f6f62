//! The runtime's own health (`GET /healthz`): can this replica take work? The LLM provider
//! preflight, every agent's downstream servers as last reached, the MCP sessions against their
//! bound, this replica in a shared task store, and, for operators, identity, push and budgets.

use serde::Serialize;

use crate::agents::budgets::BudgetsHealth;
use crate::agents::fleet::DownstreamState;
use crate::agents::llm::preflight::ProviderCheck;
use crate::platform::identity::IdentityHealth;
use crate::services::push::PushHealth;
use crate::services::state::Core;
use crate::stores::mcp_sessions::SessionsStatus;
use crate::stores::tasks::ReplicaHealth;

/// The runtime's health, and its verdict.
#[derive(Debug, Serialize)]
pub struct RuntimeHealth {
    /// `ok` or `degraded`.
    pub status: &'static str,
    pub providers: Vec<ProviderCheck>,
    pub downstream: Vec<DownstreamState>,
    /// Live MCP sessions against their bound; `full` while a new one ends an idle one.
    pub mcp_sessions: SessionsStatus,
    /// This replica in a shared task store: its lease renewed, its watch live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<ReplicaHealth>,
    /// Whether callers must authenticate, and the keys their credentials are checked with.
    pub auth: IdentityHealth,
    /// Push notifications: what waits for webhooks, what was delivered, retried, given up
    /// and dropped, and the last delivery given up.
    pub push: PushHealth,
    /// Budgets (`budgets:`): how many are configured and refusing now, never whose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budgets: Option<BudgetsHealth>,
}

impl RuntimeHealth {
    /// Whether the replica can take work.
    pub fn healthy(&self) -> bool {
        self.status == OK
    }
}

const OK: &str = "ok";
const DEGRADED: &str = "degraded";

/// `ok` when the active provider passed its last check, every downstream server was reachable
/// at its last attempt, the MCP sessions are below their bound and (with a shared task store)
/// this replica's lease is renewed and its watch live; else `degraded`. Not a liveness verdict:
/// a wrong API key degrades it without anything a restart would fix.
fn verdict(
    providers: &[ProviderCheck],
    downstream: &[DownstreamState],
    mcp_sessions: &SessionsStatus,
    tasks: Option<&ReplicaHealth>,
) -> &'static str {
    let ok = providers.iter().filter(|p| p.active).all(|p| p.ok)
        && downstream.iter().all(|d| d.ok)
        && !mcp_sessions.full
        && tasks.is_none_or(ReplicaHealth::ok);
    if ok { OK } else { DEGRADED }
}

/// The runtime's health as it stands (the preflight re-probed when stale).
pub async fn runtime_health(core: &Core) -> RuntimeHealth {
    let providers = core.preflight().current().await;
    let downstream = core.fleet().downstream_states();
    let mcp_sessions = core.mcp_session_book().status();
    let tasks = core.turns().replica_health();
    RuntimeHealth {
        status: verdict(&providers, &downstream, &mcp_sessions, tasks.as_ref()),
        providers,
        downstream,
        mcp_sessions,
        tasks,
        auth: core.identity().health(),
        push: core.push().health(),
        budgets: core.turns().budgets_health(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(active: bool, ok: bool) -> ProviderCheck {
        ProviderCheck {
            provider: "openai",
            model: None,
            active,
            ok,
            message: String::new(),
            checked_at: String::new(),
        }
    }

    fn server(ok: bool) -> DownstreamState {
        DownstreamState {
            agent: "a".into(),
            server: "s".into(),
            ok,
            problem: None,
        }
    }

    fn sessions(full: bool) -> SessionsStatus {
        SessionsStatus {
            live: 1,
            capacity: 2,
            full,
        }
    }

    fn replica(lease_held: bool) -> ReplicaHealth {
        ReplicaHealth {
            replica: "r".into(),
            lease_held,
            watch_live: true,
            lease_renewed_ms_ago: None,
        }
    }

    #[test]
    fn every_part_must_be_well_for_the_runtime_to_be_ok() {
        let well = || {
            (
                vec![provider(true, true), provider(false, false)],
                vec![server(true)],
            )
        };
        let (providers, downstream) = well();
        assert_eq!(
            verdict(
                &providers,
                &downstream,
                &sessions(false),
                Some(&replica(true))
            ),
            "ok",
            "an inactive provider's failure does not count"
        );
        assert_eq!(
            verdict(&providers, &downstream, &sessions(false), None),
            "ok"
        );
        assert_eq!(
            verdict(
                &[provider(true, false)],
                &downstream,
                &sessions(false),
                None
            ),
            "degraded"
        );
        assert_eq!(
            verdict(&providers, &[server(false)], &sessions(false), None),
            "degraded"
        );
        assert_eq!(
            verdict(&providers, &downstream, &sessions(true), None),
            "degraded"
        );
        assert_eq!(
            verdict(
                &providers,
                &downstream,
                &sessions(false),
                Some(&replica(false))
            ),
            "degraded"
        );
    }
}
