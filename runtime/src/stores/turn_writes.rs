//! [`TurnWrites`]: what a turn writes to the stores that is committed with its end, not on its
//! own: on the default store (one SQLite file, one writer) such a write joins the commit of the
//! turn's end, so a turn costs one commit; the turn waits for each before it answers.
//!
//! A turn that keeps none (the default, [`TurnWrites::now`]) has every write made as it comes.

use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;

/// A write made later: its result, once committed.
pub type Pending<T> = BoxFuture<'static, T>;

/// The writes a turn holds to commit with its end (see the module).
#[derive(Clone, Default)]
pub struct TurnWrites(Option<Arc<Mutex<Vec<Pending<()>>>>>);

impl std::fmt::Debug for TurnWrites {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "TurnWrites(with the end)"
        } else {
            "TurnWrites(now)"
        })
    }
}

impl TurnWrites {
    /// Every write is made as it comes.
    pub fn now() -> Self {
        Self(None)
    }

    /// Writes wait for the turn's end, which commits them ([`TurnWrites::committed`]).
    pub fn with_the_end() -> Self {
        Self(Some(Arc::default()))
    }

    /// Whether writes wait for the turn's end.
    pub fn wait_for_the_end(&self) -> bool {
        self.0.is_some()
    }

    /// Holds `write` until the turn's end (with [`TurnWrites::now`], waits for it here).
    pub async fn hold(&self, write: Pending<()>) {
        match &self.0 {
            Some(held) => held
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(write),
            None => write.await,
        }
    }

    /// Waits until every write held is committed (each says itself what failed).
    pub async fn committed(&self) {
        let Some(held) = &self.0 else { return };
        let writes = std::mem::take(&mut *held.lock().unwrap_or_else(PoisonError::into_inner));
        futures::future::join_all(writes).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn writes_held_for_the_end_are_made_there_and_others_at_once() {
        let made = Arc::new(AtomicUsize::new(0));
        let write = |made: &Arc<AtomicUsize>| -> Pending<()> {
            let made = Arc::clone(made);
            Box::pin(async move {
                made.fetch_add(1, Ordering::SeqCst);
            })
        };
        let now = TurnWrites::now();
        now.hold(write(&made)).await;
        assert_eq!(made.load(Ordering::SeqCst), 1, "made as it came");
        let later = TurnWrites::with_the_end();
        later.hold(write(&made)).await;
        later.clone().hold(write(&made)).await;
        assert_eq!(made.load(Ordering::SeqCst), 1, "held");
        later.committed().await;
        assert_eq!(
            made.load(Ordering::SeqCst),
            3,
            "made at the end, every clone's"
        );
        later.committed().await;
        assert_eq!(made.load(Ordering::SeqCst), 3, "once");
    }
}
