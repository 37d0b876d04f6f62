//! Checks of `GET /health`, the agent card and the optional manifest.

use daedalus_contract::{Schema, card_signing};
use serde::Deserialize;
use serde_json::Value;

use super::{Evidence, Verdict, fail, skip};
use crate::check::Outcome;

pub(super) fn health(e: &Evidence) -> Verdict {
    #[derive(Deserialize)]
    struct Health {
        status: Option<Value>,
    }
    let body = e.health.json_200().map_err(fail)?;
    let health: Health = serde_json::from_value(body.clone())
        .map_err(|_| fail(format!("the health body is not an object: {body}")))?;
    match health.status {
        Some(Value::String(s)) if s == "ok" => Ok(()),
        other => Err(fail(format!("expected \"status\": \"ok\", got {other:?}"))),
    }
}

fn card(e: &Evidence) -> Result<Value, Outcome> {
    e.card
        .json_200()
        .map_err(|_| skip("no card to inspect (see L1-CARD-FETCH)"))
}

/// Where the public keys of `card`'s signatures are: each signature's `jku`, and the
/// runtime's own `/.well-known/jwks.json` for those without one. Fetched (by URL) when the
/// card is signed.
pub(super) async fn gather_card_keys(
    probe: &crate::client::Probe,
    card: &crate::client::Exchange,
) -> Vec<(String, crate::client::Exchange)> {
    let Ok(card) = card.json_200() else {
        return Vec::new();
    };
    let headers = card_signing::verify::headers(&card);
    if !card_signing::is_signed(&card) {
        return Vec::new();
    }
    let mut urls: Vec<String> = headers.iter().filter_map(|h| h.jku.clone()).collect();
    let mut fetched = Vec::new();
    if headers.iter().any(|h| h.jku.is_none()) || headers.is_empty() {
        fetched.push((JWKS_PATH.to_owned(), probe.get(JWKS_PATH).await));
    }
    urls.sort();
    urls.dedup();
    for url in urls {
        let exchange = probe.get_url(&url).await;
        fetched.push((url, exchange));
    }
    fetched
}

/// Where a runtime publishes its card's keys when a signature names no `jku`.
const JWKS_PATH: &str = "/.well-known/jwks.json";

/// A signed card must verify against the keys it publishes; an unsigned one has nothing to
/// verify (L1-CARD-SIGNED says so).
pub(super) fn card_signature(e: &Evidence) -> Verdict {
    let card = card(e)?;
    if !card_signing::is_signed(&card) {
        return Err(skip("the card is not signed"));
    }
    let mut trust = card_signing::Trust::default();
    let mut unread = Vec::new();
    for (url, exchange) in &e.card_keys {
        let keys = exchange.json_200().and_then(|json| {
            card_signing::KeySet::read(json.to_string().as_bytes())
                .map(|(set, _)| set)
                .map_err(|why| why.to_string())
        });
        match keys {
            Ok(set) if url == JWKS_PATH => trust.keys = trust.keys.clone().with(&set),
            Ok(set) => trust.by_url.push((url.clone(), set)),
            Err(why) => unread.push(format!("{url}: {why}")),
        }
    }
    match card_signing::verify_card(&card, &trust) {
        Ok(_) => Ok(()),
        Err(why) if unread.is_empty() => Err(fail(why.to_string())),
        Err(why) => Err(fail(format!(
            "{why} (keys not read: {})",
            unread.join("; ")
        ))),
    }
}

pub(super) fn card_signed(e: &Evidence) -> Verdict {
    let card = card(e)?;
    if card_signing::is_signed(&card) {
        Ok(())
    } else {
        Err(fail(
            "the card has no signatures: clients cannot tell it from a changed copy (A2A §8.4)",
        ))
    }
}

pub(super) fn card_fetch(e: &Evidence) -> Verdict {
    e.card.json_200().map(drop).map_err(fail)
}

/// Schema errors other than the skill requirement, which L1-CARD-SKILL judges.
pub(super) fn card_schema(e: &Evidence) -> Verdict {
    let card = card(e)?;
    let Err(errors) = Schema::AgentCard.validate(&card) else {
        return Ok(());
    };
    let others: Vec<String> = errors
        .errors
        .iter()
        .filter(|err| {
            let skills_missing =
                err.instance_path.is_empty() && err.missing_property.as_deref() == Some("skills");
            !(skills_missing || err.instance_path.starts_with("/skills"))
        })
        .map(ToString::to_string)
        .collect();
    if others.is_empty() {
        Ok(())
    } else {
        Err(fail(others.join("; ")))
    }
}

pub(super) fn card_skill(e: &Evidence) -> Verdict {
    #[derive(Deserialize)]
    struct Skills {
        #[serde(default)]
        skills: Option<Vec<Skill>>,
    }
    #[derive(Deserialize)]
    struct Skill {
        id: Option<String>,
        name: Option<String>,
        description: Option<String>,
        tags: Option<Vec<String>>,
    }
    let card = card(e)?;
    let skills = serde_json::from_value::<Skills>(card)
        .map_err(|err| fail(format!("skills are not a list of skill objects: {err}")))?
        .skills
        .ok_or_else(|| fail("the card has no skills"))?;
    let filled = |s: &Option<String>| s.as_deref().is_some_and(|v| !v.is_empty());
    let complete = skills.iter().any(|s| {
        filled(&s.id)
            && filled(&s.name)
            && filled(&s.description)
            && s.tags
                .as_ref()
                .is_some_and(|t| t.iter().any(|t| !t.is_empty()))
    });
    if complete {
        Ok(())
    } else if skills.is_empty() {
        Err(fail("the card's skills list is empty"))
    } else {
        Err(fail(format!(
            "none of the {} skills has a non-empty id, name, description and a tag",
            skills.len()
        )))
    }
}

pub(super) fn card_a2a_v1(e: &Evidence) -> Verdict {
    let card = card(e)?;
    Schema::A2aV1AgentCard
        .validate(&card)
        .map_err(|err| fail(err.to_string()))?;
    let interfaces = card.get("supportedInterfaces").and_then(Value::as_array);
    if interfaces.is_none_or(Vec::is_empty) {
        return Err(fail(
            "A2A v1.0 requires supportedInterfaces; the card has none",
        ));
    }
    Ok(())
}

pub(super) fn manifest(e: &Evidence) -> Verdict {
    let answer = e.manifest.answer().map_err(skip)?;
    if answer.status == 404 {
        return Err(skip("not served (404); the manifest is optional"));
    }
    let body = e.manifest.json_200().map_err(fail)?;
    Schema::RuntimeContract
        .validate(&body)
        .map_err(|err| fail(err.to_string()))?;
    let major = body
        .get("contractVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !(major == "v1" || major.starts_with("v1.")) {
        return Err(fail(format!("contractVersion {major:?} is not v1")));
    }
    Ok(())
}
