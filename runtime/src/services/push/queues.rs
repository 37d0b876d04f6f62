//! What waits to be delivered: one queue per webhook of a task, in the order the task's
//! states were stored, bounded in bytes (`PUSH_QUEUE_BYTES` in all, [`TASK_BYTES`] per task)
//! and shared fairly: one webhook host, and one tenant, may hold at most a fair share of the
//! bound in bodies ([`Queues::share`]). One worker drains a queue at a time, so a webhook gets
//! a task's states in order; webhooks at one host take at most [`PER_HOST`] deliveries at once,
//! so a slow or dead one never holds up another's.
//!
//! **No state is given up while a marker of it fits.** A state waits with its body while there
//! is room; at a bound the room is made, in this order:
//! 1. the states waiting for the same webhook (never the one being delivered) make room, oldest
//!    first, and are counted as superseded: the later state holds everything they did;
//! 2. waiting bodies become markers, the largest queue first, in the bound's scope: the host's
//!    own, the tenant's own, the task's own, or anyone's at the global bound. A marker (about
//!    [`MARKER_BYTES`]) owes its webhook the task *as it stands*, read from the task store when
//!    its turn comes; the states of that queue it took the place of are superseded by it;
//! 3. the arriving state itself waits as a marker (a later state joins a waiting marker rather
//!    than queueing behind it).
//!
//! Only when not even a marker fits (tens of thousands of webhooks waiting) is a state given
//! up, and counted so. A state in delivery has left the queue: its body is the delivery's
//! (at most [`PER_HOST`] a host), not the queue's.

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
pub(super) const MARKER_BYTES: usize = 96;
/// The fewest shares the bound is cut into: with four hosts (or tenants) waiting or more, each
/// holds at most a quarter of it in bodies; with fewer, each holds the bound over their number.
const SHARES: usize = 4;

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
            Payload::AsItStands => marker_charge(key),
        }
    }

    /// Its body's bytes (`0` for a marker).
    fn body_bytes(&self) -> usize {
        match &self.payload {
            Payload::Body(body) => body.len(),
            Payload::AsItStands => 0,
        }
    }
}

fn marker_charge(key: &QueueKey) -> usize {
    MARKER_BYTES + key.0.len() + key.1.len()
}

/// Who a webhook's deliveries count against: its host (scheme, host and port) and, when
/// identity is on, its task's tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner {
    pub(super) host: String,
    pub(super) tenant: Option<String>,
}

#[derive(Debug)]
struct Queue {
    target: Target,
    owner: Owner,
    pending: VecDeque<Pending>,
    /// The head is being delivered: it has left the queue's bytes, and stays as it is.
    delivering: bool,
    /// Bytes of the waiting states (the head in delivery not counted).
    bytes: usize,
    /// Of which bodies.
    body_bytes: usize,
}

impl Queue {
    /// Where the waiting states start: behind a head in delivery.
    fn first_waiting(&self) -> usize {
        usize::from(self.delivering)
    }

    fn waiting(&self) -> usize {
        self.pending.len() - self.first_waiting()
    }
}

/// What an enqueue did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Enqueued {
    /// The queue was idle: a worker must start on it.
    pub(super) start: bool,
    /// States that were waiting (for this webhook, or another one whose bodies made room)
    /// and are held by a later state or a marker now.
    pub(super) superseded: usize,
    /// States now owed as their task stands (markers made: this state's, or another
    /// webhook's whose bodies made room).
    pub(super) owed: usize,
    /// Not even a marker fitted: this state is given up for this webhook.
    pub(super) given_up: bool,
}

/// Which bound a state does not fit under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// `TASK_BYTES`, the task's states for all its webhooks.
    Task,
    /// The host's fair share of bodies.
    Host,
    /// The tenant's fair share of bodies.
    Tenant,
    /// `PUSH_QUEUE_BYTES`, everything waiting.
    All,
}

/// Bytes waiting, by one key (a task, a host, a tenant).
#[derive(Debug, Default)]
struct Held {
    bytes: usize,
    body_bytes: usize,
}

