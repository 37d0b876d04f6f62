//! `expect_stream`: what a streamed answer's events must be. Each event is a `StreamResponse`,
//! one of `task`, `message`, `statusUpdate`, `artifactUpdate`; an assertion sees the event's
//! own fields and the one name of its kind (snake_case, as the corpus writes it), so
//! `{status: {state: X}}` and `{status_update: {status: ...}}` read the same status update and
//! `{message: ...}` matches only a message. An event that is not one of those (a raw step's
//! JSON-RPC envelope) is seen whole.

use serde_json::{Map, Value};

use super::assertions::{Verdict, evaluate};
use super::corpus::{EventMatch, ExpectStream, Ordering};
use super::scope::Read;

const TERMINAL: [&str; 4] = [
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
];

/// One event: its kind and what is inside, or the whole event when it is not a
/// `StreamResponse`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: Option<&'static str>,
    pub payload: Value,
}

impl Event {
    /// `data` as one event of a stream.
    pub fn of(data: Value) -> Self {
        if let Value::Object(map) = &data
            && map.len() == 1
            && let Some((key, inner)) = map.iter().next()
        {
            let kind = match key.as_str() {
                "task" => Some("task"),
                "message" => Some("message"),
                "statusUpdate" | "status_update" => Some("status_update"),
                "artifactUpdate" | "artifact_update" => Some("artifact_update"),
                _ => None,
            };
            if let Some(kind) = kind {
                return Self {
                    kind: Some(kind),
                    payload: inner.clone(),
                };
            }
        }
        Self {
            kind: None,
            payload: data,
        }
    }

    /// What assertions see: the payload's fields and its kind's name.
    pub fn view(&self) -> Value {
        match (self.kind, &self.payload) {
            (Some(kind), Value::Object(fields)) => {
                let mut view: Map<String, Value> = fields.clone();
                view.insert(kind.to_owned(), self.payload.clone());
                Value::Object(view)
            }
            _ => self.payload.clone(),
        }
    }

    /// The task state it carries (a task or a status update).
    pub fn state(&self) -> Option<&str> {
        self.payload.get("status")?.get("state")?.as_str()
    }
}

/// Nothing moves back to SUBMITTED, and nothing follows a terminal state.
fn monotonic(events: &[Event]) -> Verdict {
    let mut verdict = Verdict::default();
    let mut previous: Option<&str> = None;
    for (i, event) in events.iter().enumerate() {
        let Some(state) = event.state() else {
            continue;
        };
        if let Some(before) = previous
            && before != state
        {
            let path = format!("events[{i}].status.state");
            if state == "TASK_STATE_SUBMITTED" {
                verdict = verdict.and(Verdict::fail(
                    &path,
                    format!("back to SUBMITTED after {before}"),
                ));
            } else if TERMINAL.contains(&before) {
                verdict = verdict.and(Verdict::fail(
                    &path,
                    format!("{state} after the terminal {before}"),
                ));
            }
        }
        previous = Some(state);
    }
    verdict
}

/// One of `expect_stream.events`, the `position`th: met by the event at its index (its
/// position unless it names one), or by any event when it may match at any position.
fn event_at(
    assertion: &super::corpus::EventAssertion,
    position: usize,
    views: &[Value],
) -> Verdict {
    let body = Value::Object(assertion.assertion.clone());
    let label = assertion
        .description
        .clone()
        .unwrap_or_else(|| format!("events[{position}]"));
    if assertion.matching == Some(EventMatch::AnyPosition) && assertion.index.is_none() {
        return if views
            .iter()
            .any(|v| evaluate(&body, Read::Found(v), "").ok())
        {
            Verdict::default()
        } else {
            Verdict::fail(
                "events[*]",
                format!("{label}: none of {} event(s) matched", views.len()),
            )
        };
    }
    let at = assertion.index.unwrap_or(position);
    match views.get(at) {
        Some(view) => evaluate(&body, Read::Found(view), &format!("events[{at}]")),
        None => Verdict::fail(
            &format!("events[{at}]"),
            format!("{label}: the stream had {} event(s)", views.len()),
        ),
    }
}

