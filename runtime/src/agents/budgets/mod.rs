//! Budgets (`agents.yaml`'s `budgets:` block): what each principal, tenant and agent may spend,
//! held by the turn service for every face (and by the agent loop, before each model call).
//!
//! - **At admission**: `concurrent_turns` and `turns_per_minute`, and a scope whose token
//!   window is already spent is refused at once, with the time its window has room again.
//! - **Before each model call**: the call's tokens are reserved in each token window (the
//!   prompt's size and the call's largest answer, or what room is left when that is less), and
//!   settled with the provider's reported usage once it answers. A window that is full waits
//!   for the next minute (`tokens_per_minute`, at most a minute) or fails the turn
//!   (`tokens_per_day`); a turn whose tokens would pass `tokens_per_turn` fails, naming it.
//! - **Windows** are fixed and aligned to UTC: each minute, each day. A refusal's
//!   `retry_after` is the time to the end of the window that refused, rounded up to the second.
//! - **Overshoot**: a reservation takes at most the room left, so the calls running when a
//!   window fills may pass it by what they use beyond their reservation: at most one call's
//!   answer per running turn of the scope.
//!
//! Usage lives in this process ([`BudgetBook`]), or, when the tasks are in a NATS KV bucket,
//! in a bucket beside it that every replica changes by compare-and-set ([`shared`]): N
//! replicas then hold each budget together, and the overshoot above stays what it is for one
//! process (a call's tokens are reserved in the shared count before the call is made). When
//! that bucket cannot be reached, each replica holds the budgets alone until it can (logged
//! once a minute). The book's memory is bounded by [`MAX_WINDOWS`] windows, the stale ones
//! dropped first. A refusal is logged once a minute per scope and limit, not per request.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwapOption;

use crate::config::deployment::budgets::{BudgetLimits, BudgetPlan, MAX_LIMIT, Money, Price};
use crate::platform::identity::Caller;
use crate::platform::metrics::Metrics;

/// The most windows the book keeps (about 100 bytes each); past it, the stale ones go, and
/// then the oldest.
pub const MAX_WINDOWS: usize = 100_000;
const MINUTE_MS: u64 = 60_000;
const DAY_MS: u64 = 86_400_000;
/// The name a budget knows the caller by when authentication is off.
pub const ANONYMOUS: &str = "anyone";
pub use crate::config::deployment::budgets::{MAX_METRIC_NAMES, METRIC_NAMES};

/// What a budget is held for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScopeKind {
    Principal,
    Tenant,
    Agent,
}

impl ScopeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Principal => "principal",
            Self::Tenant => "tenant",
            Self::Agent => "agent",
        }
    }

    /// The kind [`Self::as_str`] names.
    pub fn named(name: &str) -> Option<Self> {
        [Self::Principal, Self::Tenant, Self::Agent]
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }
}

/// Which limit of a scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    TokensPerMinute,
    TokensPerDay,
    TurnsPerMinute,
    ConcurrentTurns,
    TokensPerTurn,
    /// In millionths of the deployment's currency.
    CostPerDay,
}

impl LimitKind {
    /// The limit's key in `budgets:`.
    pub fn key(self) -> &'static str {
        match self {
            Self::TokensPerMinute => "tokens_per_minute",
            Self::TokensPerDay => "tokens_per_day",
            Self::TurnsPerMinute => "turns_per_minute",
            Self::ConcurrentTurns => "concurrent_turns",
            Self::TokensPerTurn => "tokens_per_turn",
            Self::CostPerDay => "cost_per_day",
        }
    }

    /// The limit whose key is `key`.
    pub fn from_key(key: &str) -> Option<Self> {
        [
            Self::TokensPerMinute,
            Self::TokensPerDay,
            Self::TurnsPerMinute,
            Self::ConcurrentTurns,
            Self::TokensPerTurn,
            Self::CostPerDay,
        ]
        .into_iter()
        .find(|limit| limit.key() == key)
    }

    /// The window a limit is counted in (`None`: not counted in a window).
    fn window_ms(self) -> Option<u64> {
        match self {
            Self::TokensPerMinute | Self::TurnsPerMinute => Some(MINUTE_MS),
            Self::TokensPerDay | Self::CostPerDay => Some(DAY_MS),
            Self::ConcurrentTurns | Self::TokensPerTurn => None,
        }
    }
}

/// A turn or a model call a budget would not allow: whose budget, which limit, and when to
/// come back (none for `tokens_per_turn`, which no wait changes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct BudgetRefusal {
    pub scope: ScopeKind,
    /// The scope's name: the caller's own principal or tenant, or the agent.
    pub name: String,
    pub limit: LimitKind,
    /// The limit's value.
    pub value: u64,
    pub retry_after: Option<Duration>,
    /// Where the caller stood against every windowed limit of its turn's scopes as it was
    /// refused a turn (the `RateLimit` fields of the refusal, the same instant as its
    /// `retry_after`); empty for a refused call.
    pub rate_limits: Vec<daedalus_contract::RateLimit>,
}

