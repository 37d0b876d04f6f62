//! What waits to be delivered: one queue per webhook of a task, in the order the task's
//! states were stored, bounded in bytes per task ([`TASK_BYTES`], all its webhooks) and in all
//! (`PUSH_QUEUE_BYTES`). At a bound the oldest state waiting in that queue makes room (a later
//! state of the task holds everything an earlier one did, and its end); each is counted and
//! logged. One worker drains a queue at a time, so a webhook gets a task's states in order;
//! webhooks at one host take at most [`PER_HOST`] deliveries at once, so a slow or dead one
//! never holds up another's.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Semaphore;

use super::send::Target;

/// Bytes one task's states may hold, waiting for all its webhooks.
pub(super) const TASK_BYTES: usize = 4 << 20;
/// Deliveries at once to one host (scheme, host and port).
pub(super) const PER_HOST: usize = 8;

/// A webhook of a task: (task id, config id).
pub(super) type QueueKey = (String, String);

/// A state of the task waiting for a webhook.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    /// The store revision it was stored at (`0` where the store keeps none).
    pub(super) revision: u64,
    pub(super) body: Bytes,
}

#[derive(Debug)]
struct Queue {
    target: Target,
    pending: VecDeque<Pending>,
    bytes: usize,
}

/// What an enqueue did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Enqueued {
    /// The queue was idle: a worker must start on it.
    pub(super) start: bool,
    /// States dropped to make room (the oldest waiting), or this one when it could never fit.
    pub(super) dropped: usize,
}

/// Every webhook's queue.
#[derive(Debug)]
pub(super) struct Queues {
    queues: HashMap<QueueKey, Queue>,
    /// Bytes waiting, by task.
    tasks: HashMap<String, usize>,
    bytes: usize,
    limit: usize,
    hosts: HashMap<String, Arc<Semaphore>>,
}

