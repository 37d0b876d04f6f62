//! The runtime's own credential for a downstream server (`mcp.servers.<name>.auth`), kept
//! across calls: its OAuth2 client-credentials token, or the exchange (RFC 8693) that turns a
//! caller's token into one for the server. Both the MCP client and the A2A agent tools present
//! it.

use std::sync::Arc;

use daedalus_contract::credentials::exchange::TokenExchange;
use daedalus_contract::credentials::{CredentialSource, Credentials};

use crate::config::deployment::{DownstreamAuth, McpServer};
use crate::platform::bearer::Bearer;

/// The runtime's credential for one server, kept (and refreshed) across calls.
#[derive(Debug, Clone)]
pub enum Downstream {
    Own(Arc<Credentials>),
    Exchange(Arc<TokenExchange>),
}

impl Downstream {
    /// The credential `server`'s `auth` block configures.
    pub fn of(server: &McpServer) -> Option<Self> {
        Some(match server.auth.clone()? {
            DownstreamAuth::Oauth2ClientCredentials(client) => Self::Own(Arc::new(
                Credentials::new(CredentialSource::ClientCredentials(client)),
            )),
            DownstreamAuth::TokenExchange(client) => {
                Self::Exchange(Arc::new(TokenExchange::new(client)))
            }
        })
    }

    /// The token to present for a call on behalf of the caller holding `bearer`.
    pub async fn token(&self, bearer: &Bearer) -> Result<String, CredentialError> {
        match self {
            Self::Own(credentials) => credentials
                .bearer()
                .await
                .map(|t| t.expose().to_owned())
                .map_err(|e| CredentialError(e.to_string())),
            Self::Exchange(exchange) => {
                let subject = bearer.expose().ok_or_else(|| {
                    CredentialError(
                        "the call carries no caller token to exchange (token_exchange needs the caller's bearer)"
                            .to_owned(),
                    )
                })?;
                exchange
                    .exchange(subject)
                    .await
                    .map(|t| t.expose().to_owned())
                    .map_err(|e| CredentialError(e.to_string()))
            }
        }
    }
}

/// The runtime has no token for the server now: its token endpoint failed, or there is no
/// caller token to exchange.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no credential for the server: {0}")]
pub struct CredentialError(pub String);
