//! What waits to be delivered: one queue per webhook of a task, in the order the task's
//! states were stored, bounded in bytes per task ([`TASK_BYTES`], all its webhooks) and in all
//! (`PUSH_QUEUE_BYTES`). One worker drains a queue at a time, so a webhook gets a task's states
//! in order; webhooks at one host take at most [`PER_HOST`] deliveries at once, so a slow or
//! dead one never holds up another's.
//!
//! **At a bound the newest state is kept**, never an older one in its place: a later state of
//! a task holds everything an earlier one did, and its end. The states waiting for that webhook
//! (never the head, which a worker is on) make room for it, oldest first, and are counted as
//! superseded: nothing is lost, the later state carries them. When even then the newest state's
//! body cannot wait (other tasks hold the room), the webhook is owed the task *as it stands*:
//! a small marker waits in place of the body, and the body is read from the task store when the
//! delivery is made. Only when not even the marker fits is the state given up, and counted so:
//! a webhook is never left believing that a finished task is still working while the log says
//! a later state follows.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Semaphore;

use super::send::Target;

/// Bytes one task's states may hold, waiting for all its webhooks.
pub(super) const TASK_BYTES: usize = 4 << 20;
/// Deliveries at once to one host (scheme, host and port).
pub(super) const PER_HOST: usize = 8;
/// What a marker ([`Payload::AsItStands`]) is charged, beside its key's bytes: its entry and
/// the queue's bookkeeping.
const MARKER_BYTES: usize = 128;

/// A webhook of a task: (task id, config id).
pub(super) type QueueKey = (String, String);

/// What a waiting state carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Payload {
    /// The state's body, as it was stored.
    Body(Bytes),
    /// The body did not fit: the webhook is owed the task as it stands (at least this state),
    /// read from the task store when the delivery is made.
    AsItStands,
}

/// A state of the task waiting for a webhook.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    /// The store revision it was stored at (`0` where the store keeps none).
    pub(super) revision: u64,
    pub(super) payload: Payload,
}

impl Pending {
    /// A state with its body.
    pub(super) fn body(revision: u64, body: Bytes) -> Self {
        Self {
            revision,
            payload: Payload::Body(body),
        }
    }

    /// The bytes it is charged in the queue of `key`.
    fn charge(&self, key: &QueueKey) -> usize {
        match &self.payload {
            Payload::Body(body) => body.len(),
            Payload::AsItStands => MARKER_BYTES + key.0.len() + key.1.len(),
        }
    }
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
    /// Earlier states that were waiting for this webhook, replaced by this later one.
    pub(super) superseded: usize,
    /// This state's body did not fit: the task as it stands is delivered in its place.
    pub(super) as_it_stands: bool,
    /// Not even a marker fitted: this state is given up for this webhook.
    pub(super) given_up: bool,
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

