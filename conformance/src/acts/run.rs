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

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::corpus::{Binding, Corpus, Level, Loaded, Test};
use super::dispatch::{DispatchError, Dispatcher, Target};
use super::grpc::GrpcDispatch;
use super::scope::Scope;
use super::steps::{StepEnd, StepRunner, with_message_id};
use super::webhook::{self, ReceiverError, WebhookReceiver};

/// The three passes of the official kit: what the server under test is configured to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Everything it does.
    Full,
    /// Streaming, push and the extended card off: only the tests of an agent without one of
    /// them run (as in the official kit, whose reduced pass re-runs what the full pass skipped
    /// for a capability the card has).
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
    /// The server plays none of the corpus's behaviours (`tck-*`): only the tests that need
    /// none run (discovery, errors, wire format, version negotiation), the rest are skipped.
    pub no_behaviours: bool,
    /// Where the runner's webhook receiver listens (the push-delivery tests).
    pub webhook_listen: std::net::SocketAddr,
    /// The base URL the server under test reaches that receiver at (when it is not the
    /// address bound, as from a container); the tests' webhooks are under it.
    pub webhook_url: Option<String>,
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
            no_behaviours: false,
            webhook_listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            webhook_url: None,
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
    #[error(transparent)]
    Webhook(#[from] ReceiverError),
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

/// Whether `test` is about an agent without a capability (a precondition asks for one to be
/// `false`): what the reduced pass runs, as the official kit's does.
fn needs_a_capability_absent(test: &Test) -> bool {
    test.preconditions
        .as_ref()
        .is_some_and(|p| p.capabilities.values().any(|wanted| !wanted))
}

/// Whether `test` is run: at or under the level asked for, and named by `--only` if given.
fn selected(test: &crate::acts::corpus::Test, options: &ActsOptions) -> bool {
    test.level <= options.level
        && (options.only.is_empty() || options.only.iter().any(|p| test.id.starts_with(p.as_str())))
}

/// The corpus's variables, and the run's: the server's URL, the insufficient token, and the
/// other user's task (made now, with `--other-user-token`).
async fn variables(
    corpus: &Corpus,
    options: &ActsOptions,
    card: &Value,
) -> Result<std::collections::BTreeMap<String, Value>, ActsError> {
    let mut variables = corpus.variables.clone();
    variables.insert("SUT_BASE_URL".into(), Value::String(options.url.clone()));
    variables.insert("baseUrl".into(), Value::String(options.url.clone()));
    variables.insert(
        "insufficientAuthToken".into(),
        Value::String(INSUFFICIENT_TOKEN.into()),
    );
    if let Some(token) = &options.other_user_token {
        let id = other_users_task(card, options, token).await?;
        variables.insert("otherUserTaskId".into(), Value::String(id));
    }
    Ok(variables)
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
    let variables = variables(corpus, options, &card.body).await?;
    let webhooks =
        WebhookReceiver::start(options.webhook_listen, options.webhook_url.as_deref()).await?;
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
        for loaded in corpus.tests.iter().filter(|t| selected(&t.test, options)) {
            let test = &loaded.test;
            let started = Instant::now();
            let verdict = match (&target, &grpc) {
                _ if !test.is_for(binding) => continue,
                (None, _) => Verdict::Skipped(format!(
                    "the card declares no {} interface",
                    binding.card_name()
                )),
                (Some(_), Some(Err(e))) => Verdict::Error {
                    step: None,
                    why: e.to_string(),
                },
                (Some(target), grpc) => {
                    let runner = StepRunner {
                        dispatcher: &dispatcher,
                        about_credentials: test.tags.iter().any(|t| t == "auth"),
                        about_media_type: test.tags.iter().any(|t| t == "content-type"),
                        grpc: grpc.as_ref().and_then(|client| client.as_ref().ok()),
                        target,
                        options,
                    };
                    judge(&runner, loaded, &card.body, &variables, &webhooks).await
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

/// Runs one test and judges it: its steps in order (the first to fail ends it), then what a
/// push test's webhook was delivered; unless it is not to be run here at all.
async fn judge(
    runner: &StepRunner<'_>,
    loaded: &Loaded,
    card: &Value,
    variables: &BTreeMap<String, Value>,
    webhooks: &WebhookReceiver,
) -> Verdict {
    let target = runner.target;
    let test = &loaded.test;
    if let Some(verdict) = not_run(runner, test, card, variables) {
        return verdict;
    }
    let mut scope = Scope::new(variables.clone());
    scope.set_variable(
        "webhookUrl",
        Value::String(webhooks.url_for(target.binding, &test.id)),
    );
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
    let Some(expected) = webhook::expectation(&test.id) else {
        return Verdict::Passed;
    };
    let deliveries = webhooks
        .wait(
            target.binding,
            &test.id,
            runner.options.stream_timeout,
            |d| expected.settled(d),
        )
        .await;
    let task = scope.captured("taskId").and_then(Value::as_str);
    match expected.judge(&deliveries, task) {
        Ok(()) => Verdict::Passed,
        Err(why) => Verdict::Failed {
            step: Some("webhook".into()),
            why,
        },
    }
}

/// Why `test` is not run against this server, if it is not: a client-parsing test, a
/// disputed one, a behaviour or a capability this pass does not test, a precondition of the
/// card unmet, or another user's task it needs and was not given.
fn not_run(
    runner: &StepRunner<'_>,
    test: &crate::acts::corpus::Test,
    card: &Value,
    variables: &BTreeMap<String, Value>,
) -> Option<Verdict> {
    if let Some(step) = test.steps.iter().find(|s| s.is_client_parsing()) {
        return Some(Verdict::NotApplicable(format!(
            "step {} asks what an SDK's client parsed from a canned answer; no server run can show it",
            step.id
        )));
    }
    if let Some((section, why)) = super::disputed::disputed(&test.id, runner.target.binding) {
        return Some(Verdict::Disputed { section, why });
    }
    if runner.options.no_behaviours && !test.requires_behaviors.is_empty() {
        return Some(Verdict::Skipped(format!(
            "it needs the behaviour {}, and the server plays none (--no-behaviours)",
            test.requires_behaviors.join(", ")
        )));
    }
    if runner.options.pass == Pass::Reduced && !needs_a_capability_absent(test) {
        return Some(Verdict::Skipped(
            "the reduced pass runs only the tests of an agent without a capability; the full pass runs this one"
                .into(),
        ));
    }
    if let Some(why) = unmet(test, card) {
        return Some(Verdict::Skipped(why));
    }
    let reads_another_users_task = test.steps.iter().any(|s| {
        s.params
            .as_ref()
            .is_some_and(|p| p.to_string().contains("{{otherUserTaskId}}"))
    });
    (reads_another_users_task && !variables.contains_key("otherUserTaskId")).then(|| {
        Verdict::Skipped(
            "it reads another user's task: pass --other-user-token, a second user's credential"
                .into(),
        )
    })
}

/// Whether the run certifies: no MUST or SHOULD test failed or errored.
pub fn certifies(results: &[TestResult]) -> bool {
    results.iter().all(|r| {
        r.level == Level::May
            || !matches!(r.verdict, Verdict::Failed { .. } | Verdict::Error { .. })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
