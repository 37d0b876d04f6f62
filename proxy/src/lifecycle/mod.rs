//! The proxy's life, as named steps:
//!
//! - [`serve`]: [`serve::run`] start to end: endpoints, startup, consuming, drain;
//! - [`startup`]: connect, streams, consumer, runtime health, card, manifest, each retried
//!   until `STARTUP_TIMEOUT`;
//! - [`consuming`]: the workers and their helpers started; at shutdown drained: no new pulls,
//!   in-flight tasks finished under the grace period, the rest handed back, NATS flushed;
//! - [`supervise`]: every background task started again if it dies before shutdown.

pub mod consuming;
pub mod serve;
pub mod startup;
pub mod supervise;