impl Queues {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            queues: HashMap::new(),
            tasks: HashMap::new(),
            bytes: 0,
            limit,
            hosts: HashMap::new(),
        }
    }

    /// Bytes waiting, in all.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// States waiting, in all.
    pub(super) fn len(&self) -> usize {
        self.queues.values().map(|q| q.pending.len()).sum()
    }

    /// Queues `pending` for the webhook `key` at `target` (the head, being delivered, is
    /// never dropped).
    pub(super) fn push(&mut self, key: &QueueKey, target: Target, pending: Pending) -> Enqueued {
        let size = pending.body.len();
        if size > TASK_BYTES.min(self.limit) {
            return Enqueued {
                start: false,
                dropped: 1,
            };
        }
        let start = !self.queues.contains_key(key);
        let queue = self.queues.entry(key.clone()).or_insert_with(|| Queue {
            target: target.clone(),
            pending: VecDeque::new(),
            bytes: 0,
        });
        queue.target = target;
        let task = self.tasks.entry(key.0.clone()).or_default();
        let over = |task: usize, all: usize| task + size > TASK_BYTES || all + size > self.limit;
        let mut dropped = 0;
        while over(*task, self.bytes) && queue.pending.len() > 1 {
            // Keep the head (a worker is on it); the next oldest goes.
            if let Some(old) = queue.pending.remove(1) {
                queue.bytes -= old.body.len();
                *task -= old.body.len();
                self.bytes -= old.body.len();
                dropped += 1;
            }
        }
        if over(*task, self.bytes) {
            // The task's other webhooks, or other tasks, hold the room: this state cannot wait.
            if queue.pending.is_empty() {
                self.queues.remove(key);
            }
            if *task == 0 {
                self.tasks.remove(&key.0);
            }
            return Enqueued {
                start: false,
                dropped: dropped + 1,
            };
        }
        queue.bytes += size;
        *task += size;
        self.bytes += size;
        queue.pending.push_back(pending);
        Enqueued { start, dropped }
    }

    /// Takes `bytes` off task `task_id`'s count.
    fn release(&mut self, task_id: &str, bytes: usize) {
        self.bytes -= bytes;
        if let Some(held) = self.tasks.get_mut(task_id) {
            *held -= bytes;
            if *held == 0 {
                self.tasks.remove(task_id);
            }
        }
    }

    /// The state to deliver next to `key`, and where; `None` (and the queue is gone) when
    /// nothing waits.
    pub(super) fn head(&mut self, key: &QueueKey) -> Option<(Target, Pending)> {
        let queue = self.queues.get(key)?;
        if let Some(head) = queue.pending.front() {
            return Some((queue.target.clone(), head.clone()));
        }
        self.queues.remove(key);
        None
    }

    /// The head of `key` is done with (delivered or given up).
    pub(super) fn pop(&mut self, key: &QueueKey) {
        if let Some(queue) = self.queues.get_mut(key)
            && let Some(done) = queue.pending.pop_front()
        {
            queue.bytes -= done.body.len();
            self.release(&key.0, done.body.len());
        }
    }

    /// Drops what waits for `key` (its webhook was deleted); answers how many states.
    pub(super) fn forget(&mut self, key: &QueueKey) -> usize {
        match self.queues.remove(key) {
            Some(queue) => {
                self.release(&key.0, queue.bytes);
                queue.pending.len()
            }
            None => 0,
        }
    }

    /// The permits of deliveries to `target`'s host.
    pub(super) fn host(&mut self, target: &Target) -> Arc<Semaphore> {
        Arc::clone(
            self.hosts
                .entry(target.shown())
                .or_insert_with(|| Arc::new(Semaphore::new(PER_HOST))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            url: reqwest::Url::parse("https://hook.example/a").unwrap(),
            token: None,
            authentication: None,
        }
    }

    fn pending(revision: u64, size: usize) -> Pending {
        Pending {
            revision,
            body: Bytes::from(vec![b'x'; size]),
        }
    }

    fn key(task: &str) -> QueueKey {
        (task.to_owned(), "c".to_owned())
    }

    #[test]
    fn states_wait_in_order_and_the_first_starts_a_worker() {
        let mut q = Queues::new(1 << 20);
        assert!(q.push(&key("t"), target(), pending(1, 10)).start);
        assert!(!q.push(&key("t"), target(), pending(2, 10)).start);
        assert_eq!(q.head(&key("t")).unwrap().1.revision, 1);
        q.pop(&key("t"));
        assert_eq!(q.head(&key("t")).unwrap().1.revision, 2);
        q.pop(&key("t"));
        assert!(q.head(&key("t")).is_none());
        assert_eq!(q.bytes(), 0);
        assert!(
            q.push(&key("t"), target(), pending(3, 10)).start,
            "idle again"
        );
    }

    #[test]
    fn at_the_bound_the_oldest_waiting_state_makes_room_never_the_head() {
        let mut q = Queues::new(100);
        q.push(&key("t"), target(), pending(1, 40));
        q.push(&key("t"), target(), pending(2, 40));
        let third = q.push(&key("t"), target(), pending(3, 40));
        assert_eq!(third.dropped, 1);
        assert_eq!(q.head(&key("t")).unwrap().1.revision, 1, "the head stays");
        q.pop(&key("t"));
        assert_eq!(q.head(&key("t")).unwrap().1.revision, 3, "2 made room");
        // Another webhook's state that cannot fit beside what waits is dropped, counted.
        let other = q.push(&key("u"), target(), pending(1, 90));
        assert_eq!(
            other,
            Enqueued {
                start: false,
                dropped: 1
            }
        );
        assert!(q.bytes() <= 100);
        assert_eq!(q.forget(&key("t")), 1);
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn one_task_holds_at_most_its_bytes_across_its_webhooks() {
        let mut q = Queues::new(usize::MAX);
        let webhook = |id: &str| ("t".to_owned(), id.to_owned());
        let half = TASK_BYTES / 2;
        q.push(&webhook("a"), target(), pending(1, half));
        q.push(&webhook("b"), target(), pending(1, half - 10));
        // A third webhook of the same task finds no room, and nothing of its own to drop.
        let third = q.push(&webhook("c"), target(), pending(1, 100));
        assert_eq!(third.dropped, 1);
        // Another task is not held up by this one.
        assert!(
            q.push(&("u".to_owned(), "a".to_owned()), target(), pending(1, 100))
                .start
        );
        q.pop(&webhook("a"));
        assert!(
            q.push(&webhook("c"), target(), pending(2, 100)).start,
            "room again"
        );
    }
}
