//! The `passthrough` model: echoes the user's message back as the task's artifact.
//!
//! It exists for tests and demos, so it also understands a few directives, given as the first
//! text of the message:
//!
//! | text                        | result                                                    |
//! |-----------------------------|-----------------------------------------------------------|
//! | `***FAIL <reason>`          | a `failed` task whose `status.message` is the reason      |
//! | `***INPUT <question>`       | an `input-required` task asking the question              |
//! | `***SLEEP <duration> <text>`| waits (e.g. `2s`, `500ms`), then echoes `<text>`, or runs it when it is a directive itself (`***SLEEP 1s ***FAIL why`) |
//! | `***TOOL <server>__<tool> <json>` | calls that tool of the agent's `servers` with the JSON arguments (default `{}`): its text is the artifact; a tool error fails the task |
//!
//! Anything else is echoed part by part: text, files and data come back unchanged. `***TOOL`
//! needs an agent with `servers` ([`ToolPassthrough`]); it lets an offline deployment (no LLM)
//! still exercise its downstream MCP servers, as the compose quick start does.

use std::time::Duration;

use async_trait::async_trait;
use daedalus_contract::container::parse_duration;
use daedalus_contract::{Artifact, Part, PartContent};
use tokio_util::sync::CancellationToken;

use super::{Agent, AgentOutcome, AgentRequest, CallContext, ToolSource};

/// The echoing model.
#[derive(Debug, Default, Clone, Copy)]
pub struct Passthrough;

