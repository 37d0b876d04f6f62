//! The turns running now, by task id: what a cancel by id reaches.
//!
//! Each running turn has its own cancellation token, a child of the shutdown token, so a cancel
//! of one task stops that turn (and, through the agent's own child tokens, its sub-agents and
//! the tool calls in flight) and nothing else. A turn canceled on request ends `canceled`; one
//! canceled by shutdown still ends in a refusal the proxy retries elsewhere. The registry holds
//! one entry per running turn, so it is bounded by `MAX_CONCURRENT_TASKS`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Running turns by task id.
#[derive(Debug, Default)]
pub(crate) struct RunningTurns(Arc<Mutex<HashMap<String, Running>>>);

#[derive(Debug, Clone)]
struct Running {
    context_id: String,
    cancel: CancellationToken,
    requested: Arc<AtomicBool>,
    ended: watch::Receiver<bool>,
}

/// A running turn's registration: its token, and whether a cancel was asked for. Dropping it
/// (the turn ended) removes the entry and wakes whoever waits for the end.
#[derive(Debug)]
pub(crate) struct RunningTurn {
    turns: Arc<Mutex<HashMap<String, Running>>>,
    task_id: String,
    cancel: CancellationToken,
    requested: Arc<AtomicBool>,
    ended: watch::Sender<bool>,
}

impl RunningTurn {
    /// The token that stops this turn.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the turn was canceled on request (not by shutdown).
    pub(crate) fn cancel_requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }
}

impl Drop for RunningTurn {
    fn drop(&mut self) {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        // A newer turn of the same task may have registered since: leave that one.
        if turns
            .get(&self.task_id)
            .is_some_and(|r| Arc::ptr_eq(&r.requested, &self.requested))
        {
            turns.remove(&self.task_id);
        }
        drop(turns);
        let _ = self.ended.send(true);
    }
}

/// What a cancel by id found.
#[derive(Debug)]
pub(crate) enum Canceling {
    /// The turn was running and is told to stop; resolves when it has ended.
    Running(watch::Receiver<bool>),
    /// No turn of that task is running.
    NotRunning,
}

impl RunningTurns {
    /// Registers the turn of `task_id` in `context_id`, its token a child of `shutdown`.
    pub(crate) fn register(
        &self,
        task_id: &str,
        context_id: &str,
        shutdown: &CancellationToken,
    ) -> RunningTurn {
        let cancel = shutdown.child_token();
        let requested = Arc::new(AtomicBool::new(false));
        let (ended, ended_rx) = watch::channel(false);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                task_id.to_owned(),
                Running {
                    context_id: context_id.to_owned(),
                    cancel: cancel.clone(),
                    requested: Arc::clone(&requested),
                    ended: ended_rx,
                },
            );
        RunningTurn {
            turns: Arc::clone(&self.0),
            task_id: task_id.to_owned(),
            cancel,
            requested,
            ended,
        }
    }

    /// Cancels the running turn of `task_id`, if there is one.
    pub(crate) fn cancel(&self, task_id: &str) -> Canceling {
        let running = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(task_id)
            .cloned();
        match running {
            Some(running) => {
                running.requested.store(true, Ordering::SeqCst);
                running.cancel.cancel();
                Canceling::Running(running.ended)
            }
            None => Canceling::NotRunning,
        }
    }

    /// The context of `task_id`'s running turn, if one runs.
    pub(crate) fn context_of(&self, task_id: &str) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(task_id)
            .map(|r| r.context_id.clone())
    }

    /// How many turns are running.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_reaches_only_its_turn_and_says_when_it_ended() {
        let turns = RunningTurns::default();
        let shutdown = CancellationToken::new();
        let one = turns.register("one", "c", &shutdown);
        let two = turns.register("two", "c", &shutdown);
        assert_eq!(turns.context_of("one").as_deref(), Some("c"));
        let Canceling::Running(mut ended) = turns.cancel("one") else {
            panic!("one is running");
        };
        assert!(one.token().is_cancelled() && one.cancel_requested());
        assert!(!two.token().is_cancelled() && !two.cancel_requested());
        assert!(!*ended.borrow());
        drop(one);
        ended.changed().await.expect("the end is told");
        assert!(*ended.borrow());
        assert_eq!(turns.len(), 1);
        assert!(matches!(turns.cancel("one"), Canceling::NotRunning));
        // Shutdown reaches every turn, and is not a cancel on request.
        shutdown.cancel();
        assert!(two.token().is_cancelled() && !two.cancel_requested());
    }
}
