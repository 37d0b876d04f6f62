//! Inbound authentication, as configured (`config::auth`): the `AUTH_*` variables over the deployment file's
//! `auth:` block, validated into one [`AuthPlan`] before anything binds. Off unless a token
//! issuer or an API key file is named: the pod, where the proxy reaches the runtime on
//! localhost, keeps working unchanged.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use daedalus_contract::redact::redact_url;

/// The `auth:` block of the deployment file (and, key by key, what `AUTH_*` overrides).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSettings {
    /// The token issuer (`iss`); its OIDC discovery document names the signing keys.
    pub issuer: Option<String>,
    /// The audience (`aud`) tokens must be for.
    pub audience: Option<String>,
    /// The signing keys' JWKS, instead of the discovery document's.
    pub jwks_url: Option<String>,
    /// A JWKS file instead (read again when a token names a key it lacks, and on SIGHUP).
    pub jwks_file: Option<PathBuf>,
    /// Allowed clock difference for `exp` and `nbf`, in seconds.
    pub clock_skew: Option<u64>,
    /// The API keys (hashed), with their principals, tenants and scopes.
    pub api_keys_file: Option<PathBuf>,
    /// The header an API key travels in.
    pub api_key_header: Option<String>,
    /// Scopes every caller must hold (else `403 insufficient_scope`).
    pub required_scopes: Option<Vec<String>>,
    /// The scope that sees every task and conversation of its tenant.
    pub admin_scope: Option<String>,
    /// The token claim that names the caller's tenant.
    pub tenant_claim: Option<String>,
    /// Who may read `/metrics`: `open`, `caller` (any authenticated caller) or
    /// `scope:<name>`.
    pub metrics: Option<String>,
}

/// How inbound requests are authenticated: validated, secrets nowhere in it (the API keys
/// file holds hashes, and only its path is here).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AuthPlan {
    /// Bearer tokens (JWT), when an issuer is configured.
    pub tokens: Option<TokenPlan>,
    /// API keys, when a key file is configured.
    pub api_keys: Option<ApiKeyPlan>,
    pub required_scopes: Vec<String>,
    pub admin_scope: Option<String>,
    pub tenant_claim: Option<String>,
    pub metrics: MetricsAccess,
}

/// Bearer tokens: who issues them, for whom, and where their keys are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenPlan {
    #[serde(serialize_with = "redacted")]
    pub issuer: String,
    pub audience: String,
    pub keys: KeySource,
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub clock_skew: Duration,
}

/// Where the token signing keys come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeySource {
    /// `<issuer>/.well-known/openid-configuration`'s `jwks_uri`.
    Discovery(#[serde(serialize_with = "redacted")] String),
    Url(#[serde(serialize_with = "redacted")] String),
    File(PathBuf),
}

/// API keys: the file of hashes, and the header they come in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiKeyPlan {
    pub file: PathBuf,
    pub header: String,
}

/// Who may read `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricsAccess {
    /// Anyone (the default: scrapers rarely authenticate, and metrics hold no secrets).
    #[default]
    Open,
    /// Any authenticated caller.
    Caller,
    /// A caller holding this scope.
    Scope(String),
}

/// The default header of API keys.
pub const API_KEY_HEADER: &str = "X-API-Key";
/// The default clock skew allowed on `exp` and `nbf`.
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);
/// The largest clock skew accepted.
const MAX_CLOCK_SKEW: Duration = Duration::from_mins(5);

fn redacted<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(url))
}

/// Why the authentication settings are wrong: the key, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {why}")]
pub struct AuthConfigError {
    pub key: &'static str,
    pub why: String,
}

fn invalid(key: &'static str, why: impl Into<String>) -> AuthConfigError {
    AuthConfigError {
        key,
        why: why.into(),
    }
}

impl AuthSettings {
    /// These settings, each overridden by `over`'s where it has one (the environment wins
    /// over the file).
    #[must_use]
    pub fn over(self, over: AuthSettings) -> AuthSettings {
        AuthSettings {
            issuer: over.issuer.or(self.issuer),
            audience: over.audience.or(self.audience),
            jwks_url: over.jwks_url.or(self.jwks_url),
            jwks_file: over.jwks_file.or(self.jwks_file),
            clock_skew: over.clock_skew.or(self.clock_skew),
            api_keys_file: over.api_keys_file.or(self.api_keys_file),
            api_key_header: over.api_key_header.or(self.api_key_header),
            required_scopes: over.required_scopes.or(self.required_scopes),
            admin_scope: over.admin_scope.or(self.admin_scope),
            tenant_claim: over.tenant_claim.or(self.tenant_claim),
            metrics: over.metrics.or(self.metrics),
        }
    }

