//! Where the book's usage is kept beyond this process: shared with the other replicas in a
//! NATS KV bucket ([`super::shared`]), or saved to the tasks' SQLite file on one replica
//! ([`SavedUsage`]: a restart does not hand every scope a fresh day; the windows still on are
//! read back at startup, those that changed written every [`SAVE_EVERY`] and at shutdown, off
//! the turns' path, so a crash of the process loses at most the last [`SAVE_EVERY`] of
//! spending; rows of windows two days over go); and its writer, run until shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::shared::{SharedUsage, UsageError};
use super::usage::{SavedWindow, Window};
use super::{BudgetBook, DAY_MS, LimitKind, MINUTE_MS, ScopeKind, window_start};
use crate::stores::budget_usage::{SavedUsage, UsageRow};

/// How often the windows that changed are written.
pub(super) const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The windows of `rows` still on at `now` (rows of a scope or limit this version does not
/// know are left).
pub(super) fn windows_on(rows: Vec<UsageRow>, now: u64) -> Vec<SavedWindow> {
    rows.into_iter()
        .filter_map(|row| {
            let scope = ScopeKind::named(&row.scope)?;
            let limit = LimitKind::from_key(&row.limit)?;
            (limit.window_ms().is_some() && row.start == window_start(limit, now)).then(|| {
                let window = Window {
                    start: row.start,
                    used: row.used,
                };
                (scope, Arc::from(row.name), limit, window)
            })
        })
        .collect()
}

fn row_of((scope, name, limit, window): &SavedWindow) -> UsageRow {
    UsageRow {
        scope: scope.as_str().to_owned(),
        name: name.to_string(),
        limit: limit.key().to_owned(),
        start: window.start,
        used: window.used,
    }
}

impl BudgetBook {
    /// Holds the budgets together with every replica that shares `shared`, from now on.
    pub fn share(&self, shared: Arc<SharedUsage>) {
        self.shared.store(Some(shared));
    }

    /// Keeps the usage in the SQLite table `saved` from now on, the windows still on read
    /// back from it first (a restart of the one replica).
    pub fn save_to(&self, saved: Arc<SavedUsage>) -> Result<(), UsageError> {
        let now = (self.clock)();
        let windows = windows_on(
            saved
                .load()
                .map_err(|e| UsageError::new("the tasks' SQLite file", e))?,
            now,
        );
        let mut usage = self.usage();
        for (kind, name, limit, window) in windows {
            usage.make_room(now);
            usage.windows.insert((kind, name, limit), window);
        }
        usage.saving = true;
        drop(usage);
        self.saved.store(Some(saved));
        Ok(())
    }

    /// Writes the usage where it is kept beyond this process as it changes, until
    /// [`Self::close`]: the shared usage's queued changes as they come, or the windows that
    /// changed every [`SAVE_EVERY`]. Returns at once when it is kept in this process only.
    pub async fn keep_written(&self) {
        if let Some(shared) = self.shared.load_full() {
            shared.run(&*self.clock, &self.closing).await;
        } else if let Some(saved) = self.saved.load_full() {
            let mut every = tokio::time::interval(SAVE_EVERY);
            loop {
                tokio::select! {
                    () = self.closing.cancelled() => return,
                    _ = every.tick() => self.save_now(&saved).await,
                }
            }
        }
    }

    /// Writes the windows that changed since they were last written (kept to write again
    /// when it fails).
    async fn save_now(&self, saved: &Arc<SavedUsage>) {
        let changed = self.usage().take_changed();
        if changed.is_empty() {
            return;
        }
        let now = (self.clock)();
        let rows = changed.iter().map(row_of).collect();
        if let Err(e) = saved.save(rows, now.saturating_sub(2 * DAY_MS)).await {
            tracing::warn!(error = %e, "budget usage not saved; trying again");
        } else {
            return;
        }
        self.usage().changed_again(changed);
    }

    /// Stops the writer and writes what it left (the turns that ended in the drain, the calls
    /// that gave their tokens back).
    pub async fn close(&self) {
        self.closing.cancel();
        if let Some(shared) = self.shared.load_full()
            && let Err(e) = shared.flush((self.clock)()).await
        {
            tracing::warn!(error = %e, "budget usage not written at shutdown");
        }
        if let Some(saved) = self.saved.load_full() {
            self.save_now(&saved).await;
        }
    }

    /// The shared usage failed: logged once a minute; the caller holds the budget alone.
    pub(super) fn store_failed(&self, error: &UsageError) {
        let now = (self.clock)();
        let minute = now - now % MINUTE_MS;
        if self.store_told.swap(minute, Ordering::Relaxed) != minute {
            tracing::warn!(%error, "budgets are held by this replica alone until the shared usage answers (logged once a minute)");
        }
    }
}
