//! Runs the corpus against one server over the bindings asked for, each test in its own
//! scope, its steps in order (a failed step ends its test: later steps read its captures).
//!
//! What a test comes to ([`Verdict`]): passed; failed (the server answered and the answer
//! does not conform, or lacks a behaviour the test needs); skipped (for another binding, or
//! the card does not declare what its preconditions need: a MAY it does not do is reported as
//! such); not applicable (a client-parsing test, for SDK clients); disputed (the corpus and
//! the released specification disagree, and the specification wins; [`super::disputed`]); or
//! an error of the run (a request that did not complete, a reference nothing defines), which
//! is never counted as the server's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::assertions::{Verdict as Checked, evaluate, same, until_holds};
use super::corpus::{Binding, Corpus, Level, Loaded, Step, Test};
use super::dispatch::{Answer, Bound, DispatchError, Dispatcher, Streaming, Target};
use super::grpc::GrpcDispatch;
use super::scope::{Read, Scope};
use super::stream::{Event, evaluate_stream};
use super::wire;

/// The three passes of the official kit: what the server under test is configured to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Everything it does.
    Full,
    /// Streaming, push and the extended card off.
    Reduced,
    /// A security scheme declared and enforced.
    Auth,
}

impl Pass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Reduced => "reduced",
            Self::Auth => "auth",
        }
    }
}

/// The token the official kit's servers accept, and the one they answer 403.
pub const VALID_TOKEN: &str = "itk-valid-token";
pub const INSUFFICIENT_TOKEN: &str = "itk-insufficient-token";

/// What to run.
#[derive(Debug, Clone)]
pub struct ActsOptions {
    /// The server's base URL (its card is at `/.well-known/agent-card.json`).
    pub url: String,
    /// The bindings to run over; each must be declared by the card.
    pub bindings: Vec<Binding>,
    /// The weakest level run (`should` runs MUST and SHOULD tests).
    pub level: Level,
    pub pass: Pass,
    /// Each request's time.
    pub timeout: Duration,
    /// A stream's time, when its test sets none.
    pub stream_timeout: Duration,
    /// Only the tests whose id starts with one of these (all when empty).
    pub only: Vec<String>,
    /// A second user's credential (auth pass): the run makes a task as that user, which
    /// `{{otherUserTaskId}}` names, for the test that reads another user's task.
    pub other_user_token: Option<String>,
}

impl ActsOptions {
    pub fn new(url: &str) -> Self {
        Self {
            url: url.trim_end_matches('/').to_owned(),
            bindings: Binding::ALL.to_vec(),
            level: Level::May,
            pass: Pass::Full,
            timeout: Duration::from_secs(30),
            stream_timeout: Duration::from_secs(30),
            only: Vec::new(),
            other_user_token: None,
        }
    }
}

/// What one test came to on one binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    Failed {
        step: Option<String>,
        why: String,
    },
    Skipped(String),
    NotApplicable(String),
    Disputed {
        section: &'static str,
        why: &'static str,
    },
    Error {
        step: Option<String>,
        why: String,
    },
}

impl Verdict {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed { .. } => "failed",
            Self::Skipped(_) => "skipped",
            Self::NotApplicable(_) => "not applicable",
            Self::Disputed { .. } => "disputed",
            Self::Error { .. } => "error",
        }
    }
}

/// One test's result.
#[derive(Debug, Clone)]
pub struct TestResult {
    pub id: String,
    pub name: String,
    pub level: Level,
    pub binding: Binding,
    pub verdict: Verdict,
    pub duration: Duration,
}

