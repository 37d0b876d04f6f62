//! Admission by bytes: a turn starts only if what it holds while it runs fits both the
//! process's budget (`TURN_MEMORY`) and its agent's (`AGENT_TURN_MEMORY`), so one agent's flood
//! cannot take the others' room; the count of turns (`MAX_CONCURRENT_TASKS`) stays as a rail
//! far above what the budgets admit. A turn is charged [`HELD_TURN_BYTES`] (what a held
//! streamed turn was measured to cost) plus its message's bytes. A
//! refusal names the limit it hit; nothing waits for room.
//!
//! **Fair share.** With a `budgets:` block, the turn memory is shared fairly between tenants
//! by their `share` (default 1): a tenant's turns may hold at most
//! `TURN_MEMORY × share / (the shares of the tenants holding room now, its own counted, + 1)`,
//! the `+ 1` a seat for a tenant not seen yet, so a tenant that floods first still leaves the
//! next one room to start at once. Callers with no tenant are one group that keeps no seat for
//! others (a deployment without tenants admits as before), though the tenants' seats hold
//! against it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What a running turn holds besides its message: its task and event log, its stream queue,
/// its span, its future and its connection's buffers. Measured: 33.0 KiB of RSS per held
/// streamed JSON-RPC turn with 2,000 held, 31.1 KiB with 10,000 (the `held_turns` benchmark;
/// `docs/performance.md` gives the figures); a turn is charged more, for what its message's parsing and
/// a real model's client hold beyond the benchmark's, so 512 MiB still admits over 10,000.
pub const HELD_TURN_BYTES: usize = 40 * 1024;

/// What a held subscription (`SubscribeToTask`) holds while it streams: its connection's
/// buffers, its SSE stream, the follow of the task and its queue of events not yet read. It
/// is a held turn without the turn's future, its agent and its task.
pub const HELD_STREAM_BYTES: usize = 24 * 1024;

/// Budgets are kept in units of this many bytes (a semaphore's permits).
const UNIT: usize = 1024;

/// Which limit refused a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `MAX_CONCURRENT_TASKS`, the count rail.
    Turns,
    /// `TURN_MEMORY`, the bytes every running turn may hold.
    Memory,
    /// `AGENT_TURN_MEMORY`, the bytes one agent's running turns may hold.
    AgentMemory,
    /// A tenant's fair share of `TURN_MEMORY` (`budgets:`, by `share`).
    TenantShare,
}

impl Limit {
    /// The setting that sets the limit.
    pub fn setting(self) -> &'static str {
        match self {
            Limit::Turns => "MAX_CONCURRENT_TASKS",
            Limit::Memory => "TURN_MEMORY",
            Limit::AgentMemory => "AGENT_TURN_MEMORY",
            Limit::TenantShare => "TURN_MEMORY_SHARE",
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::TenantShare => f.write_str("the tenant's fair share of TURN_MEMORY"),
            _ => f.write_str(self.setting()),
        }
    }
}

/// The shares turns are admitted fairly by (`budgets:`); none: first come, first served.
#[derive(Debug, Clone, Default)]
pub struct FairShares {
    /// Each named tenant's share; a tenant not named has a share of 1.
    pub shares: HashMap<String, u32>,
}

/// Who a turn is admitted for, as fair admission groups callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group<'a> {
    Tenant(&'a str),
    /// Callers with no tenant.
    NoTenant,
}

/// The room each group's running turns hold, and the shares they are held to.
#[derive(Debug, Default)]
struct Fair {
    shares: Option<FairShares>,
    /// Units held by each group's running turns (`None`: callers with no tenant).
    held: HashMap<Option<Arc<str>>, usize>,
}

impl FairShares {
    /// The share of `group` (`None`: callers with no tenant, share 1).
    fn of(&self, group: Option<&Arc<str>>) -> usize {
        group
            .and_then(|tenant| self.shares.get(&**tenant))
            .map_or(1, |share| usize::try_from(*share).unwrap_or(1))
    }
}

impl Fair {
    /// The most units `group` may hold now, out of `total` (`None`: no fair share holds).
    fn cap(&self, group: Option<&Arc<str>>, total: usize) -> Option<usize> {
        let shares = self.shares.as_ref()?;
        let own = shares.of(group);
        let others: usize = self
            .held
            .iter()
            .filter(|(g, held)| g.as_ref() != group && **held > 0)
            .map(|(g, _)| shares.of(g.as_ref()))
            .sum();
        let seat = usize::from(group.is_some());
        Some(total.saturating_mul(own) / (own + others + seat).max(1))
    }
}

