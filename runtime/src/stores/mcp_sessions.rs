//! The MCP sessions the runtime holds, across every agent's MCP face, and their bound in count
//! and in bytes (`MAX_MCP_SESSIONS`, `MCP_SESSIONS_MEMORY`). Runtime-wide state: the MCP face
//! opens, uses and closes sessions through it, and `/healthz` reads whether it is full.
//!
//! - **At the bound**, a new session takes the place of one that is idle (no call in flight):
//!   first a session that never finished its handshake (the oldest), else the least recently
//!   used. Its client gets 404 on its next request and, as Streamable HTTP prescribes, opens a
//!   new session. A session with a call in flight is never ended for room: when every session
//!   has one, the new session is refused (the MCP face answers 503 with `Retry-After`).
//! - **A session that never finishes its handshake** (no `notifications/initialized`) ends
//!   after `MCP_HANDSHAKE_TIMEOUT`; **an idle one** after `MCP_SESSION_IDLE`.
//! - **Bytes**: a session is charged [`SESSION_COST`], the measured cost of an idle session,
//!   so the byte budget is a count: `MCP_SESSIONS_MEMORY / SESSION_COST`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::platform::identity::{Caller, Principal};
use crate::platform::metrics::{AgentLabel, ExpiryLabel, Metrics};

/// The bytes one idle MCP session costs the process (RSS): about 55,000, measured by
/// `runtime/benches/mcp_sessions.rs` (2,000 sessions), rounded up. Most of it is rmcp's
/// session worker and service tasks and their channels' first blocks. The byte budget is
/// divided by it.
pub const SESSION_COST: u64 = 56 * 1024;

/// How often expired sessions are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Sessions ended since the allocator last gave free memory back, past which it is asked to.
const TRIM_AFTER: usize = 64;

/// The configured bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SessionLimits {
    /// Live sessions at most (`MAX_MCP_SESSIONS`).
    pub max_sessions: usize,
    /// Bytes the sessions may hold (`MCP_SESSIONS_MEMORY`).
    pub max_bytes: u64,
    /// A session without `notifications/initialized` by then is ended.
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub handshake_timeout: Duration,
    /// A session unused (and without a call in flight) for this long is ended.
    #[serde(serialize_with = "daedalus_contract::container::serialize_duration")]
    pub idle: Duration,
}

impl SessionLimits {
    /// The most sessions live at once: the count bound, or the byte bound divided by the cost
    /// of a session, whichever is smaller (at least one).
    pub fn capacity(&self) -> usize {
        let by_bytes = usize::try_from(self.max_bytes / SESSION_COST).unwrap_or(usize::MAX);
        self.max_sessions.min(by_bytes).max(1)
    }
}

/// Ends a session of one MCP face (its transport, its worker).
pub trait SessionCloser: Send + Sync + fmt::Debug {
    /// Ends session `id`, in the background.
    fn close(&self, id: String);
}

#[derive(Debug)]
struct Entry {
    agent: Arc<str>,
    opened: Instant,
    last_used: Instant,
    in_flight: u32,
    initialized: bool,
    closer: Arc<dyn SessionCloser>,
    /// Who opened the session: only they may use it.
    principal: Option<Principal>,
}

/// How long a client may take between its `initialize` answer and `notifications/initialized`
/// before its session counts as an abandoned handshake, first in line for eviction. (A client
/// in the middle of a normal handshake is not.)
const HANDSHAKE_GRACE: Duration = Duration::from_secs(1);

impl Entry {
    /// Eviction order: abandoned handshakes first (oldest first), then idle sessions by last
    /// use. `None`: not evictable (a call in flight).
    fn eviction_key(&self, now: Instant) -> Option<(bool, Instant)> {
        let abandoned = !self.initialized && now >= self.opened + HANDSHAKE_GRACE;
        (self.in_flight == 0).then_some((!abandoned, self.last_used))
    }
}

#[derive(Debug, Default)]
struct Book {
    entries: HashMap<String, Entry>,
    /// Admissions granted whose session is not registered yet.
    pending: usize,
    /// Admissions whose session was registered, not yet dropped: their drop releases
    /// nothing more. (Admissions and sessions are matched by count, not by name.)
    registered: usize,
}

impl Book {
    /// A session was entered: the place it was admitted to is now its own.
    fn take_pending(&mut self) {
        if self.pending > 0 {
            self.pending -= 1;
            self.registered += 1;
        }
    }

