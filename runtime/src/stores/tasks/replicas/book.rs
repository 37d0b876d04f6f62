//! What a replica knows of the others, from the bucket's watch: when it last saw each one's
//! lease renewed, and which tasks each one is running (stored running, by it). The judge
//! ([`Book::dead`]) decides from that alone which replicas are gone.
//!
//! Times are this replica's own clock at the moment the watch delivered an entry, never a
//! clock read from another machine, so clock skew between hosts does not matter. A replica
//! judges only while its own watch is live (it sees its own renewals arrive), and counts a
//! peer's silence from no earlier than the moment it became live: a replica cut off from NATS
//! for a while gives every peer a whole lease again before calling it gone.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Leases and running tasks, by replica (keyed by the replica's token).
#[derive(Debug, Default)]
pub(crate) struct Book {
    leases: HashMap<String, Seen>,
    running: HashMap<String, Running>,
    /// Each running task's owner (token), so a task that moves is taken off the old one.
    owner_of: HashMap<String, String>,
    /// When this replica last saw its own renewal arrive.
    own_seen: Option<Instant>,
    /// Since when this replica's watch has been live without a gap.
    live_since: Option<Instant>,
}

/// The last renewal seen of one replica's lease.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    lease: Duration,
    instance: String,
    /// The replica left (its lease was deleted).
    left: bool,
}

/// One replica's running tasks.
#[derive(Debug, Default)]
struct Running {
    name: String,
    tasks: HashSet<String>,
}

/// A replica judged gone, and the tasks it was running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gone {
    pub(crate) token: String,
    pub(crate) name: String,
    pub(crate) tasks: Vec<String>,
}

impl Book {
    /// A renewal of replica `token`'s lease (`lease` long, by process `instance`) was seen
    /// at `at`.
    pub(crate) fn renewed(&mut self, token: &str, lease: Duration, instance: &str, at: Instant) {
        self.leases.insert(
            token.to_owned(),
            Seen {
                at,
                lease,
                instance: instance.to_owned(),
                left: false,
            },
        );
    }

    /// Replica `token` left: its lease was deleted.
    pub(crate) fn left(&mut self, token: &str, at: Instant) {
        let seen = self.leases.entry(token.to_owned()).or_insert(Seen {
            at,
            lease: Duration::ZERO,
            instance: String::new(),
            left: true,
        });
        seen.left = true;
    }

    /// This replica's own renewal was seen at `at`, `beat` after the one before: the watch
    /// is live, and has been since `at` if the last one is older than a few beats.
    pub(crate) fn own_renewal(&mut self, beat: Duration, at: Instant) {
        let gap = self
            .own_seen
            .is_none_or(|seen| at.saturating_duration_since(seen) > beat * 3);
        if gap || self.live_since.is_none() {
            self.live_since = Some(at);
        }
        self.own_seen = Some(at);
    }

    /// The process that last renewed replica `token`'s lease.
    pub(crate) fn instance_of(&self, token: &str) -> Option<&str> {
        self.leases.get(token).map(|s| s.instance.as_str())
    }

    /// Task `task_id` is stored by replica `owner` (`owner_token`), running or not.
    pub(crate) fn stored(&mut self, task_id: &str, owner: &str, owner_token: &str, running: bool) {
        if let Some(before) = self.owner_of.remove(task_id)
            && let Some(r) = self.running.get_mut(&before)
        {
            r.tasks.remove(task_id);
            if r.tasks.is_empty() {
                self.running.remove(&before);
            }
        }
        if running {
            let r = self.running.entry(owner_token.to_owned()).or_default();
            owner.clone_into(&mut r.name);
            r.tasks.insert(task_id.to_owned());
            self.owner_of
                .insert(task_id.to_owned(), owner_token.to_owned());
        }
    }

