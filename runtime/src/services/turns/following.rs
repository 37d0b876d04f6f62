//! A subscription as the faces hold it: a task's events from here on, and the room it takes in
//! the turn memory (`TURN_MEMORY`) until it is dropped.

use daedalus_contract::StreamEvent;
use tokio::sync::OwnedSemaphorePermit;

use super::Limit;
use crate::stores::tasks::{Follow, SubscribeRefusal};

/// A task's events, holding their share of the turn memory.
#[derive(Debug)]
pub struct Following {
    follow: Follow,
    _room: OwnedSemaphorePermit,
}

impl Following {
    pub(super) fn new(follow: Follow, room: OwnedSemaphorePermit) -> Self {
        Self {
            follow,
            _room: room,
        }
    }

    /// The next event; `None` once the stream is over.
    pub async fn next(&mut self) -> Option<StreamEvent> {
        self.follow.next().await
    }
}

/// Why a task cannot be followed now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowError {
    /// The task has nothing to follow (unknown, or finished).
    Refused(SubscribeRefusal),
    /// The turn memory has no room for one more stream.
    Busy(Limit),
}
