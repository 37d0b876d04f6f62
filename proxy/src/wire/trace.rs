//! W3C trace context: `traceparent` / `tracestate` from a task's NATS headers, a proxy span
//! under it, and the headers to send on (to the runtime and on the result).

use std::fmt;

use daedalus_contract::telemetry::TraceHeaders;
use rand::Rng;

/// A parsed `traceparent` (version 00).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

/// The trace context of one task as the proxy handles it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The proxy's own span: child of the incoming one, or the root of a new trace.
    pub span: TraceParent,
    /// The incoming parent span, if there was one.
    pub parent_span_id: Option<[u8; 8]>,
    pub tracestate: Option<String>,
    /// `span` as a `traceparent` header, formatted once: it goes to the runtime and on the
    /// result.
    traceparent: String,
}

impl TraceParent {
    /// Parses `00-<32 hex>-<16 hex>-<2 hex>`; all-zero ids are invalid.
    pub fn parse(value: &str) -> Option<Self> {
        let mut parts = value.trim().split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        // Version 00 has exactly four fields; later versions may append more.
        if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let trace_id: [u8; 16] = hex(trace)?;
        let span_id: [u8; 8] = hex(span)?;
        let [flags] = hex::<1>(flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            flags,
        })
    }

    pub fn trace_id_hex(&self) -> String {
        to_hex(&self.trace_id)
    }

    pub fn span_id_hex(&self) -> String {
        to_hex(&self.span_id)
    }
}

impl TraceParent {
    /// `00-<trace id>-<span id>-<flags>`, written byte by byte (no formatting machinery: it is
    /// made for every task).
    pub fn header(&self) -> String {
        let mut s = String::with_capacity(55);
        s.push_str("00-");
        push_hex(&mut s, &self.trace_id);
        s.push('-');
        push_hex(&mut s, &self.span_id);
        s.push('-');
        push_hex(&mut s, &[self.flags]);
        s
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.header())
    }
}

impl TraceContext {
    /// The trace context of an OpenTelemetry-backed `span` that continued `incoming`; `None`
    /// when spans have no ids (telemetry is not installed).
    pub fn of_span(span: &tracing::Span, incoming: &TraceHeaders) -> Option<Self> {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let context = span.context();
        let own = context.span().span_context().clone();
        if !own.is_valid() {
            return None;
        }
        let parent = incoming.traceparent.as_deref().and_then(TraceParent::parse);
        Some(Self::new(
            TraceParent {
                trace_id: own.trace_id().to_bytes(),
                span_id: own.span_id().to_bytes(),
                flags: own.trace_flags().to_u8(),
            },
            parent
                .filter(|p| p.trace_id == own.trace_id().to_bytes())
                .map(|p| p.span_id),
            incoming
                .tracestate
                .as_deref()
                .filter(|s| parent.is_some() && is_tracestate(s))
                .map(str::to_owned),
        ))
    }

    /// The proxy span for a task whose headers carried `traceparent`/`tracestate` (either may
    /// be absent or invalid: then a new sampled trace starts).
    pub fn child_of(traceparent: Option<&str>, tracestate: Option<&str>) -> Self {
        let mut rng = rand::rng();
        let span_id = nonzero(|| rng.random::<[u8; 8]>());
        match traceparent.and_then(TraceParent::parse) {
            Some(parent) => Self::new(
                TraceParent {
                    trace_id: parent.trace_id,
                    span_id,
                    flags: parent.flags,
                },
                Some(parent.span_id),
                tracestate.filter(|s| is_tracestate(s)).map(str::to_owned),
            ),
            None => Self::new(
                TraceParent {
                    trace_id: nonzero(|| rand::rng().random::<[u8; 16]>()),
                    span_id,
                    flags: 1,
                },
                None,
                None,
            ),
        }
    }

    /// The context of `span`, under `parent_span_id` when it continues a trace.
    pub fn new(
        span: TraceParent,
        parent_span_id: Option<[u8; 8]>,
        tracestate: Option<String>,
    ) -> Self {
        Self {
            span,
            parent_span_id,
            tracestate,
            traceparent: span.header(),
        }
    }

    /// The `traceparent` to send downstream: the proxy span.
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }
}

/// A `tracestate` worth passing on: W3C allows at most 512 characters of printable ASCII
/// (anything else is dropped, as the spec says, rather than breaking the requests it rides on).
fn is_tracestate(s: &str) -> bool {
    !s.is_empty() && s.len() <= 512 && s.bytes().all(|b| (0x20..0x7f).contains(&b))
}

fn nonzero<const N: usize>(mut draw: impl FnMut() -> [u8; N]) -> [u8; N] {
    loop {
        let v = draw();
        if v != [0; N] {
            return v;
        }
    }
}

fn hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != N * 2
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).ok()?;
    }
    Some(out)
}

fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    s
}

fn push_hex(s: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_and_prints_back() {
        let tp = TraceParent::parse(PARENT).unwrap();
        assert_eq!(tp.to_string(), PARENT);
        assert_eq!(tp.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn refuses_malformed_values() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_proxy_span_is_a_child_in_the_same_trace() {
        let ctx = TraceContext::child_of(Some(PARENT), Some("vendor=1"));
        let parent = TraceParent::parse(PARENT).unwrap();
        assert_eq!(ctx.span.trace_id, parent.trace_id);
        assert_ne!(ctx.span.span_id, parent.span_id);
        assert_eq!(ctx.parent_span_id, Some(parent.span_id));
        assert_eq!(ctx.span.flags, 1);
        assert_eq!(ctx.tracestate.as_deref(), Some("vendor=1"));
        assert!(TraceParent::parse(ctx.traceparent()).is_some());
    }

    #[test]
    fn without_a_parent_a_new_sampled_trace_starts() {
        let a = TraceContext::child_of(None, Some("ignored=1"));
        let b = TraceContext::child_of(Some("garbage"), None);
        assert_ne!(a.span.trace_id, b.span.trace_id);
        assert_eq!(a.parent_span_id, None);
        assert_eq!(a.tracestate, None);
        assert_eq!(a.span.flags, 1);
    }

    #[test]
    fn a_tracestate_that_could_break_a_request_is_dropped() {
        for bad in ["ü=1", "a=1\tb", &"a".repeat(513), ""] {
            let ctx = TraceContext::child_of(Some(PARENT), Some(bad));
            assert_eq!(ctx.tracestate, None, "{bad:?}");
        }
    }
}
