//! [`TurnStop`]: how a turn running here is stopped, by a cancel (it ends `canceled`) or by
//! shutdown (it is refused, for another replica to run).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_util::sync::CancellationToken;

/// How a turn is stopped: the token its agent watches, and whether a cancel (not shutdown)
/// fired it.
#[derive(Debug, Clone)]
pub struct TurnStop {
    token: CancellationToken,
    requested: Arc<AtomicBool>,
}

impl TurnStop {
    /// A stop over `token` (a child of the shutdown token).
    pub fn new(token: CancellationToken) -> Self {
        Self {
            token,
            requested: Arc::default(),
        }
    }

    /// The token the turn's agent watches.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Stops the turn on request: it ends `canceled`.
    pub fn request(&self) {
        self.requested.store(true, Ordering::SeqCst);
        self.token.cancel();
    }

    /// Whether the turn was stopped on request (not by shutdown).
    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::SeqCst)
    }
}