/// Bytes waiting by task, by host or by tenant, and how many of those hold bodies.
#[derive(Debug, Default)]
struct Ledger {
    held: HashMap<String, Held>,
    with_bodies: usize,
}

impl Ledger {
    fn hold(&mut self, key: &str, bytes: usize, body_bytes: usize) {
        let entry = self.held.entry(key.to_owned()).or_default();
        if entry.body_bytes == 0 && body_bytes > 0 {
            self.with_bodies += 1;
        }
        entry.bytes += bytes;
        entry.body_bytes += body_bytes;
    }

    fn release(&mut self, key: &str, bytes: usize, body_bytes: usize) {
        let Some(entry) = self.held.get_mut(key) else {
            return;
        };
        entry.bytes -= bytes;
        entry.body_bytes -= body_bytes;
        if body_bytes > 0 && entry.body_bytes == 0 {
            self.with_bodies -= 1;
        }
        if entry.bytes == 0 {
            self.held.remove(key);
        }
    }

    fn bytes(&self, key: &str) -> usize {
        self.held.get(key).map_or(0, |h| h.bytes)
    }

    fn body_bytes(&self, key: &str) -> usize {
        self.held.get(key).map_or(0, |h| h.body_bytes)
    }

    /// Keys other than `key` holding bodies.
    fn others_with_bodies(&self, key: &str) -> usize {
        self.with_bodies - usize::from(self.body_bytes(key) > 0)
    }
}

/// Every webhook's queue.
#[derive(Debug)]
pub(super) struct Queues {
    queues: HashMap<QueueKey, Queue>,
    tasks: Ledger,
    hosts: Ledger,
    tenants: Ledger,
    bytes: usize,
    limit: usize,
    /// Markers waiting.
    markers: usize,
    /// Deliveries under way, and their bodies' bytes (read back for markers included).
    delivering: usize,
    delivering_bytes: usize,
    permits: HashMap<String, Arc<Semaphore>>,
}

