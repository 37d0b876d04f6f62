//! One test's steps, in order, each on the target's binding: its params or raw request with
//! the scope's references resolved, the call (again until `repeat.until` holds; a stream read
//! to its end), the captures, and what the step asserts (`expect`, `expect_error`,
//! `expect_stream`, named assertions). A step ends failed (the server's answer does not
//! conform) or in error (the run could not do it).

use std::time::Duration;

use serde_json::Value;

use super::assertions::{Verdict as Checked, evaluate, same, until_holds};
use super::corpus::{Binding, Step};
use super::dispatch::{Answer, Bound, DispatchError, Dispatcher, Streaming, Target};
use super::grpc::GrpcDispatch;
use super::run::ActsOptions;
use super::scope::{Read, Scope};
use super::stream::{Event, evaluate_stream};
use super::wire;

/// A step that did not pass.
pub(super) enum StepEnd {
    Failed(String),
    Error(String),
}

pub(super) struct StepRunner<'a> {
    pub(super) dispatcher: &'a Dispatcher,
    /// The test is about credentials: its raw requests carry only the ones it writes.
    pub(super) about_credentials: bool,
    /// The test is about the answers' media type (tagged `content-type`, `runner-special`):
    /// each HTTP answer's `Content-Type` is checked against the binding's (A2A §9, §11).
    pub(super) about_media_type: bool,
    /// The gRPC client, on the gRPC binding.
    pub(super) grpc: Option<&'a GrpcDispatch>,
    pub(super) target: &'a Target,
    pub(super) options: &'a ActsOptions,
}

