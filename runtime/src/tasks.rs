//! The runtime's memory of recent tasks: what each task's conversation holds so far, and the
//! last answer it gave.
//!
//! It serves two contract rules: a message whose `taskId` names a task left in
//! `input-required` continues that task, and a redelivered message (same `messageId`, e.g. after
//! a proxy crash) gets the stored answer instead of running the agent twice. Each task has its
//! own async lock, so two messages for one task never run at once. The registry keeps at most
//! `capacity` tasks, forgetting the least recently created idle ones first.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use daedalus_schemas::{Message, Task};

/// Everything remembered about one task.
#[derive(Debug, Default)]
pub struct TaskRecord {
    /// The task's context, fixed by its first message.
    pub context_id: Option<String>,
    /// The messages of the task so far (user turns and agent status messages), oldest first.
    pub history: Vec<Message>,
    /// The last message processed, and the answer given to it.
    pub last: Option<(String, Task)>,
}

/// A handle to one task's record; lock it to read or change the task.
pub type TaskSlot = Arc<tokio::sync::Mutex<TaskRecord>>;

/// Recent tasks by id.
#[derive(Debug)]
pub struct TaskRegistry {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    slots: HashMap<String, TaskSlot>,
    /// Task ids in creation order, for eviction.
    order: VecDeque<String>,
}

impl TaskRegistry {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The slot of `task_id`, created empty if the task is new.
    pub fn slot(&self, task_id: &str) -> TaskSlot {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(slot) = inner.slots.get(task_id) {
            return Arc::clone(slot);
        }
        let slot = TaskSlot::default();
        inner.slots.insert(task_id.to_owned(), Arc::clone(&slot));
        inner.order.push_back(task_id.to_owned());
        inner.evict(self.capacity);
        slot
    }

    /// How many tasks are remembered.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .slots
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// Forgets the oldest tasks nobody holds until at most `capacity` remain. Tasks in use
    /// (a request holds their slot) are skipped and kept.
    fn evict(&mut self, capacity: usize) {
        let mut kept = VecDeque::new();
        while self.slots.len() > capacity {
            let Some(id) = self.order.pop_front() else {
                break;
            };
            let in_use = self
                .slots
                .get(&id)
                .is_some_and(|s| Arc::strong_count(s) > 1);
            if in_use {
                kept.push_back(id);
            } else {
                self.slots.remove(&id);
            }
        }
        while let Some(id) = kept.pop_back() {
            self.order.push_front(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_id_gets_the_same_slot() {
        let reg = TaskRegistry::new(10);
        let a = reg.slot("t1");
        let b = reg.slot("t1");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(reg.len(), 1);
    }

    #[test]
    fn oldest_idle_tasks_are_forgotten_first() {
        let reg = TaskRegistry::new(2);
        drop(reg.slot("t1"));
        drop(reg.slot("t2"));
        drop(reg.slot("t3"));
        assert_eq!(reg.len(), 2);
        let inner = reg.inner.lock().unwrap();
        assert!(!inner.slots.contains_key("t1"));
        assert!(inner.slots.contains_key("t3"));
    }

    #[test]
    fn tasks_in_use_are_never_forgotten() {
        let reg = TaskRegistry::new(1);
        let held = reg.slot("busy");
        drop(reg.slot("t2"));
        drop(reg.slot("t3"));
        let again = reg.slot("busy");
        assert!(
            Arc::ptr_eq(&held, &again),
            "a held task was evicted and recreated"
        );
    }
}