    /// Queues `pending` for the webhook `key` at `target`, keeping the newest state at a bound
    /// (see the module).
    pub(super) fn push(&mut self, key: &QueueKey, target: Target, pending: Pending) -> Enqueued {
        let start = !self.queues.contains_key(key);
        let queue = self.queues.entry(key.clone()).or_insert_with(|| Queue {
            target: target.clone(),
            pending: VecDeque::new(),
            bytes: 0,
        });
        queue.target = target;
        let mut done = Enqueued {
            start,
            ..Enqueued::default()
        };
        // A marker waiting behind the head already owes the task as it stands, which will
        // hold this state too: it only moves on to this revision.
        if queue.pending.len() > 1
            && let Some(waiting) = queue.pending.back_mut()
            && waiting.payload == Payload::AsItStands
        {
            waiting.revision = waiting.revision.max(pending.revision);
            done.superseded = 1;
            return done;
        }
        let task = self.tasks.entry(key.0.clone()).or_default();
        let limit = self.limit;
        let fits = |task: usize, all: usize, size: usize| {
            task.saturating_add(size) <= TASK_BYTES && all.saturating_add(size) <= limit
        };
        let mut pending = pending;
        let mut size = pending.charge(key);
        // The waiting states make room, oldest first; the head stays (a worker is on it).
        while !fits(*task, self.bytes, size) && queue.pending.len() > 1 {
            if let Some(old) = queue.pending.remove(1) {
                let freed = old.charge(key);
                queue.bytes -= freed;
                *task -= freed;
                self.bytes -= freed;
                done.superseded += 1;
            }
        }
        if !fits(*task, self.bytes, size) {
            pending.payload = Payload::AsItStands;
            size = pending.charge(key);
            done.as_it_stands = true;
        }
        if !fits(*task, self.bytes, size) {
            done.given_up = true;
            done.as_it_stands = false;
            let idle = queue.pending.is_empty();
            if *task == 0 {
                self.tasks.remove(&key.0);
            }
            if idle {
                self.queues.remove(key);
                done.start = false;
            }
            return done;
        }
        queue.bytes += size;
        *task += size;
        self.bytes += size;
        queue.pending.push_back(pending);
        done
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

    /// The task as it stands was just read for the head of `key`: every state waiting behind
    /// it was stored before that read (a task's states are queued in the order they are
    /// stored, each as it is stored), so the read holds them. Answers how many were dropped.
    pub(super) fn supersede_waiting(&mut self, key: &QueueKey) -> usize {
        let Some(queue) = self.queues.get_mut(key).filter(|q| q.pending.len() > 1) else {
            return 0;
        };
        let behind: Vec<Pending> = queue.pending.drain(1..).collect();
        let freed: usize = behind.iter().map(|p| p.charge(key)).sum();
        queue.bytes -= freed;
        self.release(&key.0, freed);
        behind.len()
    }

    /// The head of `key` is done with (delivered or given up).
    pub(super) fn pop(&mut self, key: &QueueKey) {
        if let Some(queue) = self.queues.get_mut(key)
            && let Some(done) = queue.pending.pop_front()
        {
            let freed = done.charge(key);
            queue.bytes -= freed;
            self.release(&key.0, freed);
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
        Pending::body(revision, Bytes::from(vec![b'x'; size]))
    }

    fn key(task: &str) -> QueueKey {
        (task.to_owned(), "c".to_owned())
    }

    /// What waits for `key`, head first: (revision, whether it carries its body).
    fn waiting(q: &Queues, key: &QueueKey) -> Vec<(u64, bool)> {
        q.queues.get(key).map_or_else(Vec::new, |queue| {
            queue
                .pending
                .iter()
                .map(|p| (p.revision, matches!(p.payload, Payload::Body(_))))
                .collect()
        })
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
    fn at_the_bound_the_newest_state_is_kept_and_the_waiting_ones_make_room() {
        let mut q = Queues::new(100);
        q.push(&key("t"), target(), pending(1, 40));
        q.push(&key("t"), target(), pending(2, 40));
        let third = q.push(&key("t"), target(), pending(3, 40));
        assert_eq!((third.superseded, third.given_up), (1, false));
        assert_eq!(
            waiting(&q, &key("t")),
            [(1, true), (3, true)],
            "2 made room"
        );
        assert!(q.bytes() <= 100);
        assert_eq!(q.forget(&key("t")), 2);
        assert_eq!(q.bytes(), 0);
    }

    /// The defect of the queue that kept the oldest: every webhook on one hanging host holds a
    /// small `WORKING` head, and each task's large `COMPLETED` no longer fits in the bytes.
    /// Each webhook is still owed its end: the task as it stands, never nothing.
    #[test]
    fn an_end_that_does_not_fit_is_owed_as_the_task_stands_never_dropped() {
        let mut q = Queues::new(8 << 20);
        let tasks = 200;
        for t in 0..tasks {
            q.push(&key(&format!("t{t}")), target(), pending(1, 300));
        }
        let mut owed = 0;
        for t in 0..tasks {
            let done = q.push(&key(&format!("t{t}")), target(), pending(2, 384 << 10));
            assert!(!done.given_up, "task {t}: its end is kept in some form");
            owed += usize::from(done.as_it_stands);
            let last = *waiting(&q, &key(&format!("t{t}"))).last().unwrap();
            assert_eq!(last.0, 2, "task {t}: the newest state waits");
        }
        assert!(owed > 150, "most ends no longer fit as bodies: {owed}");
        assert!(q.bytes() <= 8 << 20);
    }

    #[test]
    fn a_waiting_marker_takes_the_later_states_in_and_only_a_full_queue_gives_up() {
        let mut q = Queues::new(1000);
        q.push(&key("t"), target(), pending(1, 10));
        let big = q.push(&key("t"), target(), pending(2, 5000));
        assert!(big.as_it_stands);
        // A later state: the marker already owes the task as it stands, now at revision 3.
        let later = q.push(&key("t"), target(), pending(3, 10));
        assert_eq!(later.superseded, 1);
        assert_eq!(waiting(&q, &key("t")), [(1, true), (3, false)]);
        // Another task's head and state fill the bytes: not even a marker fits.
        q.push(&key("u"), target(), pending(1, 1000 - q.bytes()));
        let lost = q.push(&key("v"), target(), pending(1, 10));
        assert!(lost.given_up && !lost.start, "{lost:?}");
        assert!(q.head(&key("v")).is_none());
        assert!(q.bytes() <= 1000);
    }

    #[test]
    fn a_read_of_the_task_as_it_stands_supersedes_what_waited_behind_it() {
        let mut q = Queues::new(1 << 20);
        q.push(&key("t"), target(), pending(1, 10));
        q.push(&key("t"), target(), pending(2, 10));
        q.push(&key("t"), target(), pending(3, 10));
        assert_eq!(q.supersede_waiting(&key("t")), 2);
        assert_eq!(waiting(&q, &key("t")), [(1, true)]);
        q.pop(&key("t"));
        assert_eq!(q.supersede_waiting(&key("t")), 0, "nothing left");
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn one_task_holds_at_most_its_bytes_across_its_webhooks() {
        let mut q = Queues::new(usize::MAX);
        let webhook = |id: &str| ("t".to_owned(), id.to_owned());
        let half = TASK_BYTES / 2;
        q.push(&webhook("a"), target(), pending(1, half));
        q.push(&webhook("b"), target(), pending(1, half - 150));
        // A third webhook of the same task finds no room for the body (150 bytes are left):
        // it is owed the task as it stands.
        let third = q.push(&webhook("c"), target(), pending(1, 200));
        assert!(third.as_it_stands && third.start, "{third:?}");
        // Another task is not held up by this one.
        assert!(
            q.push(&("u".to_owned(), "a".to_owned()), target(), pending(1, 100))
                .start
        );
        q.pop(&webhook("a"));
        assert!(
            !q.push(&webhook("c"), target(), pending(2, 100))
                .as_it_stands,
            "room again"
        );
    }
}
