//! Reading another A2A agent's card: where it is, its bytes (bounded in time and size), and
//! why it could not be used.

use std::time::Duration;

use super::trust::CardRefused;
use crate::config::deployment::McpServer;

/// How long reading a card may take.
const CARD_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest card read: past it the agent offers no tools (a card is a few KiB).
const CARD_MAX_BYTES: usize = 1 << 20;

/// Why an A2A agent's card is not used. Kept with the card's cache entry, so it is `Clone`;
/// never shows a URL's credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardError {
    #[error("no A2A agent named {0}")]
    Unknown(String),
    /// The transport failed (its reason without the URL).
    #[error("cannot read {server}'s agent card at {shown}: {why}")]
    Unreachable {
        server: String,
        shown: String,
        why: String,
    },
    #[error("{server}'s agent card at {shown} answered {status}")]
    Answered {
        server: String,
        shown: String,
        status: u16,
    },
    #[error("{server}'s agent card at {shown} is larger than {CARD_MAX_BYTES} bytes")]
    TooLarge { server: String, shown: String },
    #[error("{server}'s agent card is not JSON: {why}")]
    NotJson { server: String, why: String },
    #[error("{server} is not trusted: {refused}")]
    Untrusted {
        server: String,
        #[source]
        refused: CardRefused,
    },
    #[error("{server}'s agent card is not an A2A card: {why}")]
    NotACard { server: String, why: String },
}

/// The bytes of `server`'s card (at its entry's URL, with its headers), bounded in time and
/// in bytes.
pub async fn read(
    http: &reqwest::Client,
    server: &str,
    def: &McpServer,
) -> Result<bytes::Bytes, CardError> {
    let shown = crate::config::redact_url(&def.url);
    let unreachable = |e: reqwest::Error| CardError::Unreachable {
        server: server.to_owned(),
        shown: shown.clone(),
        why: e.without_url().to_string(),
    };
    let mut request = http.get(card_url(&def.url)).timeout(CARD_TIMEOUT);
    for (name, value) in &def.headers {
        request = request.header(name, value);
    }
    let mut response = request.send().await.map_err(unreachable)?;
    if !response.status().is_success() {
        return Err(CardError::Answered {
            server: server.to_owned(),
            shown: shown.clone(),
            status: response.status().as_u16(),
        });
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        if body.len() + chunk.len() > CARD_MAX_BYTES {
            return Err(CardError::TooLarge {
                server: server.to_owned(),
                shown,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// Where the card of an entry whose `url` is `url` is: the URL itself when it names a JSON
/// document, else the well-known path under it.
pub fn card_url(url: &str) -> String {
    let is_json = std::path::Path::new(url)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if is_json {
        url.to_owned()
    } else {
        format!(
            "{}{}",
            url.trim_end_matches('/'),
            daedalus_contract::container::AGENT_CARD_PATH
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::deployment::{CardTrust, ServerKind};

    /// An A2A agent whose card route answers `status` with `body`; its entry.
    async fn agent_answering(status: u16, body: Vec<u8>) -> McpServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!(
            "http://user:secret@{}",
            listener.local_addr().expect("addr")
        );
        let status = axum::http::StatusCode::from_u16(status).expect("a status");
        let app = axum::Router::new().route(
            daedalus_contract::container::AGENT_CARD_PATH,
            axum::routing::get(move || async move { (status, body) }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        McpServer {
            kind: ServerKind::A2a,
            url,
            headers: std::collections::BTreeMap::new(),
            forward_inbound_auth: false,
            auth: None,
            call_timeout: None,
            idempotent: false,
            trust: CardTrust::default(),
        }
    }

    #[tokio::test]
    async fn a_card_is_read_whole_up_to_its_bound_and_refused_past_it() {
        let http = reqwest::Client::new();
        let card = agent_answering(200, vec![b' '; CARD_MAX_BYTES]).await;
        let bytes = read(&http, "peer", &card).await.expect("at the bound");
        assert_eq!(bytes.len(), CARD_MAX_BYTES);

        let huge = agent_answering(200, vec![b' '; CARD_MAX_BYTES + 1]).await;
        let refused = read(&http, "peer", &huge).await.expect_err("past it");
        assert!(matches!(refused, CardError::TooLarge { .. }), "{refused:?}");
        let said = refused.to_string();
        assert!(!said.contains("secret"), "no credentials shown: {said}");
    }

    #[tokio::test]
    async fn an_answer_other_than_2xx_is_refused_with_its_status() {
        let http = reqwest::Client::new();
        let gone = agent_answering(404, Vec::new()).await;
        let refused = read(&http, "peer", &gone).await.expect_err("404");
        assert!(
            matches!(refused, CardError::Answered { status: 404, .. }),
            "{refused:?}"
        );
    }
}