    /// The plan these settings describe, or the first key that is wrong.
    pub fn plan(self) -> Result<AuthPlan, AuthConfigError> {
        let present = |v: Option<String>| v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        let issuer = present(self.issuer);
        let audience = present(self.audience);
        let jwks_url = present(self.jwks_url);
        let jwks_file = self.jwks_file.filter(|p| !p.as_os_str().is_empty());
        let tokens = token_plan(issuer, audience, jwks_url, jwks_file, self.clock_skew)?;
        let header = present(self.api_key_header).unwrap_or_else(|| API_KEY_HEADER.to_owned());
        if http::HeaderName::from_bytes(header.as_bytes()).is_err()
            || header.eq_ignore_ascii_case("authorization")
        {
            return Err(invalid(
                "AUTH_API_KEY_HEADER",
                format!("{header:?} is not a header name an API key can travel in"),
            ));
        }
        let api_keys = self
            .api_keys_file
            .filter(|p| !p.as_os_str().is_empty())
            .map(|file| ApiKeyPlan { file, header });
        let scopes = |list: Option<Vec<String>>| -> Vec<String> {
            let mut list: Vec<String> = list
                .unwrap_or_default()
                .into_iter()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect();
            list.sort();
            list.dedup();
            list
        };
        let required_scopes = scopes(self.required_scopes);
        for scope in &required_scopes {
            check_scope("AUTH_REQUIRED_SCOPES", scope)?;
        }
        let admin_scope = present(self.admin_scope);
        if let Some(scope) = &admin_scope {
            check_scope("AUTH_ADMIN_SCOPE", scope)?;
        }
        let metrics = metrics_access(present(self.metrics).as_deref())?;
        let plan = AuthPlan {
            tokens,
            api_keys,
            required_scopes,
            admin_scope,
            tenant_claim: present(self.tenant_claim),
            metrics,
        };
        if !plan.is_on()
            && (plan.metrics != MetricsAccess::Open
                || !plan.required_scopes.is_empty()
                || plan.admin_scope.is_some())
        {
            return Err(invalid(
                "AUTH_ISSUER",
                "or AUTH_API_KEYS_FILE must be set: scopes and METRICS_AUTH need a way to authenticate callers",
            ));
        }
        Ok(plan)
    }
}

impl AuthPlan {
    /// Whether callers must authenticate at all.
    pub fn is_on(&self) -> bool {
        self.tokens.is_some() || self.api_keys.is_some()
    }
}

/// The token check the settings ask for: none without `AUTH_ISSUER` (and then none of its
/// companions may be set), else the issuer, the audience, where the signing keys come from
/// (a URL, a file, or the issuer's discovery document) and the clock skew allowed.
fn token_plan(
    issuer: Option<String>,
    audience: Option<String>,
    jwks_url: Option<String>,
    jwks_file: Option<PathBuf>,
    clock_skew: Option<u64>,
) -> Result<Option<TokenPlan>, AuthConfigError> {
    match issuer {
        None => {
            if audience.is_some() || jwks_url.is_some() || jwks_file.is_some() {
                return Err(invalid(
                    "AUTH_ISSUER",
                    "is required with AUTH_AUDIENCE, AUTH_JWKS_URL or AUTH_JWKS_FILE (tokens are checked against their issuer)",
                ));
            }
            Ok(None)
        }
        Some(issuer) => {
            check_http_url("AUTH_ISSUER", &issuer)?;
            let audience = audience.ok_or_else(|| {
                invalid(
                    "AUTH_AUDIENCE",
                    "is required with AUTH_ISSUER (tokens for another audience must be refused)",
                )
            })?;
            let keys = match (jwks_url, jwks_file) {
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        "AUTH_JWKS_URL",
                        "and AUTH_JWKS_FILE both name the signing keys; keep one",
                    ));
                }
                (Some(url), None) => {
                    check_http_url("AUTH_JWKS_URL", &url)?;
                    KeySource::Url(url)
                }
                (None, Some(file)) => KeySource::File(file),
                (None, None) => KeySource::Discovery(format!(
                    "{}/.well-known/openid-configuration",
                    issuer.trim_end_matches('/')
                )),
            };
            let clock_skew = clock_skew.map_or(CLOCK_SKEW, Duration::from_secs);
            if clock_skew > MAX_CLOCK_SKEW {
                return Err(invalid(
                    "AUTH_CLOCK_SKEW",
                    format!("must be at most {}s", MAX_CLOCK_SKEW.as_secs()),
                ));
            }
            Ok(Some(TokenPlan {
                issuer,
                audience,
                keys,
                clock_skew,
            }))
        }
    }
}

/// `METRICS_AUTH`: `open` (the default), `caller`, or `scope:<name>`.
fn metrics_access(setting: Option<&str>) -> Result<MetricsAccess, AuthConfigError> {
    Ok(match setting {
        None | Some("open") => MetricsAccess::Open,
        Some("caller") => MetricsAccess::Caller,
        Some(other) => match other.strip_prefix("scope:").map(str::trim) {
            Some(scope) if !scope.is_empty() => {
                check_scope("METRICS_AUTH", scope)?;
                MetricsAccess::Scope(scope.to_owned())
            }
            _ => {
                return Err(invalid(
                    "METRICS_AUTH",
                    format!("{other:?} is not open, caller or scope:<name>"),
                ));
            }
        },
    })
}

