//! The caller's bearer token: taken from an inbound request, handed to the downstream servers
//! and the LLM providers that opted into forwarding (or exchanging it), for that request only.
//! Never printed.
//!
//! Only a token that authenticated the caller *as a token* is taken. An API key may come as the
//! bearer too, but it is the runtime's own long-lived secret: it never leaves the runtime,
//! neither forwarded (`forward_inbound_auth`) nor exchanged (`token_exchange`).

use std::fmt;

use crate::platform::identity::{Caller, Via};

/// The caller's credentials for one request: forwarded, for that request only, to the servers
/// that opted in. Never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Bearer(Option<String>);

impl Bearer {
    pub fn new(token: Option<String>) -> Self {
        Self(token.filter(|t| !t.is_empty()))
    }

    /// The token, for building the outbound header.
    pub fn expose(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// The bearer token of an inbound request from `caller`, as it may be handed on: the
    /// `Authorization: Bearer` token when the caller authenticated with it as a token, or
    /// when authentication is off; none for a caller that presented an API key (in whichever
    /// header).
    pub fn of(caller: &Caller, headers: &http::HeaderMap) -> Self {
        match caller {
            Caller::Known(known) if known.via != Via::Token => Self::default(),
            Caller::Known(_) | Caller::Anyone => Self::from_headers(headers),
        }
    }

    /// The `Authorization: Bearer` token of an inbound request, if any.
    fn from_headers(headers: &http::HeaderMap) -> Self {
        let token = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(|t| t.trim().to_owned());
        Self::new(token)
    }
}

impl fmt::Debug for Bearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Bearer(***)"
        } else {
            "Bearer(none)"
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::platform::identity::{Known, Principal};

    fn headers(authorization: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_str(authorization).unwrap(),
        );
        headers
    }

    fn known(via: Via) -> Caller {
        Caller::known(Known {
            principal: Principal {
                issuer: None,
                subject: "ci-bot".to_owned(),
                tenant: None,
            },
            scopes: BTreeSet::new(),
            admin: false,
            via,
        })
    }

    #[test]
    fn a_token_is_handed_on_and_an_api_key_sent_as_the_bearer_never_is() {
        let sent = headers("Bearer eyJ.token.sig");
        assert_eq!(
            Bearer::of(&known(Via::Token), &sent).expose(),
            Some("eyJ.token.sig")
        );
        assert_eq!(
            Bearer::of(&Caller::Anyone, &sent).expose(),
            Some("eyJ.token.sig")
        );
        let key = headers("Bearer dk_live_secret");
        assert_eq!(Bearer::of(&known(Via::ApiKey), &key).expose(), None);
    }
}
