//! One downstream server's probe, and the report a set of probes makes.
//!
//! An MCP server is probed the way the specification says: `POST` an `initialize` (with the
//! server's configured headers, and the caller's bearer for a server that opted into
//! forwarding) under a 3 s timeout, then `DELETE` the session it opened. A server that speaks
//! only the 2026-07-28 revision answers `initialize` with a 400 carrying a JSON-RPC error: it is
//! reachable. Another A2A agent (`type: a2a`) is probed by reading its card.

use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde::Serialize;
use serde_json::json;

use crate::agents::a2a_tools::trust::TrustCheck;
use crate::agents::a2a_tools::{self, CardError};
use crate::agents::agent_loop::Bearer;
use crate::config::deployment::{McpServer, ServerKind};

/// How long one probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The protocol version the probe offers (the last one with `initialize`).
const PROBE_PROTOCOL: &str = "2025-11-25";

/// Whether an agent can work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    /// Every downstream server answered and the provider is fine.
    Ok,
    /// It runs, but something it relies on is not answering.
    Degraded,
    /// It takes no work (the runtime is shutting down).
    Error,
}

impl HealthStatus {
    /// The `daedalus_runtime_agent_health_status` value: 1, 0.5, 0.
    pub fn gauge(self) -> f64 {
        match self {
            HealthStatus::Ok => 1.0,
            HealthStatus::Degraded => 0.5,
            HealthStatus::Error => 0.0,
        }
    }
}

/// An agent's health, as `get_health` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthReport {
    pub status: HealthStatus,
    pub timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One downstream server's probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub server: String,
    /// Why it is unreachable; `None` when it answered.
    pub problem: Option<String>,
    /// The problem is the server's card, refused by its trust (it answered).
    pub untrusted: bool,
}

/// Why a downstream server's probe failed; its text is what `get_health` reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("no answer within {PROBE_TIMEOUT:?}")]
    NoAnswer,
    /// The transport error, its URL left out.
    #[error("unreachable ({0})")]
    Unreachable(String),
    #[error("answered HTTP {0}")]
    Status(u16),
    /// An A2A agent whose card came but cannot be used (too large, say).
    #[error("answered with a card it cannot use: {0}")]
    CardUnusable(String),
    /// An A2A agent whose card its trust refuses (`trust.policy`).
    #[error("not trusted: {0}")]
    Untrusted(String),
}

/// Probes `server` once.
pub async fn probe(
    client: &reqwest::Client,
    name: &str,
    server: &McpServer,
    bearer: &Bearer,
) -> Probe {
    let check = async {
        match server.kind {
            ServerKind::Mcp => initialize(client, server, bearer).await,
            ServerKind::A2a => read_card(client, name, server).await,
        }
    };
    let problem = tokio::time::timeout(PROBE_TIMEOUT, check)
        .await
        .unwrap_or(Err(ProbeError::NoAnswer))
        .err();
    Probe {
        server: name.to_owned(),
        untrusted: matches!(problem, Some(ProbeError::Untrusted(_))),
        problem: problem.map(|e| e.to_string()),
    }
}

fn request(
    client: &reqwest::Client,
    method: reqwest::Method,
    server: &McpServer,
    bearer: &Bearer,
) -> reqwest::RequestBuilder {
    let mut req = client
        .request(method, &server.url)
        .headers(crate::platform::telemetry::current_headers());
    let mut has_auth = false;
    for (k, v) in &server.headers {
        has_auth |= k.eq_ignore_ascii_case("authorization");
        req = req.header(k, v);
    }
    if !has_auth
        && server.forward_inbound_auth
        && let Some(token) = bearer.expose()
    {
        req = req.header(AUTHORIZATION, format!("Bearer {token}"));
    }
    req
}

async fn initialize(
    client: &reqwest::Client,
    server: &McpServer,
    bearer: &Bearer,
) -> Result<(), ProbeError> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROBE_PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "daedalus-runtime-health", "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let response = request(client, reqwest::Method::POST, server, bearer)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", PROBE_PROTOCOL)
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| ProbeError::Unreachable(without_url(&e)))?;
    let status = response.status();
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = response.text().await.unwrap_or_default();
    let reachable = status.is_success()
        // A server speaking only 2026-07-28 refuses `initialize` with a JSON-RPC error.
        || (status == reqwest::StatusCode::BAD_REQUEST && text.contains("\"jsonrpc\""));
    if !reachable {
        return Err(ProbeError::Status(status.as_u16()));
    }
    if let Some(session) = session {
        // Tear the session down; 2xx, 404 (already gone) and 405 (stateless) are all fine.
        match request(client, reqwest::Method::DELETE, server, bearer)
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", PROBE_PROTOCOL)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() || matches!(r.status().as_u16(), 404 | 405) => {}
            Ok(r) => tracing::debug!(status = r.status().as_u16(), "closing the probe's session"),
            Err(e) => tracing::debug!(error = %without_url(&e), "closing the probe's session"),
        }
    }
    Ok(())
}