fn check_http_url(key: &'static str, url: &str) -> Result<(), AuthConfigError> {
    let parsed: http::Uri = url
        .parse()
        .map_err(|_| invalid(key, format!("{} is not a URL", redact_url(url))))?;
    match parsed.scheme_str() {
        Some("http" | "https") if parsed.host().is_some() => Ok(()),
        _ => Err(invalid(
            key,
            format!("{} is not an http(s) URL", redact_url(url)),
        )),
    }
}

/// A scope is one token of RFC 6749's `scope` syntax: printable ASCII, no space, `"` or `\`.
fn check_scope(key: &'static str, scope: &str) -> Result<(), AuthConfigError> {
    if scope.len() <= 128
        && scope
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
    {
        Ok(())
    } else {
        Err(invalid(key, format!("{scope:?} is not a scope")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AuthSettings {
        AuthSettings::default()
    }

    #[test]
    fn nothing_configured_is_off() {
        let plan = settings().plan().unwrap();
        assert!(!plan.is_on());
        assert_eq!(plan, AuthPlan::default());
    }

    #[test]
    fn an_issuer_needs_an_audience_and_finds_its_keys_by_discovery() {
        let e = AuthSettings {
            issuer: Some("https://idp.example/realm/".to_owned()),
            ..settings()
        }
        .plan()
        .unwrap_err();
        assert_eq!(e.key, "AUTH_AUDIENCE");
        let plan = AuthSettings {
            issuer: Some("https://idp.example/realm/".to_owned()),
            audience: Some("daedalus".to_owned()),
            ..settings()
        }
        .plan()
        .unwrap();
        let tokens = plan.tokens.unwrap();
        assert_eq!(
            tokens.keys,
            KeySource::Discovery(
                "https://idp.example/realm/.well-known/openid-configuration".to_owned()
            )
        );
        assert_eq!(tokens.clock_skew, CLOCK_SKEW);
    }

    #[test]
    fn wrong_settings_name_their_key() {
        let cases = [
            (
                AuthSettings {
                    audience: Some("a".to_owned()),
                    ..settings()
                },
                "AUTH_ISSUER",
            ),
            (
                AuthSettings {
                    issuer: Some("ftp://idp".to_owned()),
                    audience: Some("a".to_owned()),
                    ..settings()
                },
                "AUTH_ISSUER",
            ),
            (
                AuthSettings {
                    issuer: Some("https://idp".to_owned()),
                    audience: Some("a".to_owned()),
                    jwks_url: Some("https://idp/jwks".to_owned()),
                    jwks_file: Some("/k.json".into()),
                    ..settings()
                },
                "AUTH_JWKS_URL",
            ),
            (
                AuthSettings {
                    issuer: Some("https://idp".to_owned()),
                    audience: Some("a".to_owned()),
                    clock_skew: Some(3600),
                    ..settings()
                },
                "AUTH_CLOCK_SKEW",
            ),
            (
                AuthSettings {
                    api_keys_file: Some("/keys.yaml".into()),
                    api_key_header: Some("Authorization".to_owned()),
                    ..settings()
                },
                "AUTH_API_KEY_HEADER",
            ),
            (
                AuthSettings {
                    api_keys_file: Some("/keys.yaml".into()),
                    metrics: Some("everyone".to_owned()),
                    ..settings()
                },
                "METRICS_AUTH",
            ),
            (
                AuthSettings {
                    metrics: Some("caller".to_owned()),
                    ..settings()
                },
                "AUTH_ISSUER",
            ),
            (
                AuthSettings {
                    api_keys_file: Some("/keys.yaml".into()),
                    admin_scope: Some("has space".to_owned()),
                    ..settings()
                },
                "AUTH_ADMIN_SCOPE",
            ),
        ];
        for (settings, key) in cases {
            assert_eq!(
                settings.clone().plan().unwrap_err().key,
                key,
                "{settings:?}"
            );
        }
    }

    #[test]
    fn the_environment_wins_over_the_file_key_by_key() {
        let file = AuthSettings {
            issuer: Some("https://file".to_owned()),
            audience: Some("from-file".to_owned()),
            ..settings()
        };
        let env = AuthSettings {
            issuer: Some("https://env".to_owned()),
            ..settings()
        };
        let merged = file.over(env);
        assert_eq!(merged.issuer.as_deref(), Some("https://env"));
        assert_eq!(merged.audience.as_deref(), Some("from-file"));
    }

    #[test]
    fn the_plan_as_printed_masks_url_secrets() {
        let plan = AuthSettings {
            issuer: Some("https://user:secret@idp.example/realm?key=hidden".to_owned()),
            audience: Some("a".to_owned()),
            api_keys_file: Some("/keys.yaml".into()),
            ..settings()
        }
        .plan()
        .unwrap();
        let shown = serde_json::to_string(&plan).unwrap();
        assert!(
            !shown.contains("secret") && !shown.contains("hidden"),
            "{shown}"
        );
        assert!(shown.contains("X-API-Key"), "{shown}");
    }
}
