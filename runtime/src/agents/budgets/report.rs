//! What the budget book reports: its series in `/metrics` (names past [`METRIC_NAMES`] folded
//! into `other`), its summary in `/healthz`, and each windowed limit a caller is held to, for
//! the `RateLimit` fields.

use std::sync::{Arc, PoisonError};

use daedalus_contract::RateLimit;

use super::{
    BudgetBook, BudgetRefusal, LimitKind, MINUTE_MS, ScopeKind, TurnScopes, Usage, until_next,
    windowed,
};
use crate::platform::identity::Caller;
use crate::platform::metrics::{BudgetLabels, BudgetLimitLabels};

/// The budgets in `/healthz`: how many are configured and how many refuse now, never whose.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BudgetsHealth {
    /// Whether `default` holds each principal with no entry of its own.
    pub default: bool,
    pub tenants: usize,
    pub principals: usize,
    pub agents: usize,
    /// Scope-and-limit pairs that refused a turn or a call this minute.
    pub refusing_now: usize,
    /// Turns running now that a budget holds (counted once per scope that holds them).
    pub held_turns: u64,
}

impl BudgetBook {
    /// The name `name` of a `kind` scope goes by in `/metrics`: its own among the first
    /// `BUDGET_METRIC_NAMES`, else `other`.
    pub(super) fn metric_name(&self, kind: ScopeKind, name: &Arc<str>) -> String {
        let cap = self.metric_names.load(std::sync::atomic::Ordering::Relaxed);
        let mut seen = self.named.lock().unwrap_or_else(PoisonError::into_inner);
        let of_kind = seen.entry(kind).or_default();
        if of_kind.contains(name) || of_kind.len() < cap {
            of_kind.insert(Arc::clone(name));
            name.to_string()
        } else {
            "other".to_owned()
        }
    }

    /// Counts a refusal in `/metrics`.
    pub(super) fn count_refusal(&self, refused: &BudgetRefusal) {
        if let Some(metrics) = &self.metrics {
            let name = self.metric_name(refused.scope, &Arc::from(refused.name.as_str()));
            metrics
                .budget_refusals
                .get_or_create(&BudgetLimitLabels {
                    scope: refused.scope.as_str(),
                    name,
                    limit: refused.limit.key(),
                })
                .inc();
        }
    }

    /// Counts `tokens` spent under each of `scopes`, and what is left in their windows.
    pub(super) fn count_spent(&self, scopes: &TurnScopes, tokens: u64, usage: &Usage, now: u64) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        for (kind, name, limits) in &scopes.0 {
            let label = self.metric_name(*kind, name);
            metrics
                .budget_tokens
                .get_or_create(&BudgetLabels {
                    scope: kind.as_str(),
                    name: label.clone(),
                })
                .inc_by(tokens);
            for (limit_kind, limit) in windowed(limits) {
                let left = limit.saturating_sub(usage.used(*kind, name, limit_kind, now));
                metrics
                    .budget_remaining
                    .get_or_create(&BudgetLimitLabels {
                        scope: kind.as_str(),
                        name: label.clone(),
                        limit: limit_kind.key(),
                    })
                    .set(i64::try_from(left).unwrap_or(i64::MAX));
            }
        }
    }

    /// The windowed limits that hold `caller`'s turns of `agent`, and where each stands now
    /// (none when no budget holds them).
    pub fn rate_limits(&self, caller: &Caller, agent: &str) -> Vec<RateLimit> {
        let scopes = self.scopes(caller, agent);
        if scopes.0.is_empty() {
            return Vec::new();
        }
        standing(&scopes, &self.usage(), (self.clock)())
    }

    /// What `/healthz` says of the budgets (`None` with no `budgets:` block).
    pub fn health(&self) -> Option<BudgetsHealth> {
        let plan = self.plan.load_full()?;
        let now = (self.clock)();
        let minute = now - now % MINUTE_MS;
        let usage = self.usage();
        Some(BudgetsHealth {
            default: plan.default.is_some(),
            tenants: plan.tenants.len(),
            principals: plan.principals.len(),
            agents: plan.agents.len(),
            refusing_now: usage.told.values().filter(|told| **told == minute).count(),
            held_turns: usage.running.values().sum(),
        })
    }
}

/// Where each windowed limit of `scopes` stands at `now`, as `usage` counts it.
pub(super) fn standing(scopes: &TurnScopes, usage: &Usage, now: u64) -> Vec<RateLimit> {
    let mut limits = Vec::new();
    for (kind, name, scope_limits) in &scopes.0 {
        // Cost is not a rate of requests or tokens: it has no RateLimit item.
        let rates = windowed(scope_limits).filter(|(kind, _)| *kind != LimitKind::CostPerDay);
        for (limit_kind, quota) in rates {
            let span = limit_kind.window_ms().unwrap_or(MINUTE_MS);
            limits.push(RateLimit {
                policy: format!("{}-{}", kind.as_str(), limit_kind.key()),
                quota,
                window_secs: span / 1_000,
                remaining: quota.saturating_sub(usage.used(*kind, name, limit_kind, now)),
                reset_secs: until_next(limit_kind, now).as_secs(),
            });
        }
    }
    limits
}
