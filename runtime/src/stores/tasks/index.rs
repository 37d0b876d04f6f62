//! What `ListTasks` selects from on a shared bucket: one small entry per task the bucket holds
//! (its owner, context, state and status time, and the revision they are of), kept from each
//! task's entry as the mirror reads it — every task in the bucket, not only those memory keeps
//! whole. Bounded in bytes ([`INDEX_BYTES`]): past it, the entries of the tasks whose status
//! is oldest go first.

use std::collections::HashMap;

use daedalus_contract::TaskState;

use super::list::Facts;
use crate::platform::identity::Principal;

/// Bytes the index may hold.
pub(super) const INDEX_BYTES: usize = 64 << 20;

/// One task, as the index knows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    pub(super) principal: Option<Principal>,
    pub(super) context_id: Option<String>,
    pub(super) state: TaskState,
    pub(super) status_micros: i64,
    /// The revision of the bucket's entry these facts are of.
    pub(super) revision: u64,
}

impl Entry {
    fn bytes(&self, id: &str) -> usize {
        let principal = self.principal.as_ref().map_or(0, |p| {
            p.subject.len()
                + p.issuer.as_ref().map_or(0, String::len)
                + p.tenant.as_ref().map_or(0, String::len)
        });
        // The map's own cost of an entry, roughly.
        96 + id.len() + principal + self.context_id.as_ref().map_or(0, String::len)
    }
}

/// Every task of the bucket, by id.
#[derive(Debug, Default)]
pub(super) struct TaskIndex {
    entries: HashMap<String, Entry>,
    bytes: usize,
    limit: usize,
}

impl TaskIndex {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            entries: HashMap::new(),
            bytes: 0,
            limit,
        }
    }

    /// Task `id` stands as `entry` (unless a later revision of it is known already).
    pub(super) fn record(&mut self, id: &str, entry: Entry) {
        if let Some(held) = self.entries.get(id) {
            if held.revision > entry.revision {
                return;
            }
            self.bytes -= held.bytes(id);
        }
        self.bytes += entry.bytes(id);
        self.entries.insert(id.to_owned(), entry);
        if self.bytes > self.limit {
            self.shrink();
        }
    }

    /// Task `id` is gone from the bucket (its entry aged out).
    pub(super) fn forget(&mut self, id: &str) {
        if let Some(held) = self.entries.remove(id) {
            self.bytes -= held.bytes(id);
        }
    }

    /// The revision the index knows task `id` at.
    pub(super) fn revision(&self, id: &str) -> Option<u64> {
        self.entries.get(id).map(|e| e.revision)
    }

    /// What a query is judged on, of every task.
    pub(super) fn facts(&self) -> impl Iterator<Item = Facts<'_>> {
        self.entries.iter().map(|(id, e)| Facts {
            id,
            principal: e.principal.as_ref(),
            context_id: e.context_id.as_deref(),
            state: e.state,
            status_micros: e.status_micros,
        })
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Drops the entries of the tasks whose status is oldest until a tenth of the room is free.
    fn shrink(&mut self) {
        let mut by_age: Vec<(i64, String)> = self
            .entries
            .iter()
            .map(|(id, e)| (e.status_micros, id.clone()))
            .collect();
        by_age.sort_unstable();
        let target = self.limit - self.limit / 10;
        let mut dropped = 0usize;
        for (_, id) in by_age {
            if self.bytes <= target {
                break;
            }
            self.forget(&id);
            dropped += 1;
        }
        tracing::warn!(
            dropped,
            limit = self.limit,
            "the index ListTasks reads is full: the tasks whose status is oldest are no longer listed"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(micros: i64, revision: u64) -> Entry {
        Entry {
            principal: None,
            context_id: Some("ctx".into()),
            state: TaskState::Completed,
            status_micros: micros,
            revision,
        }
    }

    #[test]
    fn a_later_revision_wins_and_an_earlier_one_is_ignored() {
        let mut index = TaskIndex::new(1 << 20);
        index.record("t", entry(1, 5));
        index.record("t", entry(2, 4));
        assert_eq!(index.revision("t"), Some(5));
        index.record("t", entry(3, 9));
        assert_eq!(index.revision("t"), Some(9));
        assert_eq!(index.len(), 1);
        index.forget("t");
        assert_eq!((index.len(), index.bytes), (0, 0));
    }

    #[test]
    fn past_its_bytes_the_oldest_statuses_go_first() {
        let mut index = TaskIndex::new(2_000);
        for n in 0..40 {
            index.record(&format!("task-{n:02}"), entry(n, 1));
        }
        assert!(index.bytes <= 2_000);
        assert!(index.revision("task-39").is_some(), "the newest stays");
        assert!(index.revision("task-00").is_none(), "the oldest went");
    }
}