impl BudgetRefusal {
    /// This refusal of a turn, telling where `scopes`' windowed limits stood as it refused.
    fn standing_at(mut self, scopes: &TurnScopes, usage: &Usage, now: u64) -> Self {
        self.rate_limits = report::standing(scopes, usage, now);
        self
    }
}

impl fmt::Display for BudgetRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = if self.limit == LimitKind::CostPerDay {
            format!("{:.2}", Money(self.value).units())
        } else {
            self.value.to_string()
        };
        write!(
            f,
            "the budget of {} {:?} allows {value} {} ({}), and it is spent",
            self.scope.as_str(),
            self.name,
            self.limit.key().replace('_', " "),
            self.limit.key(),
        )?;
        match self.retry_after {
            Some(after) => write!(f, "; retry in {} s", after.as_secs()),
            None => Ok(()),
        }
    }
}

/// The wall clock, in Unix milliseconds (a test's own in tests).
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

fn system_clock() -> u64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// The budgets of a deployment, and what was spent under them.
pub struct BudgetBook {
    plan: ArcSwapOption<BudgetPlan>,
    usage: Mutex<Usage>,
    clock: Clock,
    /// Where spending and refusals are counted, if anywhere.
    metrics: Option<Arc<Metrics>>,
    /// The names of each scope kind with series of their own ([`Self::metric_names`] at most).
    named: Mutex<HashMap<ScopeKind, HashSet<Arc<str>>>>,
    /// How many names of each scope kind get series of their own.
    metric_names: std::sync::atomic::AtomicUsize,
    /// The usage every replica shares, once the task store is shared.
    shared: ArcSwapOption<SharedUsage>,
    /// The SQLite table the usage is saved to, on one replica.
    saved: ArcSwapOption<SavedUsage>,
    /// The minute the shared usage last had a failure logged.
    store_told: AtomicU64,
    /// Fired at shutdown: the shared usage's writer stops.
    closing: tokio_util::sync::CancellationToken,
}

impl fmt::Debug for BudgetBook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetBook")
            .field("plan", &self.plan.load().is_some())
            .finish_non_exhaustive()
    }
}

/// The scopes one turn is held to, with their limits.
#[derive(Debug, Clone, Default)]
pub struct TurnScopes(Vec<(ScopeKind, Arc<str>, BudgetLimits)>);

impl BudgetBook {
    /// A book holding `plan` (`None`: nothing is limited), on the wall clock.
    pub fn new(plan: Option<BudgetPlan>) -> Self {
        Self::with_clock(plan, Arc::new(system_clock))
    }

