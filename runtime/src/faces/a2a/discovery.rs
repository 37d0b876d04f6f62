//! Discovery documents: the agent card and the runtime-contract manifest.
//!
//! Both are built once from configuration, checked against their schemas (the card against
//! the contract's and A2A v1.0's), serialized once, and served with an `ETag`, a
//! `Last-Modified` (when they were built) and `Cache-Control` so clients can cache them; a
//! matching `If-None-Match` (or, without one, an `If-Modified-Since` not before the build) is
//! answered `304`.
//!
//! With a signing key (`CARD_SIGNING_KEY`), every form of the card served carries JWS
//! signatures over its own JSON (A2A §8.4): the card (its well-known document, and the
//! extended card every binding answers, gRPC's converted from the same JSON) and the v0.3
//! card. Cards are signed again when the keys that sign change (a rotation, an overlap's end);
//! the public keys are at [`JWKS_PATH`].

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use daedalus_contract::container::{AGENT_CARD_PATH, HEALTH_PATH, TASK_PATH};
use daedalus_contract::{
    AgentCapabilities, AgentCard, AgentInterface, CONTRACT_VERSION, ManifestCapabilities,
    ManifestRuntime, ManifestServer, RuntimeContract, Schema, SchemaErrors,
};
use sha2::{Digest, Sha256};

use std::sync::PoisonError;

use daedalus_contract::card_signing;

use super::A2aFace;
use crate::config::Config;
use crate::platform::card_keys::{CardKeys, Signers};

/// The contract binding of `POST /`, as the card names it in `supportedInterfaces`.
pub const CONTRACT_BINDING: &str = "DAEDALUS-RUNTIME-CONTRACT";

/// Where the public keys of the card's signatures are served.
pub(super) const JWKS_PATH: &str = "/.well-known/jwks.json";

/// Serialized discovery documents.
#[derive(Debug)]
pub struct Discovery {
    /// The card as built, unsigned.
    unsigned: Arc<AgentCard>,
    /// The card's forms signed by the keys that signed last (and their stamp).
    signed: std::sync::Mutex<Option<Arc<SignedCards>>>,
    manifest: Document,
}

/// Every form of the card served, signed by the same keys.
#[derive(Debug)]
pub(super) struct SignedCards {
    stamp: (u64, bool),
    /// The card the bindings answer (`GetExtendedAgentCard`), with its signatures.
    pub(super) card: Arc<AgentCard>,
    /// Its well-known document.
    document: Document,
    /// The v0.3 form (`agent/getAuthenticatedExtendedCard`), with signatures of its own.
    pub(super) v03: Arc<serde_json::Value>,
}

#[derive(Debug, Clone)]
struct Document {
    body: Bytes,
    etag: HeaderValue,
    /// When the document was built, to the second (HTTP dates have no finer grain).
    built: chrono::DateTime<chrono::Utc>,
    last_modified: HeaderValue,
}

impl Document {
    fn new(value: &impl serde::Serialize) -> Self {
        Self::of(Bytes::from(
            serde_json::to_vec(value).expect("documents serialize"),
        ))
    }

    fn of(body: Bytes) -> Self {
        let digest = Sha256::digest(&body);
        let hex: String = digest[..12].iter().flat_map(|b| hex_digits(*b)).collect();
        let etag = HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a valid header");
        let now = chrono::Utc::now();
        let built = chrono::DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now);
        let last_modified = HeaderValue::from_str(&http_date(built)).expect("a valid header");
        Self {
            body,
            etag,
            built,
            last_modified,
        }
    }

    /// Whether the client's copy is this one (RFC 9110 §13.1.1, §13.1.3).
    fn cached(&self, headers: &HeaderMap) -> bool {
        if let Some(tags) = headers.get(IF_NONE_MATCH) {
            return tags.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|t| t.trim() == self.etag || t.trim() == "*")
            });
        }
        headers
            .get(IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| chrono::DateTime::parse_from_rfc2822(v).ok())
            .is_some_and(|since| since >= self.built)
    }

    fn respond(&self, headers: &HeaderMap) -> Response {
        let cached = self.cached(headers);
        let mut response = if cached {
            StatusCode::NOT_MODIFIED.into_response()
        } else {
            let mut r = Body::from(self.body.clone()).into_response();
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            r
        };
        let h = response.headers_mut();
        h.insert(ETAG, self.etag.clone());
        h.insert(LAST_MODIFIED, self.last_modified.clone());
        h.insert(
            CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=300"),
        );
        response
    }
}

