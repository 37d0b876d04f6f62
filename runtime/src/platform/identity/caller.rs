//! Who a request comes from, once the identity service has decided: anyone (authentication
//! is off), or a known principal in a tenant with its scopes. Services ask a [`Caller`]
//! whether it may see what a [`Principal`] owns; they never look at tokens.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Who owns a task or a conversation: a token's issuer and subject, or an API key's
/// principal (no issuer), in a tenant (none when the deployment has no tenants).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Principal {
    /// The token's `iss`; `None` for an API key's principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The token's `sub`, or the API key's principal name.
    pub subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl Principal {
    /// A short, fixed-length name of this principal for store keys: no id a caller chose
    /// reaches a key unencoded, and two principals (or tenants) never share a key.
    pub fn key(&self) -> String {
        format!(
            "{}.{}",
            digest(&[self.tenant.as_deref().unwrap_or("")], 8),
            digest(
                &[
                    self.tenant.as_deref().unwrap_or(""),
                    self.issuer.as_deref().unwrap_or(""),
                    &self.subject,
                ],
                16
            )
        )
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.issuer {
            Some(issuer) => write!(f, "{}@{}", self.subject, redact_issuer(issuer))?,
            None => write!(f, "key:{}", self.subject)?,
        }
        if let Some(tenant) = &self.tenant {
            write!(f, " (tenant {tenant})")?;
        }
        Ok(())
    }
}

fn redact_issuer(issuer: &str) -> String {
    daedalus_contract::redact::redact_url(issuer)
}