/// Evaluates `expect` over the `events` that arrived; `timed_out` when the stream was still
/// open at its deadline.
pub fn evaluate_stream(expect: &ExpectStream, events: &[Event], timed_out: bool) -> Verdict {
    let mut verdict = Verdict::default();
    if timed_out {
        verdict = verdict.and(Verdict::fail(
            "stream",
            format!("still open at its deadline after {} event(s)", events.len()),
        ));
    }
    if let Some(min) = expect.min_count
        && events.len() < min
    {
        verdict = verdict.and(Verdict::fail(
            "stream",
            format!("{} event(s), at least {min} expected", events.len()),
        ));
    }
    if let Some(max) = expect.max_count
        && events.len() > max
    {
        verdict = verdict.and(Verdict::fail(
            "stream",
            format!("{} event(s), at most {max} expected", events.len()),
        ));
    }
    if expect.ordering == Some(Ordering::MonotonicState) {
        verdict = verdict.and(monotonic(events));
    }
    let views: Vec<Value> = events.iter().map(Event::view).collect();
    for (position, assertion) in expect.events.iter().enumerate() {
        if !assertion.assertion.is_empty() {
            verdict = verdict.and(event_at(assertion, position, &views));
        }
    }
    if let Some(last) = &expect.final_event {
        verdict = verdict.and(match views.last() {
            Some(view) => evaluate(last, Read::Found(view), "final_event"),
            None => Verdict::fail("final_event", "the stream had no event"),
        });
    }
    if let Some(each) = &expect.each_event {
        if views.is_empty() {
            verdict = verdict.and(Verdict::fail("each_event", "the stream had no event"));
        }
        for (i, view) in views.iter().enumerate() {
            verdict = verdict.and(evaluate(
                each,
                Read::Found(view),
                &format!("each_event[{i}]"),
            ));
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect(yaml: &str) -> ExpectStream {
        serde_saphyr::from_str(yaml).expect("an expect_stream")
    }

    fn stream(states: &[&str]) -> Vec<Event> {
        let mut events = vec![Event::of(
            json!({"task": {"id": "t", "status": {"state": states[0]}}}),
        )];
        for state in &states[1..] {
            events.push(Event::of(
                json!({"statusUpdate": {"taskId": "t", "status": {"state": state}}}),
            ));
        }
        events
    }

    #[test]
    fn an_event_is_seen_through_its_kind_and_by_its_kinds_name() {
        let event = Event::of(json!({"statusUpdate": {"status": {"state": "TASK_STATE_WORKING"}}}));
        assert_eq!(event.kind, Some("status_update"));
        let view = event.view();
        assert!(
            evaluate(
                &json!({"status": {"state": "TASK_STATE_WORKING"}}),
                Read::Found(&view),
                ""
            )
            .ok()
        );
        assert!(
            evaluate(
                &json!({"status_update": {"exists": true}}),
                Read::Found(&view),
                ""
            )
            .ok()
        );
        assert!(
            !evaluate(
                &json!({"message": {"exists": true}}),
                Read::Found(&view),
                ""
            )
            .ok()
        );
        let envelope = Event::of(json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        assert_eq!(envelope.kind, None, "a raw envelope is seen whole");
    }

    #[test]
    fn counts_order_and_the_final_event_are_checked() {
        let rule = expect(
            "min_count: 2\nordering: monotonic_state\nfinal_event:\n  status:\n    state: TASK_STATE_COMPLETED\n",
        );
        let good = stream(&[
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED",
        ]);
        assert!(evaluate_stream(&rule, &good, false).ok());
        assert!(
            !evaluate_stream(&rule, &good[..1], false).ok(),
            "too few, and not completed"
        );
        let backwards = stream(&[
            "TASK_STATE_WORKING",
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_COMPLETED",
        ]);
        assert_eq!(evaluate_stream(&rule, &backwards, false).failures.len(), 1);
        let after_end = stream(&[
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_COMPLETED",
            "TASK_STATE_WORKING",
            "TASK_STATE_COMPLETED",
        ]);
        assert!(!evaluate_stream(&rule, &after_end, false).ok());
        assert!(
            !evaluate_stream(&rule, &good, true).ok(),
            "a stream cut at its deadline did not complete"
        );
    }

    #[test]
    fn event_assertions_match_at_their_place_or_anywhere() {
        let rule = expect(
            "events:\n  - description: an artifact\n    match: any_position\n    artifact:\n      exists: true\n  - index: 0\n    task:\n      exists: true\neach_event:\n  kind:\n    absent: true\n",
        );
        let mut events = stream(&["TASK_STATE_SUBMITTED", "TASK_STATE_COMPLETED"]);
        assert!(
            !evaluate_stream(&rule, &events, false).ok(),
            "no artifact yet"
        );
        events.insert(
            1,
            Event::of(json!({"artifactUpdate": {"artifact": {"parts": []}}})),
        );
        assert!(
            evaluate_stream(&rule, &events, false).ok(),
            "{:?}",
            evaluate_stream(&rule, &events, false)
        );
    }
}