/// An HTTP date (IMF-fixdate): `Sun, 06 Nov 1994 08:49:37 GMT`.
fn http_date(at: chrono::DateTime<chrono::Utc>) -> String {
    at.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

fn hex_digits(byte: u8) -> [char; 2] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    [
        char::from(DIGITS[usize::from(byte >> 4)]),
        char::from(DIGITS[usize::from(byte & 15)]),
    ]
}

impl Discovery {
    /// Every form of the card, signed by what `keys` signs with now (signed again only when
    /// that changed).
    pub(super) fn cards(&self, keys: &CardKeys) -> Arc<SignedCards> {
        let signers = keys.signers();
        let mut signed = self.signed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cards) = signed.as_ref()
            && cards.stamp == signers.stamp
        {
            return Arc::clone(cards);
        }
        let cards = Arc::new(self.sign(&signers));
        *signed = Some(Arc::clone(&cards));
        cards
    }

    /// The card's forms signed by `signers` (unsigned when they are none, or if a form does
    /// not sign, which a card built from a checked configuration always does: said in the log).
    fn sign(&self, signers: &Signers) -> SignedCards {
        let keys = signers.keys();
        let signed = |value: serde_json::Value| {
            if keys.is_empty() {
                return value;
            }
            card_signing::sign_card(&value, &keys).unwrap_or_else(|e| {
                tracing::error!(error = %e, "the agent card is served unsigned");
                value
            })
        };
        let card_json = signed(serde_json::to_value(&*self.unsigned).expect("the card serializes"));
        // The card the bindings answer: the one built, with the signatures of its JSON.
        let mut card = (*self.unsigned).clone();
        card.signatures =
            serde_json::from_value(card_json["signatures"].clone()).unwrap_or_default();
        let v03 = signed(super::standard::v03::card_json(&self.unsigned));
        SignedCards {
            stamp: signers.stamp,
            document: Document::of(Bytes::from(
                serde_json::to_vec(&card_json).expect("serializes"),
            )),
            card: Arc::new(card),
            v03: Arc::new(v03),
        }
    }

    /// Builds and checks the documents for `config`.
    pub fn new(config: &Config, bound: SocketAddr) -> Result<Self, SchemaErrors> {
        let card = build_card(config, &config.public_url_for(bound));
        let card_json = serde_json::to_value(&card).expect("the card serializes");
        Schema::AgentCard.validate(&card_json)?;
        Schema::A2aV1AgentCard.validate(&card_json)?;
        // Only a model's conversation is compacted: the test models never compact.
        let compacts = matches!(
            config.agent.model,
            crate::config::deployment::ModelRef::OpenAi(_)
                | crate::config::deployment::ModelRef::Anthropic(_)
        );
        let manifest = build_manifest(bound.port(), compacts);
        Schema::RuntimeContract.validate(&serde_json::to_value(&manifest).expect("serializes"))?;
        Ok(Self {
            unsigned: Arc::new(card),
            signed: std::sync::Mutex::new(None),
            manifest: Document::new(&manifest),
        })
    }
}

/// Where a gRPC client reaches the agent: the public URL's `host:port` (a gRPC target has no
/// scheme and no path; the service's methods are at `/lf.a2a.v1.A2AService/...` on that
/// authority, the same port as the HTTP bindings).
fn grpc_target(public_url: &str) -> Option<String> {
    let url = url::Url::parse(public_url).ok()?;
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    Some(format!("{host}:{port}"))
}

