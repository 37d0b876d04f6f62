//! What every scope used, as this process counts it: each scope's windowed counts (the
//! book's own on one replica, a copy of the shared ones on many), its running turns, and when
//! each limit last had a refusal logged. Bounded by [`MAX_WINDOWS`] windows.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use super::{
    BudgetRefusal, LimitKind, MAX_WINDOWS, MINUTE_MS, ScopeKind, TurnScopes, refusal, until_next,
    window_start, windowed,
};

/// One count in one window of one scope's limit.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    /// The window's start, Unix milliseconds.
    pub(super) start: u64,
    pub(super) used: u64,
}

pub(super) type WindowKey = (ScopeKind, Arc<str>, LimitKind);

/// One window as saved: its scope, name and limit, and the count.
pub(super) type SavedWindow = (ScopeKind, Arc<str>, LimitKind, Window);

/// What every scope used, in this process.
#[derive(Default)]
pub(super) struct Usage {
    pub(super) windows: HashMap<WindowKey, Window>,
    /// Turns running now, by scope.
    pub(super) running: HashMap<(ScopeKind, Arc<str>), u64>,
    /// The minute each scope's limit last had a refusal logged: once a minute, not per request.
    pub(super) told: HashMap<WindowKey, u64>,
    /// Whether the windows are saved (to SQLite): then [`Self::changed`] is kept.
    pub(super) saving: bool,
    /// The windows changed since they were last saved.
    changed: HashSet<WindowKey>,
}

impl Usage {
    /// The first of `scopes` with no room for one more turn now, if any.
    pub(super) fn refusal_at_admission(
        &self,
        scopes: &TurnScopes,
        now: u64,
    ) -> Option<BudgetRefusal> {
        for (kind, name, limits) in &scopes.0 {
            let running = self.running.get(&(*kind, Arc::clone(name))).copied();
            if let Some(limit) = limits.concurrent_turns
                && running.unwrap_or(0) >= limit
            {
                let retry = Some(Duration::from_secs(1));
                return Some(refusal(
                    *kind,
                    name,
                    LimitKind::ConcurrentTurns,
                    limit,
                    retry,
                ));
            }
            for (limit_kind, limit) in windowed(limits) {
                if self.used(*kind, name, limit_kind, now) >= limit {
                    let retry = Some(until_next(limit_kind, now));
                    return Some(refusal(*kind, name, limit_kind, limit, retry));
                }
            }
        }
        None
    }

    /// Keeps `used`, the shared count of the window of `limit` that holds `now`, as this
    /// process's copy of it (for `/metrics`, `/healthz` and the `RateLimit` fields).
    pub(super) fn mirror(
        &mut self,
        kind: ScopeKind,
        name: &Arc<str>,
        limit: LimitKind,
        now: u64,
        used: u64,
    ) {
        self.make_room(now);
        let start = window_start(limit, now);
        let window = self
            .windows
            .entry((kind, Arc::clone(name), limit))
            .or_insert(Window { start, used });
        if window.start <= start {
            *window = Window { start, used };
        }
    }

    /// Logs `refused` unless its scope's limit had a refusal logged this minute; hands it back.
    pub(super) fn tell(&mut self, refused: BudgetRefusal, now: u64) -> BudgetRefusal {
        let minute = now - now % MINUTE_MS;
        if self.told.len() >= MAX_WINDOWS {
            self.told.retain(|_, told| *told == minute);
        }
        let key = (
            refused.scope,
            Arc::from(refused.name.as_str()),
            refused.limit,
        );
        if self.told.insert(key, minute) != Some(minute) {
            tracing::warn!(
                scope = refused.scope.as_str(),
                name = %refused.name,
                limit = refused.limit.key(),
                value = refused.value,
                "a budget refuses turns (logged once a minute per scope and limit)"
            );
        }
        refused
    }

    pub(super) fn used(&self, kind: ScopeKind, name: &Arc<str>, limit: LimitKind, now: u64) -> u64 {
        let Some(span) = limit.window_ms() else {
            return 0;
        };
        self.windows
            .get(&(kind, Arc::clone(name), limit))
            .filter(|w| w.start == now - now % span)
            .map_or(0, |w| w.used)
    }

    pub(super) fn add(
        &mut self,
        kind: ScopeKind,
        name: &Arc<str>,
        limit: LimitKind,
        at: u64,
        n: u64,
    ) {
        let Some(span) = limit.window_ms() else {
            return;
        };
        let start = at - at % span;
        let window = self
            .windows
            .entry((kind, Arc::clone(name), limit))
            .or_insert(Window { start, used: 0 });
        if window.start != start {
            *window = Window { start, used: 0 };
        }
        window.used = window.used.saturating_add(n);
        self.note_change(kind, name, limit);
    }

    /// Takes `n` back from the window that started at `start`, if it is still the current one.
    pub(super) fn take_back(
        &mut self,
        kind: ScopeKind,
        name: &Arc<str>,
        limit: LimitKind,
        start: u64,
        n: u64,
    ) {
        if let Some(window) = self.windows.get_mut(&(kind, Arc::clone(name), limit))
            && window.start == start
        {
            window.used = window.used.saturating_sub(n);
            self.note_change(kind, name, limit);
        }
    }

    /// Keeps the windows under [`MAX_WINDOWS`]: the stale go first, then the oldest.
    pub(super) fn make_room(&mut self, now: u64) {
        if self.windows.len() < MAX_WINDOWS {
            return;
        }
        self.windows.retain(|(_, _, limit), window| {
            limit
                .window_ms()
                .is_some_and(|span| window.start == now - now % span)
        });
        while self.windows.len() >= MAX_WINDOWS {
            let Some(oldest) = self
                .windows
                .iter()
                .min_by_key(|(_, w)| w.start)
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            self.windows.remove(&oldest);
        }
    }

    fn note_change(&mut self, kind: ScopeKind, name: &Arc<str>, limit: LimitKind) {
        if self.saving {
            self.changed.insert((kind, Arc::clone(name), limit));
        }
    }

    /// The windows changed since the last call, as they stand.
    pub(super) fn take_changed(&mut self) -> Vec<SavedWindow> {
        let changed = std::mem::take(&mut self.changed);
        changed
            .into_iter()
            .filter_map(|key| {
                let window = *self.windows.get(&key)?;
                Some((key.0, key.1, key.2, window))
            })
            .collect()
    }

    /// `windows` were not saved: they are saved with the next changes.
    pub(super) fn changed_again(&mut self, windows: Vec<SavedWindow>) {
        self.changed.extend(
            windows
                .into_iter()
                .map(|(kind, name, limit, _)| (kind, name, limit)),
        );
    }
}
