//! The official A2A Rust SDK (`a2a-server-lf` 0.5.3, `a2a-lf` 0.4.2) serving an echo agent on
//! JSON-RPC, with the SDK's own in-memory task store: the benchmark peer of our runtime.
//!
//! Usage: `a2a-rs-echo <port>`. JSON-RPC at `/`, the card at the well-known path. Prints
//! `ready` on stdout once it serves.
//!
//! The executor does what the Python SDK's echo agent (`test-kit/py/a2a_echo_agent.py`) and our
//! `passthrough` agent do: the task is submitted, one artifact `echo` holds "echo: <text>", then
//! the task is `COMPLETED`. "SLEEP <seconds> <text>" waits first (the held-streams benchmark).

use std::sync::Arc;
use std::time::Duration;

use a2a::*;
use a2a_server::*;
use futures::stream::{self, BoxStream, StreamExt};

struct Echo;

impl AgentExecutor for Echo {
    fn execute(&self, ctx: ExecutorContext) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        let (task_id, context_id) = ctx.task_info();
        let text = ctx
            .message
            .as_ref()
            .and_then(Message::text)
            .unwrap_or_default()
            .to_owned();
        let (wait, text) = match text.strip_prefix("SLEEP ").and_then(|r| r.split_once(' ')) {
            Some((seconds, rest)) => (seconds.parse::<f64>().unwrap_or(0.0), rest.to_owned()),
            None => (0.0, text),
        };
        let status = |state| TaskStatus {
            state,
            message: None,
            timestamp: Some(chrono::Utc::now()),
        };
        let submitted = StreamResponse::Task(Task {
            id: task_id.clone(),
            context_id: context_id.clone(),
            status: status(TaskState::Submitted),
            artifacts: None,
            history: ctx.message.clone().map(|m| vec![m]),
            metadata: None,
        });
        let artifact = StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: task_id.clone(),
            context_id: context_id.clone(),
            artifact: Artifact {
                artifact_id: new_artifact_id(),
                name: Some("echo".into()),
                description: None,
                parts: vec![Part::text(format!("echo: {text}"))],
                metadata: None,
                extensions: None,
            },
            append: None,
            last_chunk: Some(true),
            metadata: None,
        });
        let completed = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id,
            context_id,
            status: status(TaskState::Completed),
            metadata: None,
        });
        let first = stream::iter([Ok(submitted)]);
        let rest = stream::once(async move {
            if wait > 0.0 {
                tokio::time::sleep(Duration::from_secs_f64(wait)).await;
            }
            stream::iter([Ok(artifact), Ok(completed)])
        })
        .flatten();
        first.chain(rest).boxed()
    }

    fn cancel(&self, ctx: ExecutorContext) -> BoxStream<'static, Result<StreamResponse, A2AError>> {
        let (task_id, context_id) = ctx.task_info();
        stream::iter([Ok(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id,
            context_id,
            status: TaskStatus {
                state: TaskState::Canceled,
                message: None,
                timestamp: Some(chrono::Utc::now()),
            },
            metadata: None,
        }))])
        .boxed()
    }
}

fn card(port: u16) -> AgentCard {
    AgentCard {
        name: "a2a-rs echo".into(),
        description: "Echoes the user's text (the official Rust SDK, a benchmark peer).".into(),
        version: a2a::VERSION.into(),
        provider: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: None,
            extended_agent_card: None,
        },
        skills: vec![AgentSkill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "Echoes the user's text.".into(),
            tags: vec!["echo".into()],
            examples: None,
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }],
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        supported_interfaces: vec![AgentInterface::new(
            format!("http://127.0.0.1:{port}/"),
            TRANSPORT_PROTOCOL_JSONRPC,
        )],
        security_schemes: None,
        security_requirements: None,
        documentation_url: None,
        icon_url: None,
        signatures: None,
    }
}

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("usage: a2a-rs-echo <port>");
    let handler = Arc::new(DefaultRequestHandler::new(Echo, InMemoryTaskStore::new()));
    let app = a2a_server::jsonrpc::jsonrpc_router(handler)
        .merge(a2a_server::agent_card::agent_card_router(Arc::new(StaticAgentCard::new(card(port)))));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("the port is free");
    println!("ready");
    axum::serve(listener, app).await.expect("serves");
}