    pub fn with_clock(plan: Option<BudgetPlan>, clock: Clock) -> Self {
        Self {
            plan: ArcSwapOption::from(plan.map(Arc::new)),
            usage: Mutex::default(),
            clock,
            metrics: None,
            named: Mutex::default(),
            metric_names: std::sync::atomic::AtomicUsize::new(METRIC_NAMES),
            shared: ArcSwapOption::empty(),
            saved: ArcSwapOption::empty(),
            store_told: AtomicU64::new(u64::MAX),
            closing: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// This book, counting what is spent and refused in `metrics`.
    #[must_use]
    pub fn counted_in(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Gives at most `names` names of each scope kind series of their own in `/metrics`
    /// (`BUDGET_METRIC_NAMES`); the names already given keep theirs.
    pub fn name_in_metrics_at_most(&self, names: usize) {
        self.metric_names
            .store(names, std::sync::atomic::Ordering::Relaxed);
    }

    /// The price of `model` (`<provider>.<model>`), if the plan gives it one.
    fn price_of(&self, model: &str) -> Option<Price> {
        self.plan.load().as_ref()?.prices.get(model).copied()
    }

    /// `refused`, counted in `/metrics` and logged (once a minute per scope and limit).
    fn refused(&self, usage: &mut Usage, refused: BudgetRefusal, now: u64) -> BudgetRefusal {
        self.count_refusal(&refused);
        usage.tell(refused, now)
    }

    /// Holds `plan` from now on (a reload); what was spent stays spent.
    pub fn replace(&self, plan: Option<BudgetPlan>) {
        self.plan.store(plan.map(Arc::new));
    }

    /// The scopes a turn of `agent` for `caller` is held to, with their limits.
    pub fn scopes(&self, caller: &Caller, agent: &str) -> TurnScopes {
        let Some(plan) = self.plan.load_full() else {
            return TurnScopes::default();
        };
        let mut scopes = Vec::new();
        let principal = caller.principal();
        let subject = principal.map_or(ANONYMOUS, |p| p.subject.as_str());
        if let Some(limits) = plan.principals.get(subject).or(plan.default.as_ref()) {
            scopes.push((ScopeKind::Principal, Arc::from(subject), *limits));
        }
        if let Some(tenant) = principal.and_then(|p| p.tenant.as_deref())
            && let Some(limits) = plan.tenants.get(tenant)
        {
            scopes.push((ScopeKind::Tenant, Arc::from(tenant), *limits));
        }
        if let Some(limits) = plan.agents.get(agent) {
            scopes.push((ScopeKind::Agent, Arc::from(agent), *limits));
        }
        TurnScopes(scopes)
    }

    fn usage(&self) -> std::sync::MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a turn held to `scopes`: every scope has room for one more turn now (and tokens
    /// left in its windows), or the first that has not refuses. The turn counts as running
    /// until the [`TurnBudget`] is dropped.
    pub async fn admit(self: &Arc<Self>, scopes: TurnScopes) -> Result<TurnBudget, BudgetRefusal> {
        if scopes.0.is_empty() {
            return Ok(TurnBudget::unlimited());
        }
        let now = (self.clock)();
        let shared = match self.shared.load_full() {
            Some(shared) => match self.admit_shared(&shared, &scopes, now).await {
                Ok(Ok(())) => Some(shared),
                Ok(Err(refused)) => {
                    let mut usage = self.usage();
                    let refused = self.refused(&mut usage, refused, now);
                    return Err(refused.standing_at(&scopes, &usage, now));
                }
                Err(e) => {
                    self.store_failed(&e);
                    None
                }
            },
            None => None,
        };
        let mut usage = self.usage();
        if shared.is_none() {
            if let Some(refused) = usage.refusal_at_admission(&scopes, now) {
                let refused = self.refused(&mut usage, refused, now);
                return Err(refused.standing_at(&scopes, &usage, now));
            }
            usage.make_room(now);
            for (kind, name, limits) in &scopes.0 {
                if limits.turns_per_minute.is_some() {
                    usage.add(*kind, name, LimitKind::TurnsPerMinute, now, 1);
                }
            }
        }
        for (kind, name, _) in &scopes.0 {
            *usage.running.entry((*kind, Arc::clone(name))).or_default() += 1;
        }
        Ok(TurnBudget(Some(Arc::new(Held {
            book: Arc::clone(self),
            scopes,
            spent: Mutex::new(0),
            shared,
        }))))
    }
}

/// What a reservation took in one token window: the scope, the limit, the window's start and
/// the tokens.
pub(super) type Taken = (ScopeKind, Arc<str>, LimitKind, u64, u64);

/// `n` as a change to a count (every count stays under [`MAX_LIMIT`]).
fn as_delta(n: u64) -> i64 {
    i64::try_from(n.min(MAX_LIMIT)).unwrap_or(i64::MAX)
}

/// The start of the window of `limit` that holds `now`.
fn window_start(limit: LimitKind, now: u64) -> u64 {
    let span = limit.window_ms().unwrap_or(MINUTE_MS);
    now - now % span
}

fn refusal(
    scope: ScopeKind,
    name: &Arc<str>,
    limit: LimitKind,
    value: u64,
    retry_after: Option<Duration>,
) -> BudgetRefusal {
    BudgetRefusal {
        scope,
        name: name.to_string(),
        limit,
        value,
        retry_after,
        rate_limits: Vec::new(),
    }
}

/// The limits of `limits` counted in a window, with their kinds: turns per minute, then
/// tokens per minute and per day, then cost per day.
fn windowed(limits: &BudgetLimits) -> impl Iterator<Item = (LimitKind, u64)> {
    [
        (LimitKind::TurnsPerMinute, limits.turns_per_minute),
        (LimitKind::TokensPerMinute, limits.tokens_per_minute),
        (LimitKind::TokensPerDay, limits.tokens_per_day),
        (
            LimitKind::CostPerDay,
            limits.cost_per_day.map(|cost| cost.0),
        ),
    ]
    .into_iter()
    .filter_map(|(kind, limit)| limit.map(|limit| (kind, limit)))
}

/// The windows of `limits` a model call spends in: tokens per minute and per day, cost per
/// day.
fn spend_windows(limits: &BudgetLimits) -> impl Iterator<Item = (LimitKind, u64)> {
    windowed(limits).filter(|(kind, _)| *kind != LimitKind::TurnsPerMinute)
}

/// What a model call spends (or may spend): tokens, and their cost in millionths.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallSpend {
    pub tokens: u64,
    pub cost: u64,
}

impl CallSpend {
    /// What the call spends in `limit`'s window.
    fn of(self, limit: LimitKind) -> u64 {
        if limit == LimitKind::CostPerDay {
            self.cost
        } else {
            self.tokens
        }
    }
}

/// The time from `now` to the end of `limit`'s window, rounded up to the second.
fn until_next(limit: LimitKind, now: u64) -> Duration {
    let span = limit.window_ms().unwrap_or(MINUTE_MS);
    let left_ms = span - now % span;
    Duration::from_secs(left_ms.div_ceil(1_000))
}

mod kept;
mod report;
pub mod shared;
#[cfg(test)]
mod tests;
mod together;
mod turn_budget;
mod usage;

use crate::stores::budget_usage::SavedUsage;
pub use report::BudgetsHealth;
use shared::SharedUsage;
use turn_budget::Held;
pub use turn_budget::{CallRefused, Reservation, TurnBudget};
use usage::Usage;
