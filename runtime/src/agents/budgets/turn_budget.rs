//! A turn's hold on its budgets ([`TurnBudget`]): it counts as running until dropped, and each
//! of its model calls reserves its tokens ([`Reservation`]) and settles them with what the
//! provider reports.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::shared::{SharedUsage, running_key, window_key};
use super::{
    BudgetBook, BudgetRefusal, CallSpend, LimitKind, MAX_LIMIT, Price, Taken, TurnScopes, as_delta,
    refusal, spend_windows, until_next, window_start,
};

/// A turn's hold on its budgets: it counts as running until dropped, and reserves and settles
/// each model call's tokens. Cheap to clone (sub-agents share their turn's).
#[derive(Debug, Clone, Default)]
pub struct TurnBudget(pub(super) Option<Arc<Held>>);

pub(super) struct Held {
    pub(super) book: Arc<BudgetBook>,
    pub(super) scopes: TurnScopes,
    /// Tokens the turn's calls used so far.
    pub(super) spent: Mutex<u64>,
    /// The usage the turn was admitted in, when every replica shares it.
    pub(super) shared: Option<Arc<SharedUsage>>,
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            for (kind, name, limits) in &self.scopes.0 {
                if limits.concurrent_turns.is_some() {
                    shared.leave(&running_key(*kind, name));
                }
            }
        }
        let mut usage = self.book.usage();
        for (kind, name, _) in &self.scopes.0 {
            let key = (*kind, Arc::clone(name));
            if let Some(running) = usage.running.get_mut(&key) {
                *running = running.saturating_sub(1);
                if *running == 0 {
                    usage.running.remove(&key);
                }
            }
        }
    }
}

/// The tokens one model call reserved, settled with what it used.
#[derive(Debug)]
#[must_use = "a reservation is settled with the call's usage"]
pub struct Reservation {
    held: Option<Arc<Held>>,
    /// What was reserved in each window, and the window's start.
    taken: Vec<Taken>,
    /// Where it was reserved, when in the usage every replica shares.
    pub(super) shared: Option<Arc<SharedUsage>>,
    /// The price of the call's model, if it has one.
    price: Option<Price>,
}

/// Why a model call may not be made now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallRefused {
    /// A minute's window is full: the call may be made after `BudgetRefusal::retry_after`.
    Wait(BudgetRefusal),
    /// The turn cannot go on under its budget (its day's tokens, or `tokens_per_turn`).
    Stop(BudgetRefusal),
}

impl TurnBudget {
    /// A turn no budget holds.
    pub fn unlimited() -> Self {
        Self(None)
    }

    /// Whether any budget holds the turn.
    pub fn is_limited(&self) -> bool {
        self.0.is_some()
    }

    /// The turn's calls used `tokens` before this hold on its budgets began (a resumed turn's,
    /// before its runtime stopped): counted against `tokens_per_turn`. The windows counted
    /// them when they were used.
    pub fn spent_before(&self, tokens: u64) {
        if let Some(held) = &self.0 {
            let mut spent = held.spent.lock().unwrap_or_else(PoisonError::into_inner);
            *spent = spent.saturating_add(tokens);
        }
    }

