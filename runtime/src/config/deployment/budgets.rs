//! The `budgets:` block of `agents.yaml`: what each principal, tenant and agent may spend on
//! the deployment's LLM keys. `default` applies to each principal with no entry of its own;
//! a tenant's entry is the tenant's total; an agent's holds for every turn of that agent. Every
//! limit that applies to a turn holds. With no block, nothing is limited.
//!
//! An unknown key is an error naming it; a limit must be a whole number from 1 (leave a limit
//! out for none); `share` is a tenant's weight in fair admission (1 to 1,000, tenants only).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The largest limit taken: far above any real budget, and small enough that sums of
/// reservations never overflow.
pub const MAX_LIMIT: u64 = 1 << 50;
/// The largest `share`.
pub const MAX_SHARE: u32 = 1_000;
/// The longest name of a principal, tenant or agent in the block.
pub const MAX_NAME: usize = 256;

/// The limits of one scope (a principal, a tenant, an agent); `None`: no limit.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetLimits {
    pub tokens_per_minute: Option<u64>,
    pub tokens_per_day: Option<u64>,
    pub turns_per_minute: Option<u64>,
    pub concurrent_turns: Option<u64>,
    pub tokens_per_turn: Option<u64>,
    /// A tenant's weight in fair admission (default 1); tenants only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<u32>,
}

impl BudgetLimits {
    /// Each limit set, by its key.
    pub fn limits(&self) -> impl Iterator<Item = (&'static str, u64)> {
        [
            ("tokens_per_minute", self.tokens_per_minute),
            ("tokens_per_day", self.tokens_per_day),
            ("turns_per_minute", self.turns_per_minute),
            ("concurrent_turns", self.concurrent_turns),
            ("tokens_per_turn", self.tokens_per_turn),
        ]
        .into_iter()
        .filter_map(|(key, limit)| limit.map(|limit| (key, limit)))
    }
}

/// The `budgets:` block, validated.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetPlan {
    /// For each principal with no entry of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<BudgetLimits>,
    /// Each tenant's total, by tenant name.
    pub tenants: BTreeMap<String, BudgetLimits>,
    /// By principal (an API key's principal name, or a token's `sub`).
    pub principals: BTreeMap<String, BudgetLimits>,
    /// By agent name.
    pub agents: BTreeMap<String, BudgetLimits>,
}

/// What is wrong with a `budgets:` block: the key's path and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetProblem {
    pub path: String,
    pub message: String,
}

impl BudgetPlan {
    /// Checks every name and value; `agents` are the deployment's agent names.
    pub fn validate(&self, agents: &[&str]) -> Result<(), BudgetProblem> {
        if let Some(default) = &self.default {
            check("budgets.default", default, false)?;
        }
        for (scope, entries, shares) in [
            ("tenants", &self.tenants, true),
            ("principals", &self.principals, false),
            ("agents", &self.agents, false),
        ] {
            for (name, limits) in entries {
                let path = format!("budgets.{scope}.{name}");
                if name.is_empty() || name.len() > MAX_NAME {
                    return Err(BudgetProblem {
                        path,
                        message: format!("a name must have 1 to {MAX_NAME} bytes"),
                    });
                }
                if scope == "agents" && !agents.contains(&name.as_str()) {
                    return Err(BudgetProblem {
                        path,
                        message: format!("no agent named {name:?} is configured"),
                    });
                }
                check(&path, limits, shares)?;
            }
        }
        Ok(())
    }
}

/// Checks one scope's limits (`shares`: whether `share` may be set).
fn check(path: &str, limits: &BudgetLimits, shares: bool) -> Result<(), BudgetProblem> {
    for (key, limit) in limits.limits() {
        if limit == 0 || limit > MAX_LIMIT {
            return Err(BudgetProblem {
                path: format!("{path}.{key}"),
                message: format!(
                    "{limit} is not a limit: give a whole number from 1 to {MAX_LIMIT}, or leave the key out for no limit"
                ),
            });
        }
    }
    match limits.share {
        Some(_) if !shares => Err(BudgetProblem {
            path: format!("{path}.share"),
            message: "share weighs a tenant in fair admission; set it on a tenant".to_owned(),
        }),
        Some(share) if share == 0 || share > MAX_SHARE => Err(BudgetProblem {
            path: format!("{path}.share"),
            message: format!("{share} is not a share: give a whole number from 1 to {MAX_SHARE}"),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(yaml: &str) -> Result<BudgetPlan, String> {
        serde_saphyr::from_str::<BudgetPlan>(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn the_issues_example_reads_and_validates() {
        let read = plan(
            "default: { tokens_per_minute: 200000, tokens_per_day: 5000000, turns_per_minute: 120, concurrent_turns: 16 }\n\
             tenants:\n  acme: { tokens_per_day: 50000000, concurrent_turns: 200, share: 3 }\n\
             principals:\n  ci-bot: { turns_per_minute: 10 }\n\
             agents:\n  researcher: { tokens_per_turn: 400000 }\n",
        )
        .expect("reads");
        assert_eq!(read.tenants["acme"].share, Some(3));
        assert_eq!(read.principals["ci-bot"].turns_per_minute, Some(10));
        assert_eq!(read.validate(&["researcher"]), Ok(()));
        assert_eq!(
            read.validate(&["writer"]).map_err(|p| p.path),
            Err("budgets.agents.researcher".to_owned()),
            "an agent that is not configured"
        );
    }

    #[test]
    fn an_unknown_key_is_named() {
        let refused = plan("default: { tokens_per_hour: 5 }\n").expect_err("unknown key");
        assert!(refused.contains("tokens_per_hour"), "{refused}");
        let refused = plan("tenant: {}\n").expect_err("unknown key");
        assert!(refused.contains("tenant"), "{refused}");
    }

    #[test]
    fn hostile_values_are_refused_naming_the_key() {
        let path = |yaml: &str| {
            plan(yaml)
                .expect("reads")
                .validate(&["a"])
                .map_err(|p| p.path)
        };
        assert_eq!(
            path("default: { tokens_per_minute: 0 }"),
            Err("budgets.default.tokens_per_minute".to_owned())
        );
        assert_eq!(
            path("principals: { bot: { turns_per_minute: 1125899906842625 } }"),
            Err("budgets.principals.bot.turns_per_minute".to_owned())
        );
        assert_eq!(
            path("principals: { bot: { share: 2 } }"),
            Err("budgets.principals.bot.share".to_owned())
        );
        assert_eq!(
            path("tenants: { acme: { share: 0 } }"),
            Err("budgets.tenants.acme.share".to_owned())
        );
        assert!(plan("default: { tokens_per_minute: -1 }").is_err());
        assert!(plan("default: { tokens_per_minute: lots }").is_err());
        let long = "x".repeat(MAX_NAME + 1);
        assert_eq!(
            path(&format!(
                "principals: {{ {long}: {{ turns_per_minute: 1 }} }}"
            )),
            Err(format!("budgets.principals.{long}"))
        );
    }
}
