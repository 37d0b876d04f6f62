//! How the agent card says to authenticate (A2A v1.0 `securitySchemes` and
//! `securityRequirements`), derived from the plan so the card never disagrees with what the
//! runtime checks: OpenID Connect with the discovery URL, HTTP bearer (JWT), and the API key
//! in its header. Any one scheme is enough; each requires the configured scopes.

use std::collections::BTreeMap;

use serde::Serialize;

use super::plan::{AuthPlan, KeySource};

/// The card's scheme names.
pub const OIDC: &str = "oidc";
pub const BEARER: &str = "bearer";
pub const API_KEY: &str = "apiKey";

/// One `SecurityScheme` (a oneof: exactly one field set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SecurityScheme {
    OpenIdConnectSecurityScheme {
        #[serde(rename = "openIdConnectUrl")]
        open_id_connect_url: String,
    },
    HttpAuthSecurityScheme {
        scheme: String,
        #[serde(rename = "bearerFormat")]
        bearer_format: String,
    },
    ApiKeySecurityScheme {
        location: String,
        name: String,
    },
}

/// One `SecurityRequirement`: schemes, each with the scopes it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecurityRequirement {
    pub schemes: BTreeMap<String, StringList>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StringList {
    pub list: Vec<String>,
}

/// The card's security fields for `plan`: `None` when authentication is off.
pub fn security(
    plan: &AuthPlan,
) -> Option<(BTreeMap<String, SecurityScheme>, Vec<SecurityRequirement>)> {
    if !plan.is_on() {
        return None;
    }
    let mut schemes = BTreeMap::new();
    if let Some(tokens) = &plan.tokens {
        if let KeySource::Discovery(url) = &tokens.keys {
            schemes.insert(
                OIDC.to_owned(),
                SecurityScheme::OpenIdConnectSecurityScheme {
                    open_id_connect_url: url.clone(),
                },
            );
        }
        schemes.insert(
            BEARER.to_owned(),
            SecurityScheme::HttpAuthSecurityScheme {
                scheme: "Bearer".to_owned(),
                bearer_format: "JWT".to_owned(),
            },
        );
    }
    if let Some(keys) = &plan.api_keys {
        schemes.insert(
            API_KEY.to_owned(),
            SecurityScheme::ApiKeySecurityScheme {
                location: "header".to_owned(),
                name: keys.header.clone(),
            },
        );
    }
    let requirements = schemes
        .keys()
        .map(|name| SecurityRequirement {
            schemes: BTreeMap::from([(
                name.clone(),
                StringList {
                    list: plan.required_scopes.clone(),
                },
            )]),
        })
        .collect();
    Some((schemes, requirements))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::identity::plan::AuthSettings;

    #[test]
    fn the_card_names_every_configured_scheme_with_its_scopes() {
        let plan = AuthSettings {
            issuer: Some("https://idp.example".to_owned()),
            audience: Some("daedalus".to_owned()),
            api_keys_file: Some("/keys.yaml".into()),
            required_scopes: Some(vec!["a2a".to_owned()]),
            ..AuthSettings::default()
        }
        .plan()
        .unwrap();
        let (schemes, requirements) = security(&plan).unwrap();
        let json = serde_json::to_value(&schemes).unwrap();
        assert_eq!(
            json["oidc"]["openIdConnectSecurityScheme"]["openIdConnectUrl"],
            "https://idp.example/.well-known/openid-configuration"
        );
        assert_eq!(json["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer");
        assert_eq!(json["apiKey"]["apiKeySecurityScheme"]["name"], "X-API-Key");
        assert_eq!(json["apiKey"]["apiKeySecurityScheme"]["location"], "header");
        assert_eq!(requirements.len(), 3);
        let first = serde_json::to_value(&requirements[0]).unwrap();
        assert_eq!(first["schemes"]["apiKey"]["list"][0], "a2a");
        assert!(security(&AuthPlan::default()).is_none());
    }
}