/// A turn's place in its group's fair share, given back when the turn ends.
#[derive(Debug)]
struct FairPlace {
    fair: Arc<Mutex<Fair>>,
    group: Option<Arc<str>>,
    units: usize,
}

impl Drop for FairPlace {
    fn drop(&mut self) {
        let mut fair = self.fair.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = fair.held.get_mut(&self.group) {
            *held = held.saturating_sub(self.units);
            if *held == 0 {
                fair.held.remove(&self.group);
            }
        }
    }
}

/// The budgets turns are admitted under.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    /// Turns at once, at most.
    pub max_turns: usize,
    /// Bytes every running turn may hold.
    pub memory: usize,
    /// Bytes one agent's running turns may hold.
    pub agent_memory: usize,
}

/// The room left under each budget.
#[derive(Debug)]
pub(super) struct Admission {
    budgets: Budgets,
    turns: Arc<Semaphore>,
    memory: Arc<Semaphore>,
    agents: Mutex<HashMap<String, Arc<Semaphore>>>,
    fair: Arc<Mutex<Fair>>,
    /// Whether turns are admitted fairly (a `budgets:` block), read without the lock.
    fair_on: AtomicBool,
}

/// What an admitted turn holds until it ends: its share of every budget.
#[derive(Debug)]
pub(super) struct Admitted {
    _turn: OwnedSemaphorePermit,
    _memory: OwnedSemaphorePermit,
    _agent: OwnedSemaphorePermit,
    _fair: Option<FairPlace>,
}

/// `bytes` in budget units, rounded up.
fn units(bytes: usize) -> usize {
    bytes.div_ceil(UNIT).min(Semaphore::MAX_PERMITS)
}

/// `n` units as one acquisition (a charge too large for one is refused).
fn acquire(semaphore: &Arc<Semaphore>, n: usize) -> Option<OwnedSemaphorePermit> {
    let n = u32::try_from(n).ok()?;
    Arc::clone(semaphore).try_acquire_many_owned(n).ok()
}

impl Admission {
    pub(super) fn new(budgets: Budgets) -> Self {
        Self {
            budgets,
            turns: Arc::new(Semaphore::new(
                budgets.max_turns.min(Semaphore::MAX_PERMITS),
            )),
            memory: Arc::new(Semaphore::new(units(budgets.memory))),
            agents: Mutex::new(HashMap::new()),
            fair: Arc::default(),
            fair_on: AtomicBool::new(false),
        }
    }

    /// Admits turns fairly by `shares` from now on (`None`: first come, first served).
    pub(super) fn share_fairly(&self, shares: Option<FairShares>) {
        let mut fair = self.fair.lock().unwrap_or_else(PoisonError::into_inner);
        self.fair_on.store(shares.is_some(), Ordering::Relaxed);
        fair.shares = shares;
    }

    /// Admits a turn of `agent` for `group` whose message is `message_bytes` long, or says
    /// which limit has no room for it.
    pub(super) fn admit(
        &self,
        agent: &str,
        group: Group<'_>,
        message_bytes: usize,
    ) -> Result<Admitted, Limit> {
        let charge = units(HELD_TURN_BYTES.saturating_add(message_bytes));
        let turn = acquire(&self.turns, 1).ok_or(Limit::Turns)?;
        let agent_room = self.agent(agent);
        let agent = acquire(&agent_room, charge).ok_or(Limit::AgentMemory)?;
        let memory = acquire(&self.memory, charge).ok_or(Limit::Memory)?;
        let fair = self.fair_place(group, charge)?;
        Ok(Admitted {
            _turn: turn,
            _memory: memory,
            _agent: agent,
            _fair: fair,
        })
    }

    /// `charge` more units in `group`'s fair share, if it has room for them.
    fn fair_place(&self, group: Group<'_>, charge: usize) -> Result<Option<FairPlace>, Limit> {
        // Without a `budgets:` block (the default), a turn pays one atomic load here.
        if !self.fair_on.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let mut fair = self.fair.lock().unwrap_or_else(PoisonError::into_inner);
        let group = match group {
            Group::Tenant(tenant) => Some(Arc::<str>::from(tenant)),
            Group::NoTenant => None,
        };
        let Some(cap) = fair.cap(group.as_ref(), units(self.budgets.memory)) else {
            return Ok(None);
        };
        let held = fair.held.entry(group.clone()).or_default();
        if held.saturating_add(charge) > cap {
            return Err(Limit::TenantShare);
        }
        *held += charge;
        Ok(Some(FairPlace {
            fair: Arc::clone(&self.fair),
            group,
            units: charge,
        }))
    }