impl StepRunner<'_> {
    /// One unary call on the target's binding (the card over plain HTTP on every binding).
    async fn call(
        &self,
        operation: super::corpus::Operation,
        params: &Value,
    ) -> Result<Answer, DispatchError> {
        match self.grpc {
            Some(grpc) if operation != super::corpus::Operation::GetAgentCard => {
                grpc.call(operation, params, self.options.timeout).await
            }
            _ => {
                self.dispatcher
                    .call(self.target, operation, params, self.options.timeout)
                    .await
            }
        }
    }
    pub(super) async fn run(&self, step: &Step, scope: &mut Scope) -> Result<(), StepEnd> {
        let operation = match (step.operation, &step.raw) {
            (Some(operation), None) => Some(operation),
            (None, Some(_)) => None,
            _ => {
                return Err(StepEnd::Error(
                    "a step is an operation or a raw request, not both or neither".into(),
                ));
            }
        };
        let params = match &step.params {
            Some(params) => scope
                .substitute(params)
                .map_err(|e| StepEnd::Error(e.to_string()))?,
            None => Value::Object(serde_json::Map::new()),
        };
        let (operation, params) = match operation {
            Some(operation) => {
                let (operation, params) = wire::resolve(operation, params);
                (
                    Some(operation),
                    with_message_id(wire::adapt(operation, params)),
                )
            }
            None => (None, params),
        };
        let raw = match &step.raw {
            Some(raw) => {
                let mut raw = raw.clone();
                // A test about credentials (tagged `auth`) sends exactly those it writes.
                raw.bare = self.about_credentials;
                raw.path = text(scope, &raw.path)?;
                for value in raw.headers.values_mut() {
                    *value = text(scope, value)?;
                }
                if let Some(body) = &raw.body {
                    raw.body = Some(
                        scope
                            .substitute(body)
                            .map_err(|e| StepEnd::Error(e.to_string()))?,
                    );
                }
                Some(raw)
            }
            None => None,
        };
        let streams = step.expect_stream.is_some()
            || operation.is_some_and(super::corpus::Operation::streams);
        if streams {
            self.run_stream(step, operation, &params, raw.as_ref(), scope)
                .await?;
            return named(step, scope);
        }
        let answer = self.unary(step, operation, &params, raw.as_ref()).await?;
        scope.record_response(&step.id, &answer.body);
        scope
            .capture(&step.id, &step.capture, &answer.body)
            .map_err(StepEnd::Failed)?;
        Self::check_answer(step, &answer, raw.is_some(), scope)?;
        if self.about_media_type {
            self.check_media_type(&answer)?;
        }
        named(step, scope)
    }

    async fn unary(
        &self,
        step: &Step,
        operation: Option<super::corpus::Operation>,
        params: &Value,
        raw: Option<&super::corpus::Raw>,
    ) -> Result<Answer, StepEnd> {
        let timeout = self.options.timeout;
        let error = |e: DispatchError| StepEnd::Error(e.to_string());
        let Some(operation) = operation else {
            let raw = raw.ok_or_else(|| StepEnd::Error("no request".into()))?;
            return self
                .dispatcher
                .raw(self.target, raw, timeout)
                .await
                .map_err(error);
        };
        let Some(repeat) = &step.repeat else {
            return self.call(operation, params).await.map_err(error);
        };
        let attempts = repeat.max_attempts.unwrap_or(10).max(1);
        let delay = Duration::from_millis(repeat.delay_ms.unwrap_or(1000));
        for attempt in 1..=attempts {
            let answer = self.call(operation, params).await.map_err(error)?;
            if until_holds(&repeat.until, &answer.body).map_err(StepEnd::Error)? {
                return Ok(answer);
            }
            if attempt < attempts {
                tokio::time::sleep(delay).await;
            }
        }
        Err(StepEnd::Failed(format!(
            "asked {attempts} time(s); `{}` never held",
            repeat.until
        )))
    }

    /// The answer's media type is its binding's: `application/json` on JSON-RPC (§9.1),
    /// `application/a2a+json` on HTTP+JSON (§11.1); gRPC has none to check.
    fn check_media_type(&self, answer: &Answer) -> Result<(), StepEnd> {
        let wanted = match self.target.binding {
            Binding::Jsonrpc => "application/json",
            Binding::Rest => "application/a2a+json",
            Binding::Grpc => return Ok(()),
        };
        match answer.media_type.as_deref() {
            Some(media_type) if media_type == wanted => Ok(()),
            other => Err(StepEnd::Failed(format!(
                "the answer's Content-Type is {}; the binding's is {wanted}",
                other.unwrap_or("absent")
            ))),
        }
    }

    fn check_answer(step: &Step, answer: &Answer, raw: bool, scope: &Scope) -> Result<(), StepEnd> {
        let substituted = |v: &Value| {
            scope
                .substitute(v)
                .map_err(|e| StepEnd::Error(e.to_string()))
        };
        if let Some(expected) = &step.expect_error {
            let Some(error) = &answer.error else {
                return Err(StepEnd::Failed(format!(
                    "expected an error; the call answered {}",
                    answer.status
                )));
            };
            let expected = by_name(substituted(expected)?);
            first_failure(&evaluate(
                &expected,
                Read::Found(&error.observed()),
                "error",
            ))?;
        }
        if let Some(expect) = &step.expect {
            if let Some(status) = &expect.status {
                Self::check_status(&substituted(status)?, answer.status, answer.error.is_some())?;
            }
            if let Some(body) = expect.body() {
                let body = substituted(&body)?;
                if answer.error.is_some() && !raw {
                    // An operation's error has no body of the kind asserted; a raw step's
                    // error envelope is its body.
                    let error = answer
                        .error
                        .as_ref()
                        .map(super::dispatch::WireError::observed)
                        .unwrap_or_default();
                    let as_error =
                        evaluate(&body, Read::Found(&serde_json::json!({"error": error})), "");
                    if !as_error.ok() {
                        return Err(StepEnd::Failed(format!(
                            "expected an answer; the call failed: {error}"
                        )));
                    }
                } else {
                    first_failure(&evaluate(&body, Read::Found(&answer.body), "body"))?;
                }
            }
        }
        Ok(())
    }

    /// `expect.status`: a number (the gRPC status mapped to HTTP), an assertion
    /// (`one_of: [200, 401]`), or `error` (the call failed).
    fn check_status(expected: &Value, status: u16, failed: bool) -> Result<(), StepEnd> {
        if expected.as_str() == Some("error") {
            return if failed || status >= 400 {
                Ok(())
            } else {
                Err(StepEnd::Failed(format!(
                    "expected the call to fail; it answered {status}"
                )))
            };
        }
        let actual = Value::from(status);
        if expected.is_number() {
            return if same(&actual, expected) {
                Ok(())
            } else {
                Err(StepEnd::Failed(format!(
                    "status: expected {expected}, got {status}"
                )))
            };
        }
        first_failure(&evaluate(expected, Read::Found(&actual), "status"))
    }

    async fn run_stream(
        &self,
        step: &Step,
        operation: Option<super::corpus::Operation>,
        params: &Value,
        raw: Option<&super::corpus::Raw>,
        scope: &mut Scope,
    ) -> Result<(), StepEnd> {
        if step.repeat.is_some() {
            return Err(StepEnd::Error("`repeat` cannot send a stream again".into()));
        }
        let deadline = step
            .expect_stream
            .as_ref()
            .and_then(|e| e.timeout_ms)
            .map_or(self.options.stream_timeout, Duration::from_millis);
        let limit = step
            .expect_stream
            .as_ref()
            .and_then(|e| e.max_count)
            .map(|m| m + 1);
        let what = match (operation, raw) {
            (Some(operation), _) => Streaming::Operation(operation, params),
            (None, Some(raw)) => Streaming::Raw(raw),
            (None, None) => return Err(StepEnd::Error("no request".into())),
        };
        let bound = Bound { deadline, limit };
        let streamed = match (self.grpc, what) {
            (Some(grpc), Streaming::Operation(operation, params)) => {
                grpc.stream(operation, params, bound).await
            }
            _ => self.dispatcher.stream(self.target, what, bound).await,
        }
        .map_err(|e| StepEnd::Error(e.to_string()))?;
        let events: Vec<Event> = streamed.events.iter().cloned().map(Event::of).collect();
        let payloads = Value::Array(events.iter().map(|e| e.payload.clone()).collect());
        scope.record_response(&step.id, &payloads);
        scope
            .capture(&step.id, &step.capture, &payloads)
            .map_err(StepEnd::Failed)?;
        if step.expect_error.is_some() || streamed.error.is_some() {
            return stream_refusal(step, scope, &streamed, events.len());
        }
        if streamed.timed_out
            && step
                .expect_stream
                .as_ref()
                .and_then(|e| e.timeout_ms)
                .is_none()
        {
            return Err(StepEnd::Error(format!(
                "the stream was still open after {:?} (the test sets no timeout_ms); {} event(s) read",
                self.options.stream_timeout,
                events.len()
            )));
        }
        if let Some(expect) = &step.expect_stream {
            first_failure(&evaluate_stream(expect, &events, streamed.timed_out))?;
        }
        if let Some(status) = step.expect.as_ref().and_then(|e| e.status.as_ref()) {
            let status = scope
                .substitute(status)
                .map_err(|e| StepEnd::Error(e.to_string()))?;
            Self::check_status(&status, streamed.status, false)?;
        }
        Ok(())
    }
}