fn build_card(config: &Config, public_url: &str) -> AgentCard {
    let agent = &config.agent;
    let (security_schemes, security_requirements) = security(config);
    let grpc = grpc_target(public_url).map(|url| AgentInterface {
        url,
        protocol_binding: "GRPC".to_owned(),
        protocol_version: super::operations::VERSION.to_owned(),
        tenant: None,
    });
    AgentCard {
        name: agent.name.clone(),
        description: agent.description.clone(),
        supported_interfaces: [
            AgentInterface {
                url: format!("{public_url}{TASK_PATH}"),
                protocol_binding: CONTRACT_BINDING.to_owned(),
                protocol_version: "1.0".to_owned(),
                tenant: None,
            },
            // The same `POST /`, for a JSON-RPC body.
            AgentInterface {
                url: format!("{public_url}{TASK_PATH}"),
                protocol_binding: "JSONRPC".to_owned(),
                protocol_version: super::operations::VERSION.to_owned(),
                tenant: None,
            },
            // The same `POST /`, for a v0.3 JSON-RPC client (`message/send`, ...).
            AgentInterface {
                url: format!("{public_url}{TASK_PATH}"),
                protocol_binding: "JSONRPC".to_owned(),
                protocol_version: super::standard::v03::VERSION.to_owned(),
                tenant: None,
            },
            AgentInterface {
                url: format!("{public_url}{}", super::standard::rest::REST_PATH),
                protocol_binding: "HTTP+JSON".to_owned(),
                protocol_version: super::operations::VERSION.to_owned(),
                tenant: None,
            },
        ]
        .into_iter()
        .chain(grpc)
        .collect(),
        provider: None,
        version: agent.version.clone(),
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(config.a2a_streaming),
            push_notifications: Some(config.push.enabled),
            // Served only to callers who prove who they are (A2A §13.3): with no scheme to
            // prove it by, there is no extended card.
            extended_agent_card: Some(security_requirements.is_some()),
            extensions: None,
        },
        security_schemes,
        security_requirements,
        default_input_modes: vec!["text/plain".to_owned(), "application/json".to_owned()],
        default_output_modes: vec!["text/plain".to_owned()],
        skills: agent.skills.clone(),
        icon_url: None,
        signatures: Vec::new(),
    }
}

/// The card's `securitySchemes` and `securityRequirements`: what the runtime checks.
fn security(
    config: &Config,
) -> (
    Option<daedalus_contract::model::Metadata>,
    Option<Vec<serde_json::Value>>,
) {
    let Some((schemes, requirements)) = crate::platform::identity::card::security(&config.auth)
    else {
        return (None, None);
    };
    let schemes = match serde_json::to_value(schemes) {
        Ok(serde_json::Value::Object(map)) => Some(map),
        _ => None,
    };
    let requirements = requirements
        .iter()
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();
    (schemes, Some(requirements))
}

fn build_manifest(port: u16, compacts: bool) -> RuntimeContract {
    RuntimeContract {
        contract_version: CONTRACT_VERSION.to_owned(),
        runtime: ManifestRuntime {
            name: "daedalus-runtime".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            description: Some("Daedalus agent runtime (Rust reference implementation)".into()),
        },
        server: Some(ManifestServer {
            port: Some(port),
            health_path: Some(HEALTH_PATH.to_owned()),
            agent_card_path: Some(AGENT_CARD_PATH.to_owned()),
            task_path: Some(TASK_PATH.to_owned()),
        }),
        capabilities: ManifestCapabilities {
            streaming: true,
            trace_context: true,
            graceful_shutdown: true,
            context_compaction: compacts,
        },
        conformance_level: 3,
    }
}

pub(super) async fn agent_card(State(state): State<A2aFace>, headers: HeaderMap) -> Response {
    let served = state.served();
    served
        .discovery
        .cards(state.core().card_keys())
        .document
        .respond(&headers)
}

/// The public keys that verify the card's signatures, as a JWKS (no keys when cards are not
/// signed).
pub(super) async fn jwks(State(state): State<A2aFace>) -> Response {
    let mut response = axum::Json(state.core().card_keys().jwks()).into_response();
    response.headers_mut().insert(
        CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}

pub(super) async fn manifest(State(state): State<A2aFace>, headers: HeaderMap) -> Response {
    state.served().discovery.manifest.respond(&headers)
}
