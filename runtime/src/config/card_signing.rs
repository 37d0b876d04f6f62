//! The key that signs the agent cards served: `CARD_SIGNING_*`, else the served agent's
//! `card_signing`, read and proven to sign before anything binds, and how `--check-config`
//! shows it (never the key).

use serde::Serialize;

use super::deployment::AgentDef;
use super::flags::Cli;
use super::{ConfigError, SigningPlan, format_duration, not_an_http_url};

/// The signing key as `--check-config` shows it: its `kid`, algorithm, `jku` and overlap,
/// never the key.
#[expect(clippy::ref_option, reason = "serde's serialize_with passes &Option")]
pub(super) fn shown<S: serde::Serializer>(
    plan: &Option<SigningPlan>,
    s: S,
) -> Result<S::Ok, S::Error> {
    plan.as_ref()
        .map(|p| {
            serde_json::json!({
                "kid": p.key.kid(),
                "alg": p.key.algorithm().name(),
                "jku": p.key.jku(),
                "overlap": format_duration(p.overlap),
            })
        })
        .serialize(s)
}

/// The card signing key `CARD_SIGNING_KEY` names (else the served agent's `card_signing`),
/// read and proven to sign; an unusable key is refused naming the setting, never showing the
/// key.
pub(super) fn plan(
    cli: &Cli,
    served: &AgentDef,
    key_of: &dyn Fn(&str, &str) -> String,
) -> Result<Option<SigningPlan>, ConfigError> {
    let from_agent = served.card_signing.as_ref();
    let (path, kid, jku, key_name, jku_name) = match (&cli.card_signing_key, from_agent) {
        (Some(path), _) => (
            path.clone(),
            cli.card_signing_kid.clone(),
            cli.card_signing_jku.clone(),
            key_of("card_signing_key", "--card-signing-key"),
            key_of("card_signing_jku", "--card-signing-jku"),
        ),
        (None, Some(def)) => {
            let at = format!("agents.{}.card_signing", served.name);
            (
                def.key_file.clone(),
                cli.card_signing_kid.clone().or_else(|| def.kid.clone()),
                cli.card_signing_jku.clone().or_else(|| def.jku.clone()),
                format!("{at}.key_file"),
                format!("{at}.jku"),
            )
        }
        (None, None) => {
            for (id, flag, set) in [
                (
                    "card_signing_kid",
                    "--card-signing-kid",
                    cli.card_signing_kid.is_some(),
                ),
                (
                    "card_signing_jku",
                    "--card-signing-jku",
                    cli.card_signing_jku.is_some(),
                ),
            ] {
                if set {
                    return Err(ConfigError::invalid(
                        &key_of(id, flag),
                        "names a signing key, but CARD_SIGNING_KEY is not set",
                    ));
                }
            }
            return Ok(None);
        }
    };
    let bytes = std::fs::read(&path).map_err(|e| {
        ConfigError::invalid(
            &key_name,
            format!("cannot read {}: {}", path.display(), e.kind()),
        )
    })?;
    if let Some(why) = jku.as_deref().and_then(not_an_http_url) {
        return Err(ConfigError::invalid(&jku_name, why));
    }
    let key = daedalus_contract::card_signing::SigningKey::read(
        &bytes,
        kid.as_deref().filter(|k| !k.is_empty()),
        jku.as_deref(),
    )
    .map_err(|e| ConfigError::invalid(&key_name, format!("{}: {e}", path.display())))?;
    Ok(Some(SigningPlan {
        key: std::sync::Arc::new(key),
        overlap: cli.card_signing_overlap,
    }))
}