/// Hex of the first `bytes` bytes of SHA-256 over `parts`, each length-prefixed.
fn digest(parts: &[&str], bytes: usize) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize()[..bytes]
        .iter()
        .fold(String::new(), |mut hex, b| {
            use std::fmt::Write;
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

/// The longest tenant name taken (from a claim, a key file or a path).
pub const MAX_TENANT_BYTES: usize = 256;

/// Who is calling.
#[derive(Clone, Debug, Default)]
pub enum Caller {
    /// Authentication is off: every caller is the same anyone, and sees everything.
    #[default]
    Anyone,
    /// An authenticated principal.
    Known(Arc<Known>),
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub principal: Principal,
    pub scopes: BTreeSet<String>,
    /// Holds the deployment's admin scope: sees every task and conversation of its tenant.
    pub admin: bool,
    /// How the caller proved who it is.
    pub via: Via,
}

/// The credential a caller presented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Token,
    ApiKey,
    /// None: a turn resumed from its record (durable turns) goes on for the principal that
    /// asked for it, whose credentials the record never holds.
    Resumed,
}

impl Caller {
    pub fn known(known: Known) -> Self {
        Self::Known(Arc::new(known))
    }

    /// The caller of a turn resumed from its record: the principal that asked for it (anyone
    /// when authentication was off), with no credential, no scope and no admin rights. It
    /// sees what it owns, and spends from its own budgets and its tenant's.
    pub fn resumed(principal: Option<Principal>) -> Self {
        match principal {
            None => Self::Anyone,
            Some(principal) => Self::known(Known {
                principal,
                scopes: BTreeSet::new(),
                admin: false,
                via: Via::Resumed,
            }),
        }
    }

    /// The principal that owns what this caller creates (`None` when authentication is off).
    pub fn principal(&self) -> Option<&Principal> {
        match self {
            Self::Anyone => None,
            Self::Known(known) => Some(&known.principal),
        }
    }

    pub fn tenant(&self) -> Option<&str> {
        self.principal()?.tenant.as_deref()
    }

    /// Whether this caller may see, continue or cancel what `owner` owns. Anyone (no
    /// authentication) sees everything; a principal sees its own, and an admin everything of
    /// its tenant. What nobody owns (made while authentication was off) only an admin sees.
    pub fn may_see(&self, owner: Option<&Principal>) -> bool {
        match self {
            Self::Anyone => true,
            Self::Known(known) => match owner {
                Some(owner) if *owner == known.principal => true,
                Some(owner) => known.admin && owner.tenant == known.principal.tenant,
                None => known.admin,
            },
        }
    }

    /// The caller in tenant `tenant`, named by the request's path: a caller whose
    /// credential names another tenant is refused; one whose credential names none takes it.
    pub fn in_tenant(self, tenant: Option<&str>) -> Result<Self, TenantMismatch> {
        let (Some(named), Self::Known(known)) = (tenant.filter(|t| !t.is_empty()), &self) else {
            return Ok(self);
        };
        if named.len() > MAX_TENANT_BYTES {
            return Err(TenantMismatch);
        }
        match known.principal.tenant.as_deref() {
            Some(own) if own == named => Ok(self),
            Some(_) => Err(TenantMismatch),
            None => {
                let mut known = Known::clone(known);
                known.principal.tenant = Some(named.to_owned());
                Ok(Self::known(known))
            }
        }
    }

    /// A namespace for the conversations this caller keeps: `None` when authentication is off
    /// (conversations are keyed as they always were).
    pub fn conversation_space(&self) -> Option<String> {
        self.principal().map(Principal::key)
    }

    /// A label for logs and spans: never a credential.
    pub fn label(&self) -> String {
        match self {
            Self::Anyone => "anyone".to_owned(),
            Self::Known(known) => known.principal.to_string(),
        }
    }
}

/// The request's path names a tenant the caller's credential does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the credential is not valid for this tenant")]
pub struct TenantMismatch;

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(subject: &str, tenant: Option<&str>) -> Principal {
        Principal {
            issuer: Some("https://idp.example".to_owned()),
            subject: subject.to_owned(),
            tenant: tenant.map(str::to_owned),
        }
    }

    fn caller(subject: &str, tenant: Option<&str>, admin: bool) -> Caller {
        Caller::known(Known {
            principal: principal(subject, tenant),
            scopes: BTreeSet::new(),
            admin,
            via: Via::Token,
        })
    }

    #[test]
    fn a_principal_sees_its_own_and_an_admin_its_tenant() {
        let alice = principal("alice", Some("acme"));
        let bob = principal("bob", Some("acme"));
        let eve = principal("eve", Some("other"));
        assert!(caller("alice", Some("acme"), false).may_see(Some(&alice)));
        assert!(!caller("alice", Some("acme"), false).may_see(Some(&bob)));
        assert!(!caller("alice", Some("acme"), false).may_see(None));
        assert!(caller("root", Some("acme"), true).may_see(Some(&bob)));
        assert!(caller("root", Some("acme"), true).may_see(None));
        assert!(!caller("root", Some("acme"), true).may_see(Some(&eve)));
        assert!(Caller::Anyone.may_see(Some(&eve)));
        assert!(Caller::Anyone.may_see(None));
    }

    #[test]
    fn the_same_subject_in_another_tenant_or_from_another_issuer_is_someone_else() {
        let a = principal("alice", Some("acme"));
        let b = principal("alice", Some("other"));
        let mut key = principal("alice", Some("acme"));
        key.issuer = None;
        assert!(!caller("alice", Some("other"), false).may_see(Some(&a)));
        assert_ne!(a.key(), b.key());
        assert_ne!(a.key(), key.key());
        assert_eq!(a.key(), principal("alice", Some("acme")).key());
        // The tenant is its own segment: keys of one tenant share a prefix.
        assert_eq!(
            a.key().split('.').next(),
            principal("bob", Some("acme")).key().split('.').next()
        );
    }

    #[test]
    fn a_path_tenant_must_agree_with_the_credential() {
        let acme = caller("alice", Some("acme"), false);
        assert!(acme.clone().in_tenant(Some("acme")).is_ok());
        assert_eq!(
            acme.clone().in_tenant(Some("other")).unwrap_err(),
            TenantMismatch
        );
        let none = caller("alice", None, false);
        assert_eq!(none.in_tenant(Some("acme")).unwrap().tenant(), Some("acme"));
        assert!(Caller::Anyone.in_tenant(Some("x")).is_ok());
        let long = "t".repeat(MAX_TENANT_BYTES + 1);
        assert_eq!(
            caller("alice", None, false)
                .in_tenant(Some(&long))
                .unwrap_err(),
            TenantMismatch
        );
    }

    #[test]
    fn labels_never_carry_an_issuer_url_s_secrets() {
        let mut p = principal("alice", None);
        p.issuer = Some("https://user:pw@idp.example/realm?token=abc".to_owned());
        let shown = p.to_string();
        assert!(!shown.contains("pw") && !shown.contains("abc"), "{shown}");
    }
}
