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

/// `keys` (key, principal, tenant) as an API key file: SHA-256 hashes only.
pub fn api_key_file(path: &std::path::Path, keys: &[(&str, &str, &str)]) {
    use std::fmt::Write;
    let mut text = String::from("keys:\n");
    for (key, principal, tenant) in keys {
        let hash = daedalus_runtime::platform::identity::api_keys::hash_hex(key);
        let _ = write!(
            text,
            "  - sha256: {hash}\n    principal: {principal}\n    tenant: {tenant}\n    scopes: [a2a]\n"
        );
    }
    std::fs::write(path, text).expect("the key file is written");
}
