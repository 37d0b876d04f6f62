//! The `budgets:` block of `agents.yaml`: what each principal, tenant and agent may spend on
//! the deployment's LLM keys. `default` applies to each principal with no entry of its own;
//! a tenant's entry is the tenant's total; an agent's holds for every turn of that agent. Every
//! limit that applies to a turn holds. With no block, nothing is limited.
//!
//! An unknown key is an error naming it; a limit must be a whole number from 1 (leave a limit
//! out for none); `share` is a tenant's weight in fair admission (1 to 1,000, tenants only).
//! `cost_per_day` is in the deployment's currency, priced by the `models:` block
//! (`models.<provider>.<model>.price`, per million tokens), kept in millionths.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The largest limit taken: far above any real budget, and small enough that sums of
/// reservations never overflow.
pub const MAX_LIMIT: u64 = 1 << 50;
/// The names of each scope kind that get series of their own in `/metrics` by default
/// (`BUDGET_METRIC_NAMES`); the rest are counted under `other`, so callers cannot grow the
/// metrics without bound.
pub const METRIC_NAMES: usize = 100;
/// The most `BUDGET_METRIC_NAMES` takes.
pub const MAX_METRIC_NAMES: usize = 10_000;
/// The largest `cost_per_day`, in the deployment's currency.
pub const MAX_COST: f64 = 1e9;
/// The largest price per million tokens.
pub const MAX_PRICE: f64 = 1e6;

/// An amount of the deployment's currency, kept in millionths (written as a number:
/// `cost_per_day: 25.5`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Money(pub u64);

impl Money {
    /// In whole units, for a message.
    pub fn units(self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a figure for a reader")]
        let units = self.0 as f64 / 1e6;
        units
    }
}

impl Serialize for Money {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.units())
    }
}

impl<'de> Deserialize<'de> for Money {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let units = f64::deserialize(deserializer)?;
        if !(units > 0.0 && units <= MAX_COST) {
            return Err(serde::de::Error::custom(format!(
                "{units} is not a cost: give a number above 0 and at most {MAX_COST}"
            )));
        }
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "checked: above 0 and at most 1e15 millionths"
        )]
        let millionths = (units * 1e6).round() as u64;
        Ok(Self(millionths.max(1)))
    }
}

/// What a model's tokens cost, in billionths of the currency a token (the price per million
/// tokens, times 1,000).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub input_nanos: u64,
    pub output_nanos: u64,
}

impl Price {
    /// The cost, in millionths (rounded up), of `input` and `output` tokens.
    pub fn cost(self, input: u64, output: u64) -> u64 {
        let nanos = u128::from(input) * u128::from(self.input_nanos)
            + u128::from(output) * u128::from(self.output_nanos);
        u64::try_from(nanos.div_ceil(1_000)).unwrap_or(u64::MAX)
    }
}

/// A model's `price:` as written: the currency per million input and output tokens.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceFile {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl PriceFile {
    /// The price, or why it is not one (which of its keys).
    pub fn price(self) -> Result<Price, (&'static str, String)> {
        let nanos = |key: &'static str, per_mtok: f64| {
            if !(0.0..=MAX_PRICE).contains(&per_mtok) {
                return Err((
                    key,
                    format!(
                        "{per_mtok} is not a price: give a number from 0 to {MAX_PRICE} (per million tokens)"
                    ),
                ));
            }
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked: from 0 to 1e9"
            )]
            Ok((per_mtok * 1_000.0).round() as u64)
        };
        Ok(Price {
            input_nanos: nanos("input_per_mtok", self.input_per_mtok)?,
            output_nanos: nanos("output_per_mtok", self.output_per_mtok)?,
        })
    }
}

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
    /// What the scope's model calls may cost a day (UTC), at the `models:` prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_per_day: Option<Money>,
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
    /// Each model's price (`models:`), by `<provider>.<model>`.
    #[serde(skip)]
    pub prices: BTreeMap<String, Price>,
}

impl BudgetPlan {
    /// Whether any scope has a `cost_per_day`.
    pub fn counts_cost(&self) -> bool {
        self.default.iter().any(|l| l.cost_per_day.is_some())
            || [&self.tenants, &self.principals, &self.agents]
                .into_iter()
                .flat_map(BTreeMap::values)
                .any(|l| l.cost_per_day.is_some())
    }
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
