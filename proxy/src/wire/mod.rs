//! What travels on NATS, spelled once: subjects and their tokens ([`subjects`]), the headers
//! of results and dead letters ([`headers`]), and W3C trace context ([`trace`]).

pub(crate) mod headers;
pub mod subjects;
pub mod trace;
