//! Checks of `GET /health`, the agent card and the optional manifest.

use daedalus_contract::Schema;
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