fn first_failure(checked: &Checked) -> Result<(), StepEnd> {
    match checked.failures.first() {
        None => Ok(()),
        Some(failure) => Err(StepEnd::Failed(failure.to_string())),
    }
}

/// A step's named assertions: over a source, some (`any`), every (`all`, and at least one)
/// or no (`none`) element a path reaches matches.
fn named(step: &Step, scope: &Scope) -> Result<(), StepEnd> {
    for assertion in &step.assertions {
        let source = scope
            .substitute_text(&assertion.source)
            .map_err(|e| StepEnd::Error(e.to_string()))?;
        let quantified = [
            ("any", &assertion.any),
            ("all", &assertion.all),
            ("none", &assertion.none),
        ];
        for (quantifier, collection) in quantified {
            let Some(collection) = collection else {
                continue;
            };
            let wanted = scope
                .substitute(&collection.matching)
                .map_err(|e| StepEnd::Error(e.to_string()))?;
            let elements = super::scope::read_all(&source, &collection.path)
                .map_err(|e| StepEnd::Error(e.to_string()))?;
            let matching = elements
                .iter()
                .filter(|e| evaluate(&wanted, Read::Found(e), "").ok())
                .count();
            let holds = match quantifier {
                "any" => matching > 0,
                "all" => !elements.is_empty() && matching == elements.len(),
                _ => matching == 0,
            };
            if !holds {
                return Err(StepEnd::Failed(format!(
                    "{quantifier} of {} ({} element(s)) should match {wanted}; {matching} did",
                    collection.path,
                    elements.len()
                )));
            }
        }
    }
    Ok(())
}