    /// An admission ended: release its place unless its session took it.
    fn release(&mut self) {
        if self.registered > 0 {
            self.registered -= 1;
        } else {
            self.pending = self.pending.saturating_sub(1);
        }
    }
}

/// Why a new session was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the runtime holds as many MCP sessions as it may ({capacity}) and every one has a call in flight; retry shortly"
)]
pub struct SessionsFull {
    pub capacity: usize,
}

/// What `/healthz` shows of the sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SessionsStatus {
    pub live: usize,
    pub capacity: usize,
    /// The bound is reached: a new session ends an idle one or is refused.
    pub full: bool,
}

/// Every live MCP session of the runtime.
#[derive(Debug)]
pub struct SessionBook {
    limits: SessionLimits,
    capacity: usize,
    metrics: Arc<Metrics>,
    book: Mutex<Book>,
}

/// A granted place for a new session, held while its `initialize` is answered.
#[derive(Debug)]
pub struct Admission {
    book: Arc<SessionBook>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.book.lock().release();
    }
}

/// A call in flight in a session: the session is not ended for room while it lives.
#[derive(Debug)]
pub struct CallInFlight {
    book: Arc<SessionBook>,
    id: String,
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        let mut book = self.book.lock();
        if let Some(entry) = book.entries.get_mut(&self.id) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            entry.last_used = Instant::now();
        }
    }
}

impl SessionBook {
    pub fn new(limits: SessionLimits, metrics: Arc<Metrics>) -> Self {
        Self {
            capacity: limits.capacity(),
            limits,
            metrics,
            book: Mutex::new(Book::default()),
        }
    }