/// Why the run could not start.
#[derive(Debug, thiserror::Error)]
pub enum ActsError {
    #[error(transparent)]
    Corpus(#[from] super::corpus::CorpusError),
    #[error("the agent card at {url} cannot be read: {why}")]
    Card { url: String, why: String },
    #[error(transparent)]
    Dispatch(#[from] DispatchError),
}

/// A step that did not pass.
enum StepEnd {
    Failed(String),
    Error(String),
}

/// The interface the card declares for `binding` (A2A 1.x).
fn interface(card: &Value, binding: Binding) -> Option<String> {
    card.get("supportedInterfaces")?
        .as_array()?
        .iter()
        .filter(|i| i.get("protocolBinding").and_then(Value::as_str) == Some(binding.card_name()))
        .find(|i| {
            i.get("protocolVersion")
                .and_then(Value::as_str)
                .is_none_or(|v| v.starts_with("1."))
        })
        .and_then(|i| i.get("url")?.as_str().map(str::to_owned))
}

/// Why the card does not meet `test`'s preconditions, if it does not.
fn unmet(test: &Test, card: &Value) -> Option<String> {
    let capabilities = card.get("capabilities");
    for (name, wanted) in &test.preconditions.as_ref()?.capabilities {
        let has = if name == "authentication" {
            // The card declares a security requirement the server enforces.
            ["securityRequirements", "security"].iter().any(|key| {
                card.get(*key)
                    .and_then(Value::as_array)
                    .is_some_and(|a| !a.is_empty())
            })
        } else {
            capabilities
                .and_then(|c| c.get(name))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        if has != *wanted {
            return Some(format!(
                "the card's {name} is {has}; the test needs {wanted}"
            ));
        }
    }
    None
}

/// Runs the corpus; each test over each binding asked for that its card declares.
pub async fn run(corpus: &Corpus, options: &ActsOptions) -> Result<Vec<TestResult>, ActsError> {
    let mut headers = Vec::new();
    if options.pass == Pass::Auth {
        headers.push(("Authorization".to_owned(), format!("Bearer {VALID_TOKEN}")));
    }
    let authorization = headers
        .iter()
        .find(|(name, _)| name == "Authorization")
        .map(|(_, value)| value.clone());
    let dispatcher = Dispatcher::new(options.timeout, headers)?;
    let card = dispatcher.card(&options.url, options.timeout).await?;
    if card.status != 200 || !card.body.is_object() {
        return Err(ActsError::Card {
            url: options.url.clone(),
            why: format!("it answered {}", card.status),
        });
    }
    let mut variables = corpus.variables.clone();
    variables.insert("SUT_BASE_URL".into(), Value::String(options.url.clone()));
    variables.insert("baseUrl".into(), Value::String(options.url.clone()));
    variables.insert(
        "insufficientAuthToken".into(),
        Value::String(INSUFFICIENT_TOKEN.into()),
    );
    if let Some(token) = &options.other_user_token {
        let id = other_users_task(&card.body, options, token).await?;
        variables.insert("otherUserTaskId".into(), Value::String(id));
    }
    let mut results = Vec::new();
    for &binding in &options.bindings {
        let target = interface(&card.body, binding).map(|interface| Target {
            binding,
            base: options.url.clone(),
            interface,
        });
        let grpc = match &target {
            Some(target) if binding == Binding::Grpc => Some(
                GrpcDispatch::connect(&target.interface, authorization.clone(), options.timeout)
                    .await,
            ),
            _ => None,
        };
        for loaded in &corpus.tests {
            let test = &loaded.test;
            if test.level > options.level
                || !(options.only.is_empty()
                    || options.only.iter().any(|p| test.id.starts_with(p.as_str())))
            {
                continue;
            }
            let started = Instant::now();
            let verdict = match &target {
                _ if !test.is_for(binding) => continue,
                None => Verdict::Skipped(format!(
                    "the card declares no {} interface",
                    binding.card_name()
                )),
                Some(target) => {
                    let runner = StepRunner {
                        dispatcher: &dispatcher,
                        about_credentials: test.tags.iter().any(|t| t == "auth"),
                        grpc: match &grpc {
                            Some(Ok(client)) => Some(client),
                            Some(Err(e)) => {
                                results.push(TestResult {
                                    id: test.id.clone(),
                                    name: test.name.clone(),
                                    level: test.level,
                                    binding,
                                    verdict: Verdict::Error {
                                        step: None,
                                        why: e.to_string(),
                                    },
                                    duration: started.elapsed(),
                                });
                                continue;
                            }
                            None => None,
                        },
                        target,
                        options,
                    };
                    judge(&runner, loaded, &card.body, &variables).await
                }
            };
            results.push(TestResult {
                id: test.id.clone(),
                name: test.name.clone(),
                level: test.level,
                binding,
                verdict,
                duration: started.elapsed(),
            });
        }
    }
    Ok(results)
}

/// A task made as the user `token` stands for, over the card's JSON-RPC (or HTTP+JSON)
/// interface: its id.
async fn other_users_task(
    card: &Value,
    options: &ActsOptions,
    token: &str,
) -> Result<String, ActsError> {
    let other = Dispatcher::new(
        options.timeout,
        vec![("Authorization".into(), format!("Bearer {token}"))],
    )?;
    let target = [Binding::Jsonrpc, Binding::Rest]
        .into_iter()
        .find_map(|binding| {
            interface(card, binding).map(|interface| Target {
                binding,
                base: options.url.clone(),
                interface,
            })
        })
        .ok_or_else(|| ActsError::Card {
            url: options.url.clone(),
            why: "it declares no JSON-RPC or HTTP+JSON interface to make the other user's task on"
                .into(),
        })?;
    let params = with_message_id(
        serde_json::json!({"message": {"role": "ROLE_USER", "parts": [{"text": "tck-complete-task another user's task"}]}}),
    );
    let answer = other
        .call(
            &target,
            super::corpus::Operation::SendMessage,
            &params,
            options.timeout,
        )
        .await?;
    answer
        .body
        .get("task")
        .and_then(|t| t.get("id"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ActsError::Card {
            url: options.url.clone(),
            why: format!(
                "the other user's task was not made: it answered {} {:?}",
                answer.status, answer.error
            ),
        })
}

async fn judge(
    runner: &StepRunner<'_>,
    loaded: &Loaded,
    card: &Value,
    variables: &BTreeMap<String, Value>,
) -> Verdict {
    let target = runner.target;
    let test = &loaded.test;
    if let Some(step) = test.steps.iter().find(|s| s.is_client_parsing()) {
        return Verdict::NotApplicable(format!(
            "step {} asks what an SDK's client parsed from a canned answer; no server run can show it",
            step.id
        ));
    }
    if let Some((section, why)) = super::disputed::disputed(&test.id, target.binding) {
        return Verdict::Disputed { section, why };
    }
    if let Some(why) = unmet(test, card) {
        return Verdict::Skipped(why);
    }
    if !variables.contains_key("otherUserTaskId")
        && test.steps.iter().any(|s| {
            s.params
                .as_ref()
                .is_some_and(|p| p.to_string().contains("{{otherUserTaskId}}"))
        })
    {
        return Verdict::Skipped(
            "it reads another user's task: pass --other-user-token, a second user's credential"
                .into(),
        );
    }
    let mut scope = Scope::new(variables.clone());
    for step in &test.steps {
        match runner.run(step, &mut scope).await {
            Ok(()) => {}
            Err(StepEnd::Failed(why)) => {
                return Verdict::Failed {
                    step: Some(step.id.clone()),
                    why,
                };
            }
            Err(StepEnd::Error(why)) => {
                return Verdict::Error {
                    step: Some(step.id.clone()),
                    why,
                };
            }
        }
    }
    Verdict::Passed
}

struct StepRunner<'a> {
    dispatcher: &'a Dispatcher,
    /// The test is about credentials: its raw requests carry only the ones it writes.
    about_credentials: bool,
    /// The gRPC client, on the gRPC binding.
    grpc: Option<&'a GrpcDispatch>,
    target: &'a Target,
    options: &'a ActsOptions,
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
}

fn first_failure(checked: &Checked) -> Result<(), StepEnd> {
    match checked.failures.first() {
        None => Ok(()),
        Some(failure) => Err(StepEnd::Failed(failure.to_string())),
    }
}

impl StepRunner<'_> {
    async fn run(&self, step: &Step, scope: &mut Scope) -> Result<(), StepEnd> {
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
        if let Some(expected) = &step.expect_error {
            let Some(error) = &streamed.error else {
                return Err(StepEnd::Failed(format!(
                    "expected an error; the stream opened with {} event(s)",
                    events.len()
                )));
            };
            let expected = by_name(
                scope
                    .substitute(expected)
                    .map_err(|e| StepEnd::Error(e.to_string()))?,
            );
            return first_failure(&evaluate(
                &expected,
                Read::Found(&error.observed()),
                "error",
            ));
        }
        if let Some(error) = &streamed.error {
            // An `expect` whose body asserts the error (`error: {exists: true}`) expects the
            // refusal.
            let body = step.expect.as_ref().and_then(super::corpus::Expect::body);
            if let Some(body) = body {
                let body = scope
                    .substitute(&body)
                    .map_err(|e| StepEnd::Error(e.to_string()))?;
                let refused = serde_json::json!({"error": error.observed()});
                if evaluate(&body, Read::Found(&refused), "").ok() {
                    return Ok(());
                }
            }
            return Err(StepEnd::Failed(format!(
                "the stream was refused or broke: {}",
                error.observed()
            )));
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
fn with_message_id(mut params: Value) -> Value {
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

/// The counts of a run, by level and verdict.
pub fn tally(results: &[TestResult]) -> BTreeMap<(Level, &'static str), usize> {
    let mut counts = BTreeMap::new();
    for result in results {
        *counts
            .entry((result.level, result.verdict.label()))
            .or_insert(0) += 1;
    }
    counts
}

/// Whether the run certifies: no MUST or SHOULD test failed or errored.
pub fn certifies(results: &[TestResult]) -> bool {
    results.iter().all(|r| {
        r.level == Level::May
            || !matches!(r.verdict, Verdict::Failed { .. } | Verdict::Error { .. })
    })
}

/// The bindings `results` covered.
pub fn bindings(results: &[TestResult]) -> BTreeSet<Binding> {
    results.iter().map(|r| r.binding).collect()
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

    #[test]
    fn preconditions_read_the_cards_capabilities_and_security() {
        let test: Test = serde_saphyr::from_str("id: T\nname: t\nlevel: must\npreconditions:\n  capabilities:\n    authentication: true\n    streaming: false\nsteps: []\n").expect("a test");
        assert!(
            unmet(&test, &json!({"capabilities": {"streaming": false}}))
                .is_some_and(|w| w.contains("authentication"))
        );
        assert_eq!(
            unmet(
                &test,
                &json!({"capabilities": {}, "securityRequirements": [{"bearer": []}]})
            ),
            None
        );
        assert!(
            unmet(
                &test,
                &json!({"capabilities": {"streaming": true}, "securityRequirements": [{}]})
            )
            .is_some()
        );
    }
}