/// What the first text of a message asks for.
#[derive(Debug, PartialEq)]
enum Directive<'a> {
    Fail(&'a str),
    Input(&'a str),
    Sleep(Duration, &'a str),
    Tool(&'a str, &'a str),
    Echo,
}

fn directive(text: &str) -> Directive<'_> {
    let text = text.trim_start();
    if let Some(rest) = text.strip_prefix("***FAIL") {
        return Directive::Fail(rest.trim());
    }
    if let Some(rest) = text.strip_prefix("***INPUT") {
        return Directive::Input(rest.trim());
    }
    if let Some(rest) = text.strip_prefix("***TOOL") {
        let rest = rest.trim();
        let (name, arguments) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if !name.is_empty() {
            return Directive::Tool(name, arguments.trim());
        }
    }
    if let Some(rest) = text.strip_prefix("***SLEEP") {
        let rest = rest.trim_start();
        let (amount, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        if let Ok(d) = parse_duration(amount) {
            return Directive::Sleep(d, after.trim_start());
        }
    }
    Directive::Echo
}

/// The message's first text, where a directive would be.
fn first_text(request: &AgentRequest) -> &str {
    request
        .message
        .parts
        .iter()
        .find_map(Part::as_text)
        .unwrap_or("")
}

fn echo(parts: Vec<Part>) -> AgentOutcome {
    AgentOutcome::Completed {
        artifacts: vec![Artifact::fresh(parts).named("response")],
    }
}

#[async_trait]
impl Agent for Passthrough {
    async fn run(&self, request: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        match directive(first_text(&request)) {
            Directive::Fail(reason) => AgentOutcome::Failed {
                reason: if reason.is_empty() {
                    "failure requested with ***FAIL".to_owned()
                } else {
                    reason.to_owned()
                },
            },
            Directive::Input(question) => AgentOutcome::InputRequired {
                question: vec![Part::text(if question.is_empty() {
                    "More input is needed."
                } else {
                    question
                })],
            },
            Directive::Sleep(duration, text) => {
                let text = if text.is_empty() { "slept" } else { text }.to_owned();
                tokio::select! {
                    () = tokio::time::sleep(duration) => {}
                    () = cancel.cancelled() => return AgentOutcome::Canceled,
                }
                if directive(&text) == Directive::Echo {
                    return echo(vec![Part::text(text)]);
                }
                let mut then = request;
                then.message.parts = vec![Part::text(text)];
                self.run(then, cancel).await
            }
            Directive::Tool(name, _) => AgentOutcome::Failed {
                reason: format!("***TOOL {name}: this agent has no servers to call tools on"),
            },
            Directive::Echo => {
                let mut parts = request.message.parts;
                if parts.is_empty() {
                    parts.push(Part::from_content(PartContent::Text(String::new())));
                }
                echo(parts)
            }
        }
    }
}

/// The passthrough model of an agent with `servers`: `***TOOL` calls one of its tools; every
/// other message is [`Passthrough`]'s.
#[derive(Debug, Clone)]
pub struct ToolPassthrough {
    tools: std::sync::Arc<dyn ToolSource>,
}

impl ToolPassthrough {
    pub fn new(tools: std::sync::Arc<dyn ToolSource>) -> Self {
        Self { tools }
    }
}

#[async_trait]
impl Agent for ToolPassthrough {
    async fn run(&self, request: AgentRequest, cancel: CancellationToken) -> AgentOutcome {
        let Directive::Tool(name, arguments) = directive(first_text(&request)) else {
            return Passthrough.run(request, cancel).await;
        };
        let arguments = if arguments.is_empty() {
            Ok(serde_json::Value::Object(serde_json::Map::new()))
        } else {
            serde_json::from_str::<serde_json::Value>(arguments)
        };
        let Ok(arguments @ serde_json::Value::Object(_)) = arguments else {
            return AgentOutcome::Failed {
                reason: format!("***TOOL {name}: the arguments are not a JSON object"),
            };
        };
        let context = CallContext {
            bearer: request.bearer.clone(),
            cancel: cancel.clone(),
            events: request.events.clone(),
            depth: request.depth,
            allowed: None,
            note: None,
            started: None,
            budget: request.budget.clone(),
        };
        let result = tokio::select! {
            result = self.tools.call(name, &arguments, &context) => result,
            () = cancel.cancelled() => return AgentOutcome::Canceled,
        };
        if result.is_error {
            return AgentOutcome::Failed {
                reason: format!("***TOOL {name}: {}", result.content),
            };
        }
        let mut outcome = echo(vec![Part::text(result.content)]);
        if let AgentOutcome::Completed { artifacts } = &mut outcome
            && !result.files.is_empty()
        {
            // The tool's files (MCP resources), as the LLM agent hands them on.
            artifacts.push(
                Artifact::fresh(result.files)
                    .named(name)
                    .described(format!("files {name} returned")),
            );
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use daedalus_contract::{Message, Role};

    use super::*;

    fn request(parts: Vec<Part>) -> AgentRequest {
        AgentRequest::new("t", "c", Message::new("m", Role::User, parts))
    }

    async fn run(text: &str) -> AgentOutcome {
        Passthrough
            .run(request(vec![Part::text(text)]), CancellationToken::new())
            .await
    }

    #[tokio::test]
    async fn echoes_every_part() {
        let parts = vec![
            Part::text("hello"),
            Part::from_content(PartContent::Data(serde_json::json!({"k": 1}))),
        ];
        match Passthrough
            .run(request(parts.clone()), CancellationToken::new())
            .await
        {
            AgentOutcome::Completed { artifacts } => assert_eq!(artifacts[0].parts, parts),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn directives() {
        assert_eq!(
            run("***FAIL disk full").await,
            AgentOutcome::Failed {
                reason: "disk full".into()
            }
        );
        assert!(
            matches!(run("***FAIL").await, AgentOutcome::Failed { reason } if !reason.is_empty())
        );
        assert_eq!(
            run("***INPUT Which branch?").await,
            AgentOutcome::InputRequired {
                question: vec![Part::text("Which branch?")]
            }
        );
        match run("***SLEEP 10ms done").await {
            AgentOutcome::Completed { artifacts } => {
                assert_eq!(artifacts[0].parts, vec![Part::text("done")]);
            }
            other => panic!("{other:?}"),
        }
        // ***TOOL needs servers: a plain passthrough agent says so.
        assert!(matches!(
            run("***TOOL fix__add {}").await,
            AgentOutcome::Failed { reason } if reason.contains("no servers")
        ));
        // Not a directive: a typo is echoed, not obeyed.
        assert!(matches!(
            run("**FAIL x").await,
            AgentOutcome::Completed { .. }
        ));
        assert!(matches!(
            run("***SLEEP forever").await,
            AgentOutcome::Completed { .. }
        ));
        // A duration that overflows is no duration: echoed, never a panic.
        assert!(matches!(
            run("***SLEEP 153722867280912929m1hrs6148914691236517205333ms1281023894007607h x")
                .await,
            AgentOutcome::Completed { .. }
        ));
    }

    #[tokio::test]
    async fn sleep_stops_when_canceled() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let outcome = Passthrough
            .run(request(vec![Part::text("***SLEEP 1h")]), cancel)
            .await;
        assert_eq!(outcome, AgentOutcome::Canceled);
    }
}