    /// Admits a subscription to a running task: it takes [`HELD_STREAM_BYTES`] of the
    /// process's turn memory until the room it answers is dropped.
    pub(super) fn admit_stream(&self) -> Result<OwnedSemaphorePermit, Limit> {
        acquire(&self.memory, units(HELD_STREAM_BYTES)).ok_or(Limit::Memory)
    }

    /// Whether a turn of `agent` with a message `message_bytes` long could ever be admitted:
    /// one larger than a whole budget is refused as too large, not asked to retry.
    pub(super) fn could_ever_fit(&self, message_bytes: usize) -> Result<(), Limit> {
        let charge = HELD_TURN_BYTES.saturating_add(message_bytes);
        if charge > self.budgets.agent_memory {
            return Err(Limit::AgentMemory);
        }
        if charge > self.budgets.memory {
            return Err(Limit::Memory);
        }
        Ok(())
    }

    /// Turns that could start now, each of the smallest size, as far as the process-wide
    /// limits go.
    pub(super) fn room(&self) -> usize {
        let by_memory = self.memory.available_permits() / units(HELD_TURN_BYTES);
        self.turns.available_permits().min(by_memory)
    }

    fn agent(&self, name: &str) -> Arc<Semaphore> {
        let mut agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            agents
                .entry(name.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(units(self.budgets.agent_memory)))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_has_its_refusals_series_from_the_start() {
        for limit in [
            Limit::Turns,
            Limit::Memory,
            Limit::AgentMemory,
            Limit::TenantShare,
        ] {
            assert!(crate::platform::metrics::TURN_LIMITS.contains(&limit.setting()));
        }
    }

    fn admission(max_turns: usize, memory: usize, agent_memory: usize) -> Admission {
        Admission::new(Budgets {
            max_turns,
            memory,
            agent_memory,
        })
    }

    #[test]
    fn turns_are_admitted_by_their_bytes_and_room_comes_back_when_they_end() {
        let room = admission(1_000, 4 * HELD_TURN_BYTES, 1 << 30);
        let held: Vec<_> = (0..4)
            .map(|_| room.admit("a", Group::NoTenant, 0).unwrap())
            .collect();
        assert_eq!(
            room.admit("a", Group::NoTenant, 0).unwrap_err(),
            Limit::Memory
        );
        drop(held);
        assert!(room.admit("a", Group::NoTenant, 0).is_ok());
    }

    #[test]
    fn subscriptions_take_room_from_the_turn_memory_and_give_it_back() {
        let room = admission(1_000, HELD_TURN_BYTES + 2 * HELD_STREAM_BYTES, 1 << 30);
        let _turn = room.admit("a", Group::NoTenant, 0).unwrap();
        let streams: Vec<_> = (0..2).map(|_| room.admit_stream().unwrap()).collect();
        assert_eq!(room.admit_stream().unwrap_err(), Limit::Memory);
        assert_eq!(
            room.admit("b", Group::NoTenant, 0).unwrap_err(),
            Limit::Memory
        );
        drop(streams);
        assert!(room.admit_stream().is_ok());
    }

    #[test]
    fn a_large_message_takes_the_room_of_many_small_turns() {
        let room = admission(1_000, 64 * HELD_TURN_BYTES, 1 << 30);
        let _big = room
            .admit("a", Group::NoTenant, 60 * HELD_TURN_BYTES)
            .unwrap();
        let small: Vec<_> = (0..3)
            .map(|_| room.admit("a", Group::NoTenant, 0).unwrap())
            .collect();
        assert_eq!(
            room.admit("a", Group::NoTenant, 0).unwrap_err(),
            Limit::Memory
        );
        assert_eq!(small.len(), 3);
    }

    #[test]
    fn one_agent_at_its_budget_leaves_the_others_their_room() {
        let room = admission(1_000, 10 * HELD_TURN_BYTES, 4 * HELD_TURN_BYTES);
        let flood: Vec<_> = (0..4)
            .map(|_| room.admit("flood", Group::NoTenant, 0).unwrap())
            .collect();
        assert_eq!(
            room.admit("flood", Group::NoTenant, 0).unwrap_err(),
            Limit::AgentMemory
        );
        let other: Vec<_> = (0..4)
            .map(|_| room.admit("other", Group::NoTenant, 0).unwrap())
            .collect();
        assert_eq!((flood.len(), other.len()), (4, 4));
    }

    #[test]
    fn the_count_rail_holds_whatever_the_bytes() {
        let room = admission(2, 1 << 30, 1 << 30);
        let _held = [
            room.admit("a", Group::NoTenant, 0).unwrap(),
            room.admit("b", Group::NoTenant, 0).unwrap(),
        ];
        assert_eq!(
            room.admit("c", Group::NoTenant, 0).unwrap_err(),
            Limit::Turns
        );
        assert_eq!(room.room(), 0);
    }

    #[test]
    fn a_message_larger_than_a_whole_budget_could_never_fit() {
        let room = admission(10, 4 * HELD_TURN_BYTES, 2 * HELD_TURN_BYTES);
        assert_eq!(room.could_ever_fit(0), Ok(()));
        assert_eq!(
            room.could_ever_fit(3 * HELD_TURN_BYTES),
            Err(Limit::AgentMemory)
        );
        let room = admission(10, 2 * HELD_TURN_BYTES, 4 * HELD_TURN_BYTES);
        assert_eq!(room.could_ever_fit(3 * HELD_TURN_BYTES), Err(Limit::Memory));
    }

    #[test]
    fn a_refusal_gives_back_what_it_took() {
        let room = admission(10, HELD_TURN_BYTES, 1 << 30);
        let held = room.admit("a", Group::NoTenant, 0).unwrap();
        for _ in 0..5 {
            assert_eq!(
                room.admit("a", Group::NoTenant, 0).unwrap_err(),
                Limit::Memory
            );
        }
        drop(held);
        assert_eq!(room.room(), 1, "the refused turns left no permit taken");
    }

    /// Room for `turns` smallest turns, admitted fairly between tenants; `shares` names
    /// tenants' shares.
    fn fair(turns: usize, shares: &[(&str, u32)]) -> Admission {
        let room = admission(100_000, turns * HELD_TURN_BYTES, 1 << 40);
        room.share_fairly(Some(FairShares {
            shares: shares.iter().map(|(t, s)| ((*t).to_owned(), *s)).collect(),
        }));
        room
    }

    /// Admits turns for `group` until one is refused: those admitted, and the refusal.
    fn flood(room: &Admission, group: Group<'_>, asks: usize) -> (Vec<Admitted>, Option<Limit>) {
        let mut held = Vec::new();
        for _ in 0..asks {
            match room.admit("a", group, 0) {
                Ok(admitted) => held.push(admitted),
                Err(limit) => return (held, Some(limit)),
            }
        }
        (held, None)
    }

    #[test]
    fn a_tenant_that_floods_first_leaves_the_next_tenant_room_to_start() {
        let room = fair(500, &[]);
        let (a, refused) = flood(&room, Group::Tenant("a"), 2_000);
        assert_eq!(a.len(), 250, "alone, a tenant holds half: a seat is kept");
        assert_eq!(refused, Some(Limit::TenantShare));
        let (b, refused) = flood(&room, Group::Tenant("b"), 50);
        assert_eq!((b.len(), refused), (50, None), "all of b's turns start");
        let (c, _) = flood(&room, Group::Tenant("c"), 500);
        assert_eq!(
            c.len(),
            125,
            "a third tenant: 500 / (three tenants and a seat)"
        );
        assert!(room.admit("a", Group::Tenant("a"), 0).is_err());
    }

    #[test]
    fn a_tenants_place_comes_back_when_its_turns_end() {
        let room = fair(10, &[]);
        let (a, _) = flood(&room, Group::Tenant("a"), 10);
        assert_eq!(a.len(), 5);
        drop(a);
        let (a, _) = flood(&room, Group::Tenant("a"), 10);
        assert_eq!(a.len(), 5, "what the ended turns held is free again");
    }

    #[test]
    fn shares_weigh_a_tenants_room() {
        let room = fair(400, &[("acme", 3)]);
        let (acme, _) = flood(&room, Group::Tenant("acme"), 1_000);
        assert_eq!(acme.len(), 300, "share 3 of 3 + a seat of 1");
        let (globex, _) = flood(&room, Group::Tenant("globex"), 1_000);
        assert_eq!(globex.len(), 80, "share 1 of 3 + 1 + a seat: 400 / 5");
    }

    #[test]
    fn callers_with_no_tenant_keep_no_seat_and_without_budgets_nothing_is_shared() {
        let room = fair(100, &[]);
        let (none, refused) = flood(&room, Group::NoTenant, 1_000);
        assert_eq!((none.len(), refused), (100, Some(Limit::Memory)));
        drop(none);
        let room = admission(100_000, 100 * HELD_TURN_BYTES, 1 << 40);
        let (a, refused) = flood(&room, Group::Tenant("a"), 1_000);
        assert_eq!((a.len(), refused), (100, Some(Limit::Memory)), "first come");
    }
}