    pub fn limits(&self) -> &SessionLimits {
        &self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a new session: free, or made by ending the idle session first in the
    /// eviction order. Refused when every session has a call in flight.
    pub fn admit(self: &Arc<Self>) -> Result<Admission, SessionsFull> {
        let evicted = {
            let mut book = self.lock();
            let evicted = if book.entries.len() + book.pending < self.capacity {
                None
            } else {
                let now = Instant::now();
                let victim = book
                    .entries
                    .iter()
                    .filter_map(|(id, e)| e.eviction_key(now).map(|k| (k, id)))
                    .min()
                    .map(|(_, id)| id.clone());
                let Some(victim) = victim else {
                    self.metrics.mcp_sessions_refused.inc();
                    return Err(SessionsFull {
                        capacity: self.capacity,
                    });
                };
                let entry = self.remove(&mut book, &victim).expect("the victim is live");
                self.metrics.mcp_sessions_evicted.inc();
                Some((victim, entry))
            };
            book.pending += 1;
            evicted
        };
        if let Some((id, entry)) = evicted {
            tracing::info!(agent = %entry.agent, "MCP sessions at their bound; ending the least recently used idle one");
            entry.closer.close(id);
        }
        Ok(Admission {
            book: Arc::clone(self),
        })
    }

    fn remove(&self, book: &mut Book, id: &str) -> Option<Entry> {
        let entry = book.entries.remove(id)?;
        self.metrics
            .mcp_sessions
            .get_or_create(&AgentLabel {
                agent: entry.agent.to_string(),
            })
            .dec();
        Some(entry)
    }

    /// Session `id` of `agent` was opened (its `initialize` is being answered).
    pub fn opened(&self, id: &str, agent: &Arc<str>, closer: Arc<dyn SessionCloser>) {
        let now = Instant::now();
        let mut book = self.lock();
        book.take_pending();
        let fresh = book
            .entries
            .insert(
                id.to_owned(),
                Entry {
                    agent: Arc::clone(agent),
                    opened: now,
                    last_used: now,
                    in_flight: 0,
                    initialized: false,
                    closer,
                    principal: None,
                },
            )
            .is_none();
        if fresh {
            self.metrics
                .mcp_sessions
                .get_or_create(&AgentLabel {
                    agent: agent.to_string(),
                })
                .inc();
        }
    }

    /// Session `id` belongs to `principal` (who opened it).
    pub fn claim(&self, id: &str, principal: Option<&Principal>) {
        if let Some(entry) = self.lock().entries.get_mut(id) {
            entry.principal = principal.cloned();
        }
    }

    /// Whether `caller` may use session `id`: the principal that opened it may (a session
    /// this book does not hold is for the transport to refuse).
    pub fn open_to(&self, id: &str, caller: &Caller) -> bool {
        self.lock()
            .entries
            .get(id)
            .is_none_or(|entry| entry.principal.as_ref() == caller.principal())
    }

    /// The client sent `notifications/initialized`: the handshake is over.
    pub fn initialized(&self, id: &str) {
        if let Some(entry) = self.lock().entries.get_mut(id) {
            entry.initialized = true;
            entry.last_used = Instant::now();
        }
    }

    /// The session was used (any request or notification).
    pub fn touch(&self, id: &str) {
        if let Some(entry) = self.lock().entries.get_mut(id) {
            entry.last_used = Instant::now();
        }
    }

    /// A call started in session `id`; it is in flight until the guard drops.
    pub fn call(self: &Arc<Self>, id: &str) -> CallInFlight {
        if let Some(entry) = self.lock().entries.get_mut(id) {
            entry.in_flight += 1;
            entry.last_used = Instant::now();
        }
        CallInFlight {
            book: Arc::clone(self),
            id: id.to_owned(),
        }
    }

    /// Session `id` ended (closed by its client, or its worker stopped).
    pub fn closed(&self, id: &str) {
        let mut book = self.lock();
        self.remove(&mut book, id);
    }

    /// Ends the sessions whose handshake or idle time ran out as of `now`; returns how many.
    pub fn expire(&self, now: Instant) -> usize {
        let expired: Vec<(String, Entry, &'static str)> = {
            let mut book = self.lock();
            let due: Vec<(String, &'static str)> = book
                .entries
                .iter()
                .filter_map(|(id, e)| {
                    if !e.initialized && now >= e.opened + self.limits.handshake_timeout {
                        Some((id.clone(), "handshake"))
                    } else if e.in_flight == 0 && now >= e.last_used + self.limits.idle {
                        Some((id.clone(), "idle"))
                    } else {
                        None
                    }
                })
                .collect();
            due.into_iter()
                .filter_map(|(id, why)| self.remove(&mut book, &id).map(|e| (id, e, why)))
                .collect()
        };
        let count = expired.len();
        for (id, entry, reason) in expired {
            self.metrics
                .mcp_sessions_expired
                .get_or_create(&ExpiryLabel { reason })
                .inc();
            tracing::debug!(agent = %entry.agent, reason, "MCP session expired");
            entry.closer.close(id);
        }
        count
    }

    /// Ends expired sessions every second until `stop`. Once many have ended, the allocator
    /// is asked to give the free memory back: a flood that expires leaves the process about
    /// where it was.
    pub async fn sweep(self: Arc<Self>, stop: CancellationToken) {
        let mut ended_since_trim = 0;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(SWEEP_EVERY) => {}
            }
            let ended = self.expire(Instant::now());
            ended_since_trim += ended;
            // Trim once the expiries of a flood are over (nothing ended in this sweep).
            if ended == 0 && ended_since_trim >= TRIM_AFTER {
                // The session workers end just after their close: give them a moment.
                tokio::time::sleep(SWEEP_EVERY).await;
                crate::platform::heap::give_back_free_memory();
                ended_since_trim = 0;
            }
        }
    }

