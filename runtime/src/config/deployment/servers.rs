//! The downstream servers of `mcp:` validated: each entry's URL, type, call timeout, card
//! trust, and its `auth` block (one credential a server is given, and its secret).

use std::collections::BTreeMap;

use super::file::{DownstreamAuthFile, McpFile, McpServerFile};
use super::{CardTrust, DeploymentError, DownstreamAuth, McpServer, ServerKind};

/// The downstream servers of `mcp:`, each checked, A2A agents trusting `mcp.trust` unless
/// they say otherwise.
pub(super) fn mcp_servers_of(
    file: &str,
    mcp: McpFile,
) -> Result<BTreeMap<String, McpServer>, DeploymentError> {
    let default_trust = mcp
        .trust
        .map(|t| super::trust::card_trust(file, "mcp.trust", t))
        .transpose()?
        .unwrap_or_default();
    let mut servers = BTreeMap::new();
    for (name, server) in mcp.servers {
        let server = downstream_server(file, &name, server, &default_trust)?;
        servers.insert(name, server);
    }
    Ok(servers)
}

/// One `mcp.servers.<name>` entry, checked.
fn downstream_server(
    file: &str,
    name: &str,
    server: McpServerFile,
    default_trust: &CardTrust,
) -> Result<McpServer, DeploymentError> {
    let url =
        server
            .url
            .filter(|u| !u.is_empty())
            .ok_or_else(|| DeploymentError::ServerWithoutUrl {
                file: file.to_owned(),
                server: name.to_owned(),
            })?;
    let call_timeout = match server.read_timeout_seconds {
        None => None,
        Some(secs) if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 => {
            Some(std::time::Duration::from_secs_f64(secs))
        }
        Some(secs) => {
            return Err(DeploymentError::Shape {
                file: file.to_owned(),
                path: format!("mcp.servers.{name}.read_timeout_seconds"),
                message: format!("{secs} is not a number of seconds between 0 and 86400"),
            });
        }
    };
    let kind = match server.kind.as_deref() {
        None | Some("mcp") => ServerKind::Mcp,
        Some("a2a") => ServerKind::A2a,
        Some(other) => {
            return Err(DeploymentError::Shape {
                file: file.to_owned(),
                path: format!("mcp.servers.{name}.type"),
                message: format!("{other:?} is not a server type: use mcp (the default) or a2a"),
            });
        }
    };
    let auth = match server.auth {
        Some(block) => Some(auth_of(
            file,
            name,
            block,
            server.forward_inbound_auth,
            &server.headers,
        )?),
        None => None,
    };
    let trust = match (kind, server.trust) {
        (ServerKind::A2a, Some(trust)) => {
            super::trust::card_trust(file, &format!("mcp.servers.{name}.trust"), trust)?
        }
        (ServerKind::A2a, None) => default_trust.clone(),
        (ServerKind::Mcp, Some(_)) => {
            return Err(DeploymentError::Shape {
                file: file.to_owned(),
                path: format!("mcp.servers.{name}.trust"),
                message: "only an A2A agent (type: a2a) has a card to trust".to_owned(),
            });
        }
        (ServerKind::Mcp, None) => CardTrust::default(),
    };
    Ok(McpServer {
        kind,
        url,
        headers: server.headers,
        forward_inbound_auth: server.forward_inbound_auth,
        auth,
        call_timeout,
        idempotent: server.idempotent,
        trust,
    })
}

/// Server `name`'s `auth` block, checked ([`downstream_auth`]), and the only credential it
/// is given: not with `forward_inbound_auth`, nor with an `Authorization` header.
fn auth_of(
    file: &str,
    name: &str,
    block: DownstreamAuthFile,
    forward_inbound_auth: bool,
    headers: &BTreeMap<String, String>,
) -> Result<DownstreamAuth, DeploymentError> {
    let auth = downstream_auth(file, name, block)?;
    let clash = if forward_inbound_auth {
        Some("forward_inbound_auth")
    } else if headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"))
    {
        Some("headers.Authorization")
    } else {
        None
    };
    match clash {
        Some(other) => Err(DeploymentError::Shape {
            file: file.to_owned(),
            path: format!("mcp.servers.{name}.auth"),
            message: format!("and {other} both give this server a credential; keep one"),
        }),
        None => Ok(auth),
    }
}

/// An `mcp.servers.<name>.auth` block, checked: its type, a token URL, a client id, one
/// secret (inline, where `${VAR}` takes it from the environment, or from a file), and an
/// audience for an exchange.
fn downstream_auth(
    file: &str,
    name: &str,
    block: DownstreamAuthFile,
) -> Result<DownstreamAuth, DeploymentError> {
    let wrong = |key: &str, message: String| DeploymentError::Shape {
        file: file.to_owned(),
        path: format!(
            "mcp.servers.{name}.auth{}",
            if key.is_empty() {
                String::new()
            } else {
                format!(".{key}")
            }
        ),
        message,
    };
    let present = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let token_url =
        present(block.token_url).ok_or_else(|| wrong("token_url", "is required".to_owned()))?;
    if let Some(why) = crate::config::not_an_http_url(&token_url) {
        return Err(wrong("token_url", why));
    }
    let client_id =
        present(block.client_id).ok_or_else(|| wrong("client_id", "is required".to_owned()))?;
    let secret = match (present(block.client_secret), block.client_secret_file) {
        (Some(secret), None) => secret,
        (None, Some(path)) => std::fs::read_to_string(&path)
            .map(|s| s.trim().to_owned())
            .map_err(|e| {
                wrong(
                    "client_secret_file",
                    format!("cannot read {}: {e}", path.display()),
                )
            })?,
        (None, None) => {
            return Err(wrong(
                "client_secret",
                "is required (write ${VAR} to take it from the environment), or client_secret_file"
                    .to_owned(),
            ));
        }
        (Some(_), Some(_)) => {
            return Err(wrong(
                "client_secret",
                "and client_secret_file both name the secret; keep one".to_owned(),
            ));
        }
    };
    let client = daedalus_contract::credentials::OAuthClient {
        token_url,
        client_id,
        client_secret: daedalus_contract::credentials::Secret::new(secret),
        scope: present(block.scope),
        audience: present(block.audience),
    };
    match block.kind.as_deref() {
        Some("oauth2_client_credentials") => Ok(DownstreamAuth::Oauth2ClientCredentials(client)),
        Some("token_exchange") => {
            if client.audience.is_none() {
                return Err(wrong(
                    "audience",
                    "is required for token_exchange (the server's own audience)".to_owned(),
                ));
            }
            Ok(DownstreamAuth::TokenExchange(client))
        }
        Some(other) => Err(wrong(
            "type",
            format!(
                "{other:?} is not a credential type: use oauth2_client_credentials or token_exchange"
            ),
        )),
        None => Err(wrong(
            "type",
            "is required: oauth2_client_credentials or token_exchange".to_owned(),
        )),
    }
}
