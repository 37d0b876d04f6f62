//! Where the runtime is in its life: starting, ready, or draining for shutdown. The turn
//! service admits turns only when ready; health reports it; shutdown moves it to draining.

use std::sync::atomic::{AtomicU8, Ordering};

/// The runtime's readiness, shared by the handlers and the shutdown sequence.
#[derive(Debug, Default)]
pub struct Readiness(AtomicU8);

/// The phases, in order; readiness only moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Bound, but not yet able to take tasks.
    Starting,
    /// Taking tasks.
    Ready,
    /// Shutting down: no new tasks, in-flight ones finish.
    Draining,
}

impl Readiness {
    pub fn phase(&self) -> Phase {
        match self.0.load(Ordering::Acquire) {
            0 => Phase::Starting,
            1 => Phase::Ready,
            _ => Phase::Draining,
        }
    }

    /// Moves to `Ready`, unless already draining.
    pub fn set_ready(&self) {
        let _ = self
            .0
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Moves to `Draining`.
    pub fn set_draining(&self) {
        self.0.store(2, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_forward_only() {
        let l = Readiness::default();
        assert_eq!(l.phase(), Phase::Starting);
        l.set_ready();
        assert_eq!(l.phase(), Phase::Ready);
        l.set_draining();
        l.set_ready();
        assert_eq!(l.phase(), Phase::Draining);
    }
}