    /// The tasks replica `token` is running, by the store.
    pub(crate) fn running_of(&self, token: &str) -> Vec<String> {
        self.running
            .get(token)
            .map(|r| r.tasks.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many tasks replica `token` is running, by the store.
    #[cfg(test)]
    fn running_count(&self, token: &str) -> usize {
        self.running.get(token).map_or(0, |r| r.tasks.len())
    }

    /// Whether this replica's watch is live now (its own renewals keep arriving).
    pub(crate) fn is_live(&self, beat: Duration, now: Instant) -> bool {
        self.own_seen
            .is_some_and(|seen| now.saturating_duration_since(seen) <= beat * 3)
    }

    /// The replicas other than `me` that are gone and still own running tasks: their lease
    /// was deleted, or not renewed for longer than it lasts, counted from no earlier than
    /// this replica's watch became live. A replica never seen renewing counts as renewed the
    /// moment the watch became live, with a lease of `default_lease`.
    pub(crate) fn dead(
        &self,
        me: &str,
        beat: Duration,
        default_lease: Duration,
        now: Instant,
    ) -> Vec<Gone> {
        let (true, Some(live_since)) = (self.is_live(beat, now), self.live_since) else {
            return Vec::new();
        };
        let mut gone: Vec<Gone> = self
            .running
            .iter()
            .filter(|(token, r)| token.as_str() != me && !r.tasks.is_empty())
            .filter(|(token, _)| {
                let (seen, lease, left) = self
                    .leases
                    .get(token.as_str())
                    .map_or((live_since, default_lease, false), |s| {
                        (s.at.max(live_since), s.lease, s.left)
                    });
                left || now.saturating_duration_since(seen) > lease
            })
            .map(|(token, r)| {
                let mut tasks: Vec<String> = r.tasks.iter().cloned().collect();
                tasks.sort();
                Gone {
                    token: token.clone(),
                    name: r.name.clone(),
                    tasks,
                }
            })
            .collect();
        gone.sort_by(|a, b| a.token.cmp(&b.token));
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEAT: Duration = Duration::from_secs(1);
    const LEASE: Duration = Duration::from_secs(5);

    /// A book in which `me` has been live since `start`, renewing every beat until `until`.
    fn live_book(start: Instant, until: Instant) -> Book {
        let mut book = Book::default();
        let mut at = start;
        while at <= until {
            book.own_renewal(BEAT, at);
            at += BEAT;
        }
        book
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_peer_is_gone_once_its_lease_ran_out_and_only_if_it_runs_tasks() {
        let t0 = Instant::now();
        let mut book = live_book(t0, t0 + secs(20));
        book.renewed("a", LEASE, "i1", t0 + secs(10));
        book.renewed("idle", LEASE, "i2", t0 + secs(1));
        book.stored("t1", "replica-a", "a", true);
        book.stored("t2", "replica-a", "a", true);
        assert!(
            book.dead("me", BEAT, LEASE, t0 + secs(15)).is_empty(),
            "within its lease"
        );
        let gone = book.dead("me", BEAT, LEASE, t0 + secs(16));
        assert_eq!(
            gone,
            [Gone {
                token: "a".into(),
                name: "replica-a".into(),
                tasks: vec!["t1".into(), "t2".into()],
            }],
            "the idle peer runs nothing, so nothing is done about it"
        );
    }

    #[test]
    fn a_task_that_ended_or_moved_is_no_longer_its_old_owners() {
        let t0 = Instant::now();
        let mut book = live_book(t0, t0 + secs(20));
        book.stored("t1", "replica-a", "a", true);
        book.stored("t2", "replica-a", "a", true);
        book.stored("t1", "replica-a", "a", false);
        book.stored("t2", "replica-b", "b", true);
        assert_eq!(book.running_count("a"), 0);
        assert_eq!(book.running_count("b"), 1);
        book.renewed("b", LEASE, "i", t0 + secs(18));
        assert!(book.dead("me", BEAT, LEASE, t0 + secs(20)).is_empty());
    }

    #[test]
    fn a_replica_that_left_is_gone_at_once_and_one_never_seen_after_a_lease() {
        let t0 = Instant::now();
        let mut book = live_book(t0, t0 + secs(3));
        book.renewed("a", LEASE, "i", t0 + secs(2));
        book.stored("t1", "replica-a", "a", true);
        book.stored("t9", "replica-z", "z", true);
        book.left("a", t0 + secs(3));
        let gone = book.dead("me", BEAT, LEASE, t0 + secs(3));
        assert_eq!(gone.len(), 1, "{gone:?}");
        assert_eq!(gone[0].name, "replica-a");
        let mut book = live_book(t0, t0 + secs(6));
        book.stored("t9", "replica-z", "z", true);
        assert!(book.dead("me", BEAT, LEASE, t0 + secs(5)).is_empty());
        assert_eq!(
            book.dead("me", BEAT, LEASE, t0 + secs(6))[0].name,
            "replica-z"
        );
    }

    #[test]
    fn a_replica_that_was_cut_off_judges_nobody_and_then_gives_a_whole_lease() {
        let t0 = Instant::now();
        let mut book = live_book(t0, t0 + secs(2));
        book.renewed("a", LEASE, "i", t0 + secs(2));
        book.stored("t1", "replica-a", "a", true);
        // This replica hears nothing (itself included) from 2 s to 30 s.
        assert!(
            book.dead("me", BEAT, LEASE, t0 + secs(30)).is_empty(),
            "not live: it cannot tell"
        );
        book.own_renewal(BEAT, t0 + secs(30));
        assert!(
            book.dead("me", BEAT, LEASE, t0 + secs(31)).is_empty(),
            "live again: the peer's silence counts from now"
        );
        for s in 31..=36 {
            book.own_renewal(BEAT, t0 + secs(s));
        }
        assert_eq!(book.dead("me", BEAT, LEASE, t0 + secs(36)).len(), 1);
    }

    #[test]
    fn a_replica_never_judges_itself() {
        let t0 = Instant::now();
        let mut book = live_book(t0, t0 + secs(20));
        book.stored("t1", "me-name", "me", true);
        assert!(book.dead("me", BEAT, LEASE, t0 + secs(20)).is_empty());
    }
}