/// An `expect_error` with every error name in its A2A spelling. The corpus names the error
/// under `error_type`, and often under `code` (`code: TaskNotFoundError`); a name under `code`
/// asserts the error's type, whatever the binding's code for it.
fn by_name(expected: Value) -> Value {
    let Value::Object(mut expected) = expected else {
        return expected;
    };
    let names = |v: &Value| match v {
        Value::String(_) => true,
        Value::Object(o) => o
            .get("one_of")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().all(Value::is_string)),
        _ => false,
    };
    if let Some(code) = expected.get("code").cloned().filter(|c| names(c)) {
        expected.remove("code");
        expected.insert("error_type".into(), code);
    }
    if let Some(error_type) = expected.get_mut("error_type") {
        canonical_names(error_type);
    }
    Value::Object(expected)
}

fn canonical_names(value: &mut Value) {
    match value {
        Value::String(name) => *name = wire::canonical(name).to_owned(),
        Value::Array(items) => items.iter_mut().for_each(canonical_names),
        Value::Object(map) => map.values_mut().for_each(canonical_names),
        _ => {}
    }
}

fn text(scope: &Scope, value: &str) -> Result<String, StepEnd> {
    match scope
        .substitute_text(value)
        .map_err(|e| StepEnd::Error(e.to_string()))?
    {
        Value::String(s) => Ok(s),
        other => Ok(other.to_string()),
    }
}

/// Every message needs a `messageId`; one the test leaves out is made up (an operation step's;
/// a raw step goes as written).
pub(super) fn with_message_id(mut params: Value) -> Value {
    if let Some(message) = params.get_mut("message").and_then(Value::as_object_mut)
        && message
            .get("messageId")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
    {
        message.insert(
            "messageId".into(),
            Value::String(uuid::Uuid::new_v4().to_string()),
        );
    }
    params
}

/// A stream step that expects an error, or whose stream was refused or broke: met when the
/// error is the `expect_error` (or what an `expect` body asserts, `error: {exists: true}`).
fn stream_refusal(
    step: &Step,
    scope: &Scope,
    streamed: &super::dispatch::Streamed,
    events: usize,
) -> Result<(), StepEnd> {
    let substituted = |value: &Value| {
        scope
            .substitute(value)
            .map_err(|e| StepEnd::Error(e.to_string()))
    };
    let Some(error) = &streamed.error else {
        return Err(StepEnd::Failed(format!(
            "expected an error; the stream opened with {events} event(s)"
        )));
    };
    if let Some(expected) = &step.expect_error {
        let expected = by_name(substituted(expected)?);
        return first_failure(&evaluate(
            &expected,
            Read::Found(&error.observed()),
            "error",
        ));
    }
    if let Some(body) = step.expect.as_ref().and_then(super::corpus::Expect::body) {
        let refused = serde_json::json!({"error": error.observed()});
        if evaluate(&substituted(&body)?, Read::Found(&refused), "").ok() {
            return Ok(());
        }
    }
    Err(StepEnd::Failed(format!(
        "the stream was refused or broke: {}",
        error.observed()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_error_named_under_code_asserts_its_type_in_the_a2a_spelling() {
        assert_eq!(
            by_name(json!({"code": "TaskNotFoundError"})),
            json!({"error_type": "TaskNotFoundError"})
        );
        assert_eq!(
            by_name(
                json!({"code": {"one_of": ["TaskNotFoundError", "StreamingNotSupportedError"]}})
            ),
            json!({"error_type": {"one_of": ["TaskNotFoundError", "UnsupportedOperationError"]}})
        );
        assert_eq!(
            by_name(json!({"code": -32601, "message": {"type": "string"}})),
            json!({"code": -32601, "message": {"type": "string"}})
        );
    }
}
