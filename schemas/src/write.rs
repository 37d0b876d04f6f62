//! Writers: the contract dialect (the model's own `Serialize`) and strict A2A v1 JSON.
//!
//! `Role` and `TaskState` are spelled differently between the dialects, A2A v1 has no `final`
//! on status updates, and A2A v0.3 tags objects and parts with `kind`, so the types that hold
//! them implement [`DialectSerialize`] once, for every dialect.

use serde::{Serialize, Serializer};

/// Which JSON dialect to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The runtime contract: roles `user`/`agent`, states `completed`, `input-required`, ...
    Contract,
    /// A2A v1.0 ProtoJSON: `ROLE_USER`, `TASK_STATE_COMPLETED`, no `final`.
    A2aV1,
    /// A2A v0.3 JSON-RPC: `kind` on every object and part (`task`, `message`, `status-update`,
    /// `artifact-update`; `text`, `file`, `data`), lowercase states, `final`, and stream events
    /// not wrapped in a one-key object.
    A2aV03,
}

/// A type whose JSON depends on the dialect.
pub trait DialectSerialize {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error>;
}

/// Serializes the wrapped value in the given dialect.
#[derive(Debug)]
pub struct InDialect<'a, T: ?Sized>(pub &'a T, pub Dialect);

impl<T: DialectSerialize + ?Sized> Serialize for InDialect<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize_in(self.1, s)
    }
}

/// Serializes a slice, each element in the given dialect.
#[derive(Debug)]
pub struct InDialectSeq<'a, T>(pub &'a [T], pub Dialect);

impl<T: DialectSerialize> Serialize for InDialectSeq<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|item| InDialect(item, self.1)))
    }
}

/// The agent card is spelled the same in every dialect (A2A v0.3 clients get their own card,
/// written by the runtime's v0.3 face).
impl DialectSerialize for crate::AgentCard {
    fn serialize_in<S: Serializer>(&self, _: Dialect, s: S) -> Result<S::Ok, S::Error> {
        self.serialize(s)
    }
}

/// The contract dialect: exactly what the proxy and the contract schemas expect.
pub mod contract {
    use serde::Serialize;

    /// JSON bytes in the contract dialect.
    pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
        serde_json::to_vec(value).expect("the model always serializes")
    }

    /// A JSON value in the contract dialect.
    pub fn to_value<T: Serialize + ?Sized>(value: &T) -> serde_json::Value {
        serde_json::to_value(value).expect("the model always serializes")
    }
}

/// Strict A2A v1.0 JSON, valid against the v1.0 JSON Schema.
pub mod a2a_v1 {
    use serde::Serialize;

    use super::{Dialect, DialectSerialize, InDialect};

    /// Types that have an A2A v1 form.
    pub trait ToA2aV1 {
        fn to_a2a_v1(&self) -> serde_json::Value;
    }

    impl<T: DialectSerialize> ToA2aV1 for T {
        fn to_a2a_v1(&self) -> serde_json::Value {
            serde_json::to_value(of(self)).expect("the model always serializes")
        }
    }

    /// `value` as strict A2A v1, to hand to any writer (a response body, an SSE line, a proto
    /// message) with nothing built between: it serializes straight into the writer.
    pub fn of<T: DialectSerialize + ?Sized>(value: &T) -> InDialect<'_, T> {
        InDialect(value, Dialect::A2aV1)
    }

    /// A JSON value in strict A2A v1.
    pub fn to_value<T: ToA2aV1 + ?Sized>(value: &T) -> serde_json::Value {
        value.to_a2a_v1()
    }

    /// Serializes `value` in A2A v1 into any serializer.
    pub fn serialize<T: DialectSerialize, S: serde::Serializer>(
        value: &T,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        InDialect(value, Dialect::A2aV1).serialize(s)
    }
}

/// A2A v0.3 JSON, for clients that still speak it (`message/send`, `kind`, `final`).
pub mod a2a_v03 {
    use super::{Dialect, DialectSerialize, InDialect};

    /// A JSON value in A2A v0.3.
    pub fn to_value<T: DialectSerialize + ?Sized>(value: &T) -> serde_json::Value {
        serde_json::to_value(of(value)).expect("the model always serializes")
    }

    /// `value` as A2A v0.3, to serialize straight into a writer.
    pub fn of<T: DialectSerialize + ?Sized>(value: &T) -> InDialect<'_, T> {
        InDialect(value, Dialect::A2aV03)
    }
}
