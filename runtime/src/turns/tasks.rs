//! The runtime's memory of recent tasks: what each task's conversation holds so far, and the
//! last answer it gave.
//!
//! It serves two contract rules: a message whose `taskId` names a task left in
//! `input-required` continues that task, and a redelivered message (same `messageId`, e.g. after
//! a proxy crash) gets the stored answer instead of running the agent twice. Each task has its
//! own async lock, so two messages for one task never run at once.
//!
//! Memory is bounded in bytes (`TASK_MEMORY`) as well as in tasks (`MAX_TASKS`): after each
//! turn the record reports its approximate size, and the least recently created idle tasks are
//! forgotten first until both limits hold. A finished task keeps only what replay needs (its
//! context and its last answer); only a task waiting for input keeps its messages.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use daedalus_contract::{Message, Task};

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

impl TaskRecord {
    /// Approximately how many bytes the record holds (text, data and a fixed overhead per
    /// message and part).
    pub fn approx_bytes(&self) -> usize {
        let answer = self
            .last
            .as_ref()
            .map_or(0, |(id, task)| id.len() + task_bytes(task));
        self.history.iter().map(message_bytes).sum::<usize>() + answer + 64
    }

    /// Keeps only what replay and continuation need: a task that is not waiting for input
    /// drops its messages (its answer stays).
    pub fn trim(&mut self) {
        let waiting = self
            .last
            .as_ref()
            .is_some_and(|(_, task)| task.status.state.is_interrupted());
        if !waiting {
            self.history = Vec::new();
        }
    }
}

/// Bytes held by the parts of a message, and a fixed overhead.
fn message_bytes(m: &Message) -> usize {
    const MESSAGE_OVERHEAD: usize = 128;
    MESSAGE_OVERHEAD + m.message_id.len() + parts_bytes(&m.parts)
}

fn parts_bytes(parts: &[daedalus_contract::Part]) -> usize {
    use daedalus_contract::PartContent;
    const PART_OVERHEAD: usize = 64;
    parts
        .iter()
        .map(|p| {
            let content = match &p.content {
                PartContent::Text(s) | PartContent::Raw(s) | PartContent::Url(s) => s.len(),
                // Structured data is rare and small; its JSON length is a fair measure.
                PartContent::Data(v) => v.to_string().len(),
            };
            PART_OVERHEAD
                + content
                + p.media_type.as_ref().map_or(0, String::len)
                + p.filename.as_ref().map_or(0, String::len)
        })
        .sum()
}

fn task_bytes(task: &Task) -> usize {
    let status = task.status.message.as_ref().map_or(0, message_bytes);
    let artifacts: usize = task
        .artifacts
        .iter()
        .map(|a| parts_bytes(&a.parts) + 64)
        .sum();
    let history: usize = task.history.iter().flatten().map(message_bytes).sum();
    256 + task.id.len() + status + artifacts + history
}

/// A handle to one task's record; lock it to read or change the task.
pub type TaskSlot = Arc<tokio::sync::Mutex<TaskRecord>>;

/// Recent tasks by id.
#[derive(Debug)]
pub struct TaskRegistry {
    capacity: usize,
    budget_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    slots: HashMap<String, Entry>,
    /// Task ids in creation order, for eviction.
    order: VecDeque<String>,
    /// The sum of the entries' sizes.
    bytes: usize,
}

#[derive(Debug, Default)]
struct Entry {
    slot: TaskSlot,
    bytes: usize,
}

