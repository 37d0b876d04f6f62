//! The caller's bearer token: taken from an inbound request, handed to the downstream servers
//! and the LLM providers that opted into forwarding, for that request only. Never printed.

use std::fmt;

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

    /// The `Authorization: Bearer` token of an inbound request, if any.
    pub fn from_headers(headers: &http::HeaderMap) -> Self {
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