    pub fn status(&self) -> SessionsStatus {
        let book = self.lock();
        let live = book.entries.len();
        SessionsStatus {
            live,
            capacity: self.capacity,
            full: live + book.pending >= self.capacity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Closed(Mutex<Vec<String>>);

    impl SessionCloser for Closed {
        fn close(&self, id: String) {
            self.0.lock().unwrap().push(id);
        }
    }

    fn book(max_sessions: usize) -> (Arc<SessionBook>, Arc<Closed>) {
        let limits = SessionLimits {
            max_sessions,
            max_bytes: u64::MAX,
            handshake_timeout: Duration::from_secs(10),
            idle: Duration::from_mins(5),
        };
        (
            Arc::new(SessionBook::new(limits, Arc::new(Metrics::new()))),
            Arc::new(Closed::default()),
        )
    }

    fn open(book: &Arc<SessionBook>, closer: &Arc<Closed>, id: &str) {
        let _admission = book.admit().expect("admitted");
        book.opened(
            id,
            &Arc::from("a"),
            Arc::clone(closer) as Arc<dyn SessionCloser>,
        );
    }

    #[test]
    fn the_byte_budget_is_a_count_of_measured_sessions() {
        let limits = SessionLimits {
            max_sessions: 1_000,
            max_bytes: 10 * SESSION_COST,
            handshake_timeout: Duration::from_secs(10),
            idle: Duration::from_mins(5),
        };
        assert_eq!(limits.capacity(), 10);
        assert_eq!(
            SessionLimits {
                max_bytes: u64::MAX,
                ..limits
            }
            .capacity(),
            1_000
        );
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_bound_an_unfinished_handshake_goes_first_then_the_least_recently_used() {
        let (book, closed) = book(3);
        open(&book, &closed, "old-idle");
        book.initialized("old-idle");
        tokio::time::advance(Duration::from_secs(1)).await;
        open(&book, &closed, "recent");
        book.initialized("recent");
        tokio::time::advance(Duration::from_secs(1)).await;
        open(&book, &closed, "half-open");
        tokio::time::advance(Duration::from_secs(1)).await;
        book.touch("recent");

        open(&book, &closed, "new-1");
        assert_eq!(*closed.0.lock().unwrap(), ["half-open"]);
        book.initialized("new-1");
        open(&book, &closed, "new-2");
        assert_eq!(*closed.0.lock().unwrap(), ["half-open", "old-idle"]);
        assert_eq!(book.status().live, 3);
        assert!(book.status().full);
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_with_a_call_in_flight_is_never_ended_for_room() {
        let (book, closed) = book(2);
        open(&book, &closed, "busy");
        book.initialized("busy");
        open(&book, &closed, "idle");
        book.initialized("idle");
        let call = book.call("busy");
        tokio::time::advance(Duration::from_secs(5)).await;
        book.touch("idle");
        open(&book, &closed, "new");
        assert_eq!(
            *closed.0.lock().unwrap(),
            ["idle"],
            "busy is older but busy"
        );
        let _second = book.call("new");
        let refused = book
            .admit()
            .expect_err("every session has a call in flight");
        assert_eq!(refused.capacity, 2);
        drop(call);
        book.admit().expect("busy is idle again: it makes room");
        assert_eq!(*closed.0.lock().unwrap(), ["idle", "busy"]);
    }

    #[tokio::test(start_paused = true)]
    async fn unfinished_handshakes_and_idle_sessions_expire_and_busy_ones_do_not() {
        let (book, closed) = book(10);
        open(&book, &closed, "half-open");
        open(&book, &closed, "idle");
        book.initialized("idle");
        open(&book, &closed, "busy");
        book.initialized("busy");
        let _call = book.call("busy");
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(book.expire(Instant::now()), 1);
        assert_eq!(*closed.0.lock().unwrap(), ["half-open"]);
        tokio::time::advance(Duration::from_mins(5)).await;
        assert_eq!(book.expire(Instant::now()), 1);
        assert_eq!(*closed.0.lock().unwrap(), ["half-open", "idle"]);
        assert_eq!(book.status().live, 1, "the busy session stays");
    }

    #[test]
    fn a_session_being_answered_is_not_counted_twice() {
        let (book, closed) = book(2);
        let admission = book.admit().expect("admitted");
        book.opened(
            "s",
            &Arc::from("a"),
            Arc::clone(&closed) as Arc<dyn SessionCloser>,
        );
        assert_eq!(book.status().live, 1);
        assert!(
            !book.status().full,
            "one session, admitted and entered, is one"
        );
        drop(admission);
        let _second = book.admit().expect("room for a second");
        assert!(book.status().full);
        assert!(
            closed.0.lock().unwrap().is_empty(),
            "nothing ended for room"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_in_the_middle_of_its_handshake_is_not_first_in_line() {
        let (book, closed) = book(2);
        open(&book, &closed, "idle");
        book.initialized("idle");
        tokio::time::advance(Duration::from_millis(100)).await;
        open(&book, &closed, "handshaking");
        open(&book, &closed, "new");
        assert_eq!(*closed.0.lock().unwrap(), ["idle"]);
    }

    #[test]
    fn a_session_closed_twice_counts_once() {
        let (book, closed) = book(10);
        open(&book, &closed, "s");
        book.closed("s");
        book.closed("s");
        assert_eq!(book.status().live, 0);
        let text = book.metrics.render();
        assert!(
            text.contains("daedalus_runtime_mcp_sessions{agent=\"a\"} 0"),
            "{text}"
        );
    }
}