impl TaskRegistry {
    /// At most `capacity` tasks and `budget_bytes` of them.
    pub fn new(capacity: usize, budget_bytes: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            budget_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that `task_id`'s record now holds about `bytes`, and forgets old idle tasks
    /// until the budget holds again. A record larger than the whole budget is forgotten as soon
    /// as nobody holds it.
    pub fn account(&self, task_id: &str, bytes: usize) {
        let mut inner = self.lock();
        let Some(entry) = inner.slots.get_mut(task_id) else {
            return;
        };
        let before = std::mem::replace(&mut entry.bytes, bytes);
        inner.bytes = inner.bytes - before + bytes;
        inner.evict(self.capacity, self.budget_bytes);
    }

    /// Bytes held by the remembered tasks, as last accounted.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The slot of `task_id`, created empty if the task is new.
    pub fn slot(&self, task_id: &str) -> TaskSlot {
        let mut inner = self.lock();
        if let Some(entry) = inner.slots.get(task_id) {
            return Arc::clone(&entry.slot);
        }
        let slot = TaskSlot::default();
        inner.slots.insert(
            task_id.to_owned(),
            Entry {
                slot: Arc::clone(&slot),
                bytes: 0,
            },
        );
        inner.order.push_back(task_id.to_owned());
        inner.evict(self.capacity, self.budget_bytes);
        slot
    }

    /// The slot of `task_id`, if the task is remembered.
    pub fn existing(&self, task_id: &str) -> Option<TaskSlot> {
        self.lock()
            .slots
            .get(task_id)
            .map(|entry| Arc::clone(&entry.slot))
    }

    /// How many tasks are remembered.
    pub fn len(&self) -> usize {
        self.lock().slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    /// Forgets the oldest tasks nobody holds until at most `capacity` remain and they hold at
    /// most `budget` bytes. Tasks in use (a request holds their slot) are skipped and kept.
    fn evict(&mut self, capacity: usize, budget: usize) {
        let mut kept = VecDeque::new();
        while self.slots.len() > capacity || self.bytes > budget {
            let Some(id) = self.order.pop_front() else {
                break;
            };
            let in_use = self
                .slots
                .get(&id)
                .is_some_and(|e| Arc::strong_count(&e.slot) > 1);
            if in_use {
                kept.push_back(id);
            } else if let Some(entry) = self.slots.remove(&id) {
                self.bytes -= entry.bytes;
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
        let reg = TaskRegistry::new(10, usize::MAX);
        let a = reg.slot("t1");
        let b = reg.slot("t1");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(reg.len(), 1);
    }

    #[test]
    fn oldest_idle_tasks_are_forgotten_first() {
        let reg = TaskRegistry::new(2, usize::MAX);
        drop(reg.slot("t1"));
        drop(reg.slot("t2"));
        drop(reg.slot("t3"));
        assert_eq!(reg.len(), 2);
        let inner = reg.lock();
        assert!(!inner.slots.contains_key("t1"));
        assert!(inner.slots.contains_key("t3"));
    }

    #[test]
    fn tasks_in_use_are_never_forgotten() {
        let reg = TaskRegistry::new(1, usize::MAX);
        let held = reg.slot("busy");
        drop(reg.slot("t2"));
        drop(reg.slot("t3"));
        let again = reg.slot("busy");
        assert!(
            Arc::ptr_eq(&held, &again),
            "a held task was evicted and recreated"
        );
    }

    #[test]
    fn the_byte_budget_forgets_the_oldest_idle_tasks() {
        let reg = TaskRegistry::new(100, 1_000);
        for id in ["a", "b", "c"] {
            drop(reg.slot(id));
            reg.account(id, 400);
        }
        assert_eq!(reg.len(), 2, "a was forgotten to fit 1,000 bytes");
        assert_eq!(reg.bytes(), 800);
        assert!(!reg.lock().slots.contains_key("a"));
        // A record larger than the whole budget does not stay once idle.
        drop(reg.slot("huge"));
        reg.account("huge", 5_000);
        assert!(reg.bytes() <= 1_000, "{}", reg.bytes());
    }

    #[test]
    fn a_held_task_is_kept_past_the_budget_until_released() {
        let reg = TaskRegistry::new(100, 1_000);
        let held = reg.slot("busy");
        reg.account("busy", 5_000);
        assert_eq!(reg.len(), 1, "in use: kept");
        drop(held);
        drop(reg.slot("next"));
        assert!(!reg.lock().slots.contains_key("busy"));
        assert_eq!(reg.bytes(), 0);
    }

    #[test]
    fn finished_tasks_keep_only_their_answer() {
        use daedalus_contract::{Part, Role, TaskState, TaskStatus};
        let big = Message::new("m", Role::User, vec![Part::text("x".repeat(100_000))]);
        let answer = |state| Task {
            id: "t".into(),
            context_id: None,
            status: TaskStatus {
                state,
                message: None,
                timestamp: None,
            },
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        };
        let mut record = TaskRecord {
            history: vec![big.clone()],
            last: Some(("m".into(), answer(TaskState::InputRequired))),
            ..TaskRecord::default()
        };
        assert!(record.approx_bytes() > 100_000);
        record.trim();
        assert_eq!(record.history.len(), 1, "waiting for input: messages kept");
        record.last = Some(("m2".into(), answer(TaskState::Completed)));
        record.trim();
        assert!(record.history.is_empty());
        assert!(record.approx_bytes() < 1_000, "{}", record.approx_bytes());
    }
}