/// Reads another A2A agent's card (bounded in bytes, as a call reads it): reachable when it
/// answers 2xx with a card of a bounded size.
async fn read_card(
    client: &reqwest::Client,
    name: &str,
    server: &McpServer,
) -> Result<(), ProbeError> {
    let bytes = a2a_tools::read_card(client, name, server)
        .await
        .map_err(card_problem)?;
    if server.trust.is_off() {
        return Ok(());
    }
    // The card's trust, checked as a call would check it.
    let card: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| ProbeError::Untrusted("its agent card is not JSON".to_owned()))?;
    TrustCheck::new(&server.trust)
        .check(client, &card)
        .await
        .map(|_| ())
        .map_err(|refused| ProbeError::Untrusted(refused.to_string()))
}

/// What a probe reports of a card that could not be read: a transport failure is the agent
/// unreachable; a card that came but cannot be used is not.
fn card_problem(e: CardError) -> ProbeError {
    match e {
        CardError::Answered { status, .. } => ProbeError::Status(status),
        CardError::Unreachable { why, .. } => ProbeError::Unreachable(why),
        other => ProbeError::CardUnusable(other.to_string()),
    }
}

/// A transport error's reason without the URL (which may carry credentials).
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "connection refused or failed"
    } else if e.is_timeout() {
        "timed out"
    } else {
        "transport error"
    };
    kind.to_owned()
}

/// The report for `probes` and the active provider's check (`None` when it has none).
pub fn report(probes: &[Probe], provider: Option<(bool, String)>, accepting: bool) -> HealthReport {
    let timestamp = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
    if !accepting {
        return HealthReport {
            status: HealthStatus::Error,
            timestamp,
            message: Some("the runtime is shutting down and takes no new work".to_owned()),
        };
    }
    let mut problems = Vec::new();
    // An agent whose card is not trusted is reachable: it is named apart.
    let (untrusted, down): (Vec<&Probe>, Vec<&Probe>) = probes
        .iter()
        .filter(|p| p.problem.is_some())
        .partition(|p| p.untrusted);
    let named = |probes: Vec<&Probe>| {
        probes
            .iter()
            .map(|p| {
                format!(
                    "{} ({})",
                    p.server,
                    p.problem.as_deref().unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !down.is_empty() {
        problems.push(format!("Unreachable: {}", named(down)));
    }
    if !untrusted.is_empty() {
        problems.push(format!("Untrusted: {}", named(untrusted)));
    }
    if let Some((false, why)) = provider {
        problems.push(format!("LLM: {why}"));
    }
    if problems.is_empty() {
        HealthReport {
            status: HealthStatus::Ok,
            timestamp,
            message: None,
        }
    } else {
        HealthReport {
            status: HealthStatus::Degraded,
            timestamp,
            message: Some(problems.join("; ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_names_every_problem() {
        let probes = [
            Probe {
                server: "argos".into(),
                problem: None,
                untrusted: false,
            },
            Probe {
                server: "neo4j".into(),
                problem: Some("timed out".into()),
                untrusted: false,
            },
        ];
        let r = report(
            &probes,
            Some((false, "openai: model 'x' not found".into())),
            true,
        );
        assert_eq!(r.status, HealthStatus::Degraded);
        assert_eq!(
            r.message.as_deref(),
            Some("Unreachable: neo4j (timed out); LLM: openai: model 'x' not found")
        );
        let ok = report(&probes[..1], Some((true, "ok".into())), true);
        assert_eq!((ok.status, ok.message), (HealthStatus::Ok, None));
        assert_eq!(report(&[], None, false).status, HealthStatus::Error);
    }

    #[test]
    fn a_card_too_large_is_reported_as_unusable_not_unreachable() {
        let too_large = card_problem(CardError::TooLarge {
            server: "peer".into(),
            shown: "http://peer.example".into(),
        });
        assert!(
            matches!(too_large, ProbeError::CardUnusable(_)),
            "{too_large:?}"
        );
        let refused = card_problem(CardError::Unreachable {
            server: "peer".into(),
            shown: "http://peer.example".into(),
            why: "connection refused".into(),
        });
        assert_eq!(
            refused,
            ProbeError::Unreachable("connection refused".into())
        );
    }
}
