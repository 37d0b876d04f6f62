//! The runtime binary checking tokens of the test kit's OpenID provider.

use daedalus_test_kit::OidcProvider;

use super::process::{RuntimeBuilder, runtime};

/// A runtime checking tokens of `provider` (admins hold `admin`, the tenant is the `tenant`
/// claim), logging everything.
pub fn guarded(provider: &OidcProvider) -> RuntimeBuilder {
    runtime()
        .env("AUTH_ISSUER", provider.issuer())
        .env("AUTH_AUDIENCE", daedalus_test_kit::AUDIENCE)
        .env("AUTH_ADMIN_SCOPE", "admin")
        .env("AUTH_TENANT_CLAIM", "tenant")
        .env("LOG_LEVEL", "debug")
}
