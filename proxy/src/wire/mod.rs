//! What travels on NATS, spelled once: subjects and their tokens ([`subjects`]), the ids a task
//! message carries ([`ids`]), the headers of results and dead letters ([`headers`]), and W3C
//! trace context ([`trace`]).

pub(crate) mod headers;
pub(crate) mod ids;
pub mod subjects;
pub mod trace;
