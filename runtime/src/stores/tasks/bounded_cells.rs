//! The cells the store holds in memory, bounded three ways: by count (`MAX_TASKS`), by bytes
//! (`TASK_MEMORY`, every task's history, artifacts and log counted) and by age (`TASK_TTL`,
//! since the task last changed). The least recently changed tasks go first; a task in use (a
//! turn runs it, a subscriber or a request holds its cell) is never dropped.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use super::StoreLimits;
use super::task_cell::TaskCell;

/// Cells by task id, with their sizes and ages.
#[derive(Debug, Default)]
pub(super) struct BoundedCells {
    cells: HashMap<String, Entry>,
    /// Task ids by the stamp of their last change, oldest first.
    by_age: BTreeMap<u64, String>,
    clock: u64,
    bytes: usize,
}

#[derive(Debug)]
struct Entry {
    cell: Arc<TaskCell>,
    bytes: usize,
    stamp: u64,
    changed: Instant,
}

impl BoundedCells {
    /// The cell of `task_id`, if held.
    pub(super) fn get(&self, task_id: &str) -> Option<Arc<TaskCell>> {
        self.cells.get(task_id).map(|e| Arc::clone(&e.cell))
    }

    /// Every cell held.
    pub(super) fn all(&self) -> Vec<Arc<TaskCell>> {
        self.cells.values().map(|e| Arc::clone(&e.cell)).collect()
    }

    pub(super) fn len(&self) -> usize {
        self.cells.len()
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `cell` as task `task_id`'s, new.
    pub(super) fn insert(&mut self, task_id: &str, cell: Arc<TaskCell>) {
        self.clock += 1;
        self.by_age.insert(self.clock, task_id.to_owned());
        self.cells.insert(
            task_id.to_owned(),
            Entry {
                cell,
                bytes: 0,
                stamp: self.clock,
                changed: Instant::now(),
            },
        );
    }

    /// Task `task_id` changed: it counts as recent again, and its size is taken anew.
    pub(super) fn touch(&mut self, task_id: &str) {
        self.clock += 1;
        let clock = self.clock;
        let Some(entry) = self.cells.get_mut(task_id) else {
            return;
        };
        let bytes = entry.cell.approx_bytes();
        let before = std::mem::replace(&mut entry.bytes, bytes);
        let stamp = std::mem::replace(&mut entry.stamp, clock);
        entry.changed = Instant::now();
        self.bytes = self.bytes - before + bytes;
        self.by_age.remove(&stamp);
        self.by_age.insert(clock, task_id.to_owned());
    }

    /// Drops the least recently changed tasks nobody holds until the limits hold, and every
    /// task older than the TTL that nobody holds.
    pub(super) fn evict(&mut self, limits: &StoreLimits) {
        let mut kept = Vec::new();
        while let Some((&stamp, id)) = self.by_age.first_key_value() {
            let Some(entry) = self.cells.get(id) else {
                self.by_age.remove(&stamp);
                continue;
            };
            let over = self.cells.len() > limits.max_tasks || self.bytes > limits.max_bytes;
            let expired = entry.changed.elapsed() > limits.ttl;
            if !over && !expired {
                break;
            }
            let id = id.clone();
            self.by_age.remove(&stamp);
            if Arc::strong_count(&entry.cell) > 1 {
                kept.push((stamp, id));
            } else if let Some(entry) = self.cells.remove(&id) {
                self.bytes -= entry.bytes;
            }
        }
        self.by_age.extend(kept);
    }
}