impl Queues {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            queues: HashMap::new(),
            tasks: Ledger::default(),
            hosts: Ledger::default(),
            tenants: Ledger::default(),
            bytes: 0,
            limit,
            markers: 0,
            delivering: 0,
            delivering_bytes: 0,
            permits: HashMap::new(),
        }
    }

    /// Bytes waiting, in all.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// States waiting, in all (those in delivery not counted).
    pub(super) fn len(&self) -> usize {
        self.queues.values().map(Queue::waiting).sum()
    }

    /// Markers waiting: states owed as their task stands.
    pub(super) fn markers(&self) -> usize {
        self.markers
    }

    /// Deliveries under way, and the bytes of their bodies.
    pub(super) fn delivering(&self) -> (usize, usize) {
        (self.delivering, self.delivering_bytes)
    }

    /// The most body bytes one host (or one tenant) may hold while `others` other hosts (or
    /// tenants) hold some.
    fn share(&self, others: usize) -> usize {
        self.limit / (others + 1).min(SHARES)
    }

    /// Queues `pending` for the webhook `key` at `target`, making room at a bound (see the
    /// module).
    pub(super) fn push(
        &mut self,
        key: &QueueKey,
        target: Target,
        owner: Owner,
        pending: Pending,
    ) -> Enqueued {
        let mut done = Enqueued {
            start: !self.queues.contains_key(key),
            ..Enqueued::default()
        };
        self.open(key, target, owner);
        // A marker waiting already owes the task as it stands, which will hold this state
        // too: it only moves on to this revision.
        if let Some(queue) = self.queues.get_mut(key)
            && queue.waiting() > 0
            && let Some(waiting) = queue.pending.back_mut()
            && waiting.payload == Payload::AsItStands
        {
            waiting.revision = waiting.revision.max(pending.revision);
            done.superseded = 1;
            return done;
        }
        let size = pending.charge(key);
        // 1. What waits for this webhook makes room, oldest first.
        while self.over(key, size, true).is_some() && self.drop_oldest_waiting(key) {
            done.superseded += 1;
        }
        // 2. Bodies become markers, in the scope of the bound that holds.
        while let Some(bound) = self.over(key, size, true) {
            if !self.make_room(key, bound, size, &mut done) {
                break;
            }
        }
        if self.over(key, size, true).is_none() {
            self.append(key, pending);
            return done;
        }
        // 3. This state waits as a marker, in place of every state waiting for its webhook.
        done.superseded += self.drop_waiting(key);
        let size = marker_charge(key);
        while let Some(bound) = self.over(key, size, false) {
            if !self.make_room(key, bound, size, &mut done) {
                break;
            }
        }
        if self.over(key, size, false).is_some() {
            done.given_up = true;
            if self.queues.get(key).is_some_and(|q| q.pending.is_empty()) {
                self.close(key);
                done.start = false;
            }
            return done;
        }
        done.owed += 1;
        self.append(
            key,
            Pending {
                revision: pending.revision,
                payload: Payload::AsItStands,
            },
        );
        done
    }

    /// The queue of `key`, made if it is new, at `target` for `owner` (a webhook whose URL
    /// changed moves what it holds to its new host).
    fn open(&mut self, key: &QueueKey, target: Target, owner: Owner) {
        let Some(queue) = self.queues.get_mut(key) else {
            self.queues.insert(
                key.clone(),
                Queue {
                    target,
                    owner,
                    pending: VecDeque::new(),
                    delivering: false,
                    bytes: 0,
                    body_bytes: 0,
                },
            );
            return;
        };
        queue.target = target;
        if queue.owner != owner {
            let (bytes, body_bytes) = (queue.bytes, queue.body_bytes);
            let old = std::mem::replace(&mut queue.owner, owner.clone());
            self.hosts.release(&old.host, bytes, body_bytes);
            self.hosts.hold(&owner.host, bytes, body_bytes);
            if let Some(tenant) = &old.tenant {
                self.tenants.release(tenant, bytes, body_bytes);
            }
            if let Some(tenant) = &owner.tenant {
                self.tenants.hold(tenant, bytes, body_bytes);
            }
        }
    }

    /// What `bound` holds for the queue of `key` now, and the most it may hold.
    fn used_and_cap(&self, key: &QueueKey, owner: &Owner, bound: Bound) -> (usize, usize) {
        match bound {
            Bound::Task => (self.tasks.bytes(&key.0), TASK_BYTES),
            Bound::Host => (
                self.hosts.body_bytes(&owner.host),
                self.share(self.hosts.others_with_bodies(&owner.host)),
            ),
            Bound::Tenant => match &owner.tenant {
                Some(tenant) => (
                    self.tenants.body_bytes(tenant),
                    self.share(self.tenants.others_with_bodies(tenant)),
                ),
                None => (0, usize::MAX),
            },
            Bound::All => (self.bytes, self.limit),
        }
    }

    /// The bound a state of `size` bytes for `key` would pass; the fair shares bound bodies
    /// only (`body`), a marker holding none.
    fn over(&self, key: &QueueKey, size: usize, body: bool) -> Option<Bound> {
        let owner = &self.queues.get(key)?.owner;
        let bounds: &[Bound] = if body {
            &[Bound::Task, Bound::Host, Bound::Tenant, Bound::All]
        } else {
            &[Bound::Task, Bound::All]
        };
        bounds.iter().copied().find(|bound| {
            let (used, cap) = self.used_and_cap(key, owner, *bound);
            used.saturating_add(size) > cap
        })
    }

    /// Makes the waiting bodies in `bound`'s scope for `key` markers, a queue at a time, the
    /// one with the most first (never `key`'s own: its states made room first), until a state
    /// of `size` bytes fits with an eighth of the bound to spare (so the next states fit
    /// without another search). Answers whether one was made.
    fn make_room(
        &mut self,
        key: &QueueKey,
        bound: Bound,
        size: usize,
        done: &mut Enqueued,
    ) -> bool {
        let Some(owner) = self.queues.get(key).map(|q| q.owner.clone()) else {
            return false;
        };
        let mut largest: Vec<(usize, QueueKey)> = self
            .queues
            .iter()
            .filter(|(k, q)| {
                *k != key
                    && q.body_bytes > 0
                    && match bound {
                        Bound::Task => k.0 == key.0,
                        Bound::Host => q.owner.host == owner.host,
                        Bound::Tenant => q.owner.tenant == owner.tenant,
                        Bound::All => true,
                    }
            })
            .map(|(k, q)| (q.body_bytes, k.clone()))
            .collect();
        largest.sort_unstable_by_key(|(bytes, _)| std::cmp::Reverse(*bytes));
        let mut made = false;
        for (_, queue) in largest {
            let (used, cap) = self.used_and_cap(key, &owner, bound);
            if made && used.saturating_add(size) <= cap - cap / 8 {
                break;
            }
            let (superseded, marked) = self.collapse(&queue);
            done.superseded += superseded;
            done.owed += usize::from(marked);
            made = true;
        }
        made
    }

    /// Makes every state waiting for `key` one marker, at the newest one's revision. Answers
    /// how many states it superseded and whether the marker is a new one.
    fn collapse(&mut self, key: &QueueKey) -> (usize, bool) {
        let Some(queue) = self.queues.get(key) else {
            return (0, false);
        };
        let first = queue.first_waiting();
        let Some(revision) = queue.pending.iter().skip(first).map(|p| p.revision).max() else {
            return (0, false);
        };
        let had_marker = queue
            .pending
            .iter()
            .skip(first)
            .any(|p| p.payload == Payload::AsItStands);
        let collapsed = self.drop_waiting(key);
        self.append(
            key,
            Pending {
                revision,
                payload: Payload::AsItStands,
            },
        );
        (collapsed - 1, !had_marker)
    }

    /// Adds `pending` at the back of `key`'s queue, and its bytes to every count.
    fn append(&mut self, key: &QueueKey, pending: Pending) {
        let Some(queue) = self.queues.get_mut(key) else {
            return;
        };
        let (bytes, body_bytes) = (pending.charge(key), pending.body_bytes());
        if pending.payload == Payload::AsItStands {
            self.markers += 1;
        }
        queue.bytes += bytes;
        queue.body_bytes += body_bytes;
        queue.pending.push_back(pending);
        let owner = queue.owner.clone();
        self.hold(key, &owner, bytes, body_bytes);
    }

    /// Removes the state at `at` of `key`'s queue (a waiting one), and its bytes from every
    /// count.
    fn remove(&mut self, key: &QueueKey, at: usize) -> Option<Pending> {
        let queue = self.queues.get_mut(key)?;
        let removed = queue.pending.remove(at)?;
        let (bytes, body_bytes) = (removed.charge(key), removed.body_bytes());
        if removed.payload == Payload::AsItStands {
            self.markers -= 1;
        }
        queue.bytes -= bytes;
        queue.body_bytes -= body_bytes;
        let owner = queue.owner.clone();
        self.release(key, &owner, bytes, body_bytes);
        Some(removed)
    }

    /// Drops the oldest state waiting for `key`; answers whether there was one.
    fn drop_oldest_waiting(&mut self, key: &QueueKey) -> bool {
        let Some(first) = self
            .queues
            .get(key)
            .filter(|q| q.waiting() > 0)
            .map(Queue::first_waiting)
        else {
            return false;
        };
        self.remove(key, first).is_some()
    }

    /// Drops every state waiting for `key` (not one in delivery); answers how many.
    fn drop_waiting(&mut self, key: &QueueKey) -> usize {
        let mut dropped = 0;
        while self.drop_oldest_waiting(key) {
            dropped += 1;
        }
        dropped
    }

    fn hold(&mut self, key: &QueueKey, owner: &Owner, bytes: usize, body_bytes: usize) {
        self.bytes += bytes;
        self.tasks.hold(&key.0, bytes, body_bytes);
        self.hosts.hold(&owner.host, bytes, body_bytes);
        if let Some(tenant) = &owner.tenant {
            self.tenants.hold(tenant, bytes, body_bytes);
        }
    }

    fn release(&mut self, key: &QueueKey, owner: &Owner, bytes: usize, body_bytes: usize) {
        self.bytes -= bytes;
        self.tasks.release(&key.0, bytes, body_bytes);
        self.hosts.release(&owner.host, bytes, body_bytes);
        if let Some(tenant) = &owner.tenant {
            self.tenants.release(tenant, bytes, body_bytes);
        }
    }

    /// Where the next delivery for `key` goes and the permits of its host; `None` when
    /// nothing waits (the queue is gone) or another worker delivers its head (it goes on).
    pub(super) fn next(&mut self, key: &QueueKey) -> Option<(Target, Arc<Semaphore>)> {
        let queue = self.queues.get(key)?;
        if queue.delivering {
            return None;
        }
        if queue.pending.is_empty() {
            self.close(key);
            return None;
        }
        let target = queue.target.clone();
        let host = queue.owner.host.clone();
        let permits = Arc::clone(
            self.permits
                .entry(host)
                .or_insert_with(|| Arc::new(Semaphore::new(PER_HOST))),
        );
        Some((target, permits))
    }

    /// Takes the head of `key` into delivery (its host's permit is held): it leaves the
    /// queue's bytes. `None` when nothing waits (the queue is gone) or another worker
    /// delivers its head.
    pub(super) fn take(&mut self, key: &QueueKey) -> Option<(Target, Pending)> {
        let queue = self.queues.get(key)?;
        if queue.delivering {
            return None;
        }
        if queue.pending.is_empty() {
            self.close(key);
            return None;
        }
        let target = queue.target.clone();
        let head = self.remove(key, 0)?;
        let queue = self.queues.get_mut(key)?;
        queue.pending.push_front(head.clone());
        queue.delivering = true;
        self.delivering += 1;
        self.delivering_bytes += head.body_bytes();
        Some((target, head))
    }

    /// The body of the delivery of `key` was read back from the task store: `bytes` more in
    /// delivery.
    pub(super) fn read_back(&mut self, bytes: usize) {
        self.delivering_bytes += bytes;
    }

    /// The task as it stands was just read for the head of `key`: every state waiting behind
    /// it was stored before that read (a task's states are queued in the order they are
    /// stored, each as it is stored), so the read holds them. Answers how many were dropped.
    pub(super) fn supersede_waiting(&mut self, key: &QueueKey) -> usize {
        self.drop_waiting(key)
    }

    /// The delivery of `key`'s head is over (delivered or given up), its body `bytes` long
    /// (read back included).
    pub(super) fn done(&mut self, key: &QueueKey, bytes: usize) {
        if let Some(queue) = self.queues.get_mut(key)
            && queue.delivering
        {
            queue.pending.pop_front();
            queue.delivering = false;
            self.delivering -= 1;
            self.delivering_bytes -= bytes;
        }
    }

    /// Drops what waits for `key` (its webhook was deleted); answers how many states. A
    /// delivery under way ends as it will.
    pub(super) fn forget(&mut self, key: &QueueKey) -> usize {
        let dropped = self.drop_waiting(key);
        if self.queues.get(key).is_some_and(|q| q.pending.is_empty()) {
            self.close(key);
        }
        dropped
    }

    /// Removes `key`'s empty queue, and its host's permits when nothing else holds them.
    fn close(&mut self, key: &QueueKey) {
        let Some(queue) = self.queues.remove(key) else {
            return;
        };
        // Every permit held holds its semaphore too: one held by nobody can go, and a queue
        // of the host still waiting makes a new one.
        let host = queue.owner.host;
        if self
            .permits
            .get(&host)
            .is_some_and(|p| Arc::strong_count(p) == 1)
        {
            self.permits.remove(&host);
        }
    }
}

#[cfg(test)]
mod tests;
