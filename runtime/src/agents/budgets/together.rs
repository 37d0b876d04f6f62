//! The budget book held together with the other replicas: a turn's place and a call's
//! tokens taken in the usage they share ([`super::shared`]) before the turn or the call goes
//! on, and what was taken given back when another scope refuses.

use std::sync::Arc;
use std::time::Duration;

use super::shared::{SharedUsage, UsageError, running_key, window_key};
use super::{
    BudgetBook, BudgetRefusal, CallSpend, LimitKind, Taken, TurnScopes, as_delta, refusal,
    spend_windows, until_next, window_start, windowed,
};

impl BudgetBook {
    /// Admits a turn in the usage every replica shares: what it took is given back when
    /// another scope refuses it, or the store fails.
    pub(super) async fn admit_shared(
        &self,
        shared: &SharedUsage,
        scopes: &TurnScopes,
        now: u64,
    ) -> Result<Result<(), BudgetRefusal>, UsageError> {
        let mut entered = Vec::new();
        let mut took = Vec::new();
        let outcome = self
            .take_turn_shared(shared, scopes, now, &mut entered, &mut took)
            .await;
        if !matches!(outcome, Ok(Ok(()))) {
            for key in entered {
                shared.leave(&key);
            }
            for (key, start) in took {
                shared.add_later(&key, start, -1);
            }
        }
        outcome
    }

    async fn take_turn_shared(
        &self,
        shared: &SharedUsage,
        scopes: &TurnScopes,
        now: u64,
        entered: &mut Vec<String>,
        took: &mut Vec<(String, u64)>,
    ) -> Result<Result<(), BudgetRefusal>, UsageError> {
        for (kind, name, limits) in &scopes.0 {
            if let Some(limit) = limits.concurrent_turns {
                let key = running_key(*kind, name);
                if !shared.enter(&key, limit, now).await? {
                    let retry = Some(Duration::from_secs(1));
                    let limit_kind = LimitKind::ConcurrentTurns;
                    return Ok(Err(refusal(*kind, name, limit_kind, limit, retry)));
                }
                entered.push(key);
            }
            for (limit_kind, limit) in windowed(limits) {
                let key = window_key(*kind, name, limit_kind);
                let start = window_start(limit_kind, now);
                let (used, room) = if limit_kind == LimitKind::TurnsPerMinute {
                    let added = shared.add(&key, start, 1, Some(limit)).await?;
                    if added.taken > 0 {
                        took.push((key, start));
                    }
                    (added.used, added.taken > 0)
                } else {
                    let used = shared.used(&key, start).await?;
                    (used, used < limit)
                };
                self.usage().mirror(*kind, name, limit_kind, now, used);
                if !room {
                    let retry = Some(until_next(limit_kind, now));
                    return Ok(Err(refusal(*kind, name, limit_kind, limit, retry)));
                }
            }
        }
        Ok(Ok(()))
    }

    /// Reserves `want` tokens in each token window of `scopes` in the shared usage (that, or
    /// the room left): what each took, or the refusal of the first that has no room (what the
    /// others took given back).
    pub(super) async fn reserve_shared(
        &self,
        shared: &SharedUsage,
        scopes: &TurnScopes,
        want: CallSpend,
        now: u64,
    ) -> Result<Result<Vec<Taken>, BudgetRefusal>, UsageError> {
        let mut taken: Vec<Taken> = Vec::new();
        let give_back = |taken: &[Taken]| {
            for (kind, name, limit, start, n) in taken {
                shared.add_later(&window_key(*kind, name, *limit), *start, -as_delta(*n));
            }
        };
        for (kind, name, limits) in &scopes.0 {
            for (limit_kind, limit) in spend_windows(limits) {
                let key = window_key(*kind, name, limit_kind);
                let start = window_start(limit_kind, now);
                let added = match shared
                    .add(&key, start, as_delta(want.of(limit_kind)), Some(limit))
                    .await
                {
                    Ok(added) => added,
                    Err(e) => {
                        give_back(&taken);
                        return Err(e);
                    }
                };
                self.usage()
                    .mirror(*kind, name, limit_kind, now, added.used);
                if added.taken == 0 && added.used >= limit {
                    give_back(&taken);
                    let retry = Some(until_next(limit_kind, now));
                    return Ok(Err(refusal(*kind, name, limit_kind, limit, retry)));
                }
                taken.push((*kind, Arc::clone(name), limit_kind, start, added.taken));
            }
        }
        Ok(Ok(taken))
    }
}