    /// Reserves what a model call of `model` (`<provider>.<model>`) may spend, its prompt
    /// about `prompt` tokens and its answer up to `output` more: those tokens (and their cost
    /// at the model's price) in each window it spends in, or what room is left.
    pub async fn reserve(
        &self,
        prompt: u64,
        output: u64,
        model: &str,
    ) -> Result<Reservation, CallRefused> {
        let Some(held) = &self.0 else {
            return Ok(Reservation::none());
        };
        let book = &held.book;
        let spent = *held.spent.lock().unwrap_or_else(PoisonError::into_inner);
        let price = book.price_of(model);
        let want = CallSpend {
            tokens: prompt.saturating_add(output).min(MAX_LIMIT),
            cost: price.map_or(0, |p| p.cost(prompt, output)).min(MAX_LIMIT),
        };
        let now = (book.clock)();
        for (kind, name, limits) in &held.scopes.0 {
            if let Some(limit) = limits.tokens_per_turn
                && spent.saturating_add(prompt) > limit
            {
                let refused = refusal(*kind, name, LimitKind::TokensPerTurn, limit, None);
                return Err(CallRefused::Stop(book.refused(
                    &mut book.usage(),
                    refused,
                    now,
                )));
            }
        }
        if let Some(shared) = &held.shared {
            match book.reserve_shared(shared, &held.scopes, want, now).await {
                Ok(Ok(taken)) => {
                    return Ok(Reservation {
                        held: Some(Arc::clone(held)),
                        taken,
                        shared: Some(Arc::clone(shared)),
                        price,
                    });
                }
                Ok(Err(refused)) => {
                    let refused = book.refused(&mut book.usage(), refused, now);
                    return Err(CallRefused::wait_or_stop(refused));
                }
                Err(e) => book.store_failed(&e),
            }
        }
        let mut usage = book.usage();
        for (kind, name, limits) in &held.scopes.0 {
            for (limit_kind, limit) in spend_windows(limits) {
                if usage.used(*kind, name, limit_kind, now) >= limit {
                    let retry = Some(until_next(limit_kind, now));
                    let refused = refusal(*kind, name, limit_kind, limit, retry);
                    let refused = book.refused(&mut usage, refused, now);
                    return Err(CallRefused::wait_or_stop(refused));
                }
            }
        }
        let mut taken = Vec::new();
        for (kind, name, limits) in &held.scopes.0 {
            for (limit_kind, limit) in spend_windows(limits) {
                let room = limit - usage.used(*kind, name, limit_kind, now).min(limit);
                let take = want.of(limit_kind).min(room);
                usage.add(*kind, name, limit_kind, now, take);
                let start = window_start(limit_kind, now);
                taken.push((*kind, Arc::clone(name), limit_kind, start, take));
            }
        }
        Ok(Reservation {
            held: Some(Arc::clone(held)),
            taken,
            shared: None,
            price,
        })
    }
}

impl CallRefused {
    /// A full minute's window waits; any other full window stops the turn.
    fn wait_or_stop(refused: BudgetRefusal) -> Self {
        if refused.limit == LimitKind::TokensPerMinute {
            Self::Wait(refused)
        } else {
            Self::Stop(refused)
        }
    }
}

impl Reservation {
    /// A reservation of nothing (a turn no budget holds).
    pub fn none() -> Self {
        Self {
            held: None,
            taken: Vec::new(),
            shared: None,
            price: None,
        }
    }

    /// The call used `used` tokens, `output` of them its answer's: each window it reserved
    /// in counts that (or its cost) instead.
    pub async fn settle(mut self, used: u64, output: u64) {
        let Some(held) = self.held.take() else {
            return;
        };
        let used = used.min(MAX_LIMIT);
        let output = output.min(used);
        let call = CallSpend {
            tokens: used,
            cost: self
                .price
                .map_or(0, |p| p.cost(used - output, output))
                .min(MAX_LIMIT),
        };
        {
            let mut spent = held.spent.lock().unwrap_or_else(PoisonError::into_inner);
            *spent = spent.saturating_add(used);
        }
        let now = (held.book.clock)();
        let taken = std::mem::take(&mut self.taken);
        if let Some(shared) = self.shared.take() {
            for (kind, name, limit, start, reserved) in taken {
                let key = window_key(kind, &name, limit);
                let current = window_start(limit, now);
                let used = call.of(limit);
                let change = if start == current {
                    as_delta(used) - as_delta(reserved)
                } else {
                    shared.add_later(&key, start, -as_delta(reserved));
                    as_delta(used)
                };
                match shared.add(&key, current, change, None).await {
                    Ok(added) => held
                        .book
                        .usage()
                        .mirror(kind, &name, limit, now, added.used),
                    Err(e) => {
                        held.book.store_failed(&e);
                        shared.add_later(&key, current, change);
                    }
                }
            }
        } else {
            let mut usage = held.book.usage();
            for (kind, name, limit, start, reserved) in taken {
                usage.take_back(kind, &name, limit, start, reserved);
                usage.add(kind, &name, limit, now, call.of(limit));
            }
        }
        let usage = held.book.usage();
        held.book.count_spent(&held.scopes, used, &usage, now);
    }
}

impl Drop for Reservation {
    /// A call that never answered (it failed, or its turn was canceled) gives its tokens back.
    fn drop(&mut self) {
        let Some(held) = self.held.take() else {
            return;
        };
        if let Some(shared) = self.shared.take() {
            for (kind, name, limit, start, reserved) in self.taken.drain(..) {
                shared.add_later(&window_key(kind, &name, limit), start, -as_delta(reserved));
            }
            return;
        }
        let mut usage = held.book.usage();
        for (kind, name, limit, start, reserved) in self.taken.drain(..) {
            usage.take_back(kind, &name, limit, start, reserved);
        }
    }
}
