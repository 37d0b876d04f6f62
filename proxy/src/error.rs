//! Why the proxy stopped with an error, and the startup step that did not finish.

use std::fmt;
use std::time::Duration;

use crate::forward::http::RuntimeCheckError;
use crate::nats::NatsError;

/// Why the proxy stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error(transparent)]
    Runtime(#[from] RuntimeCheckError),
    #[error(transparent)]
    Startup(#[from] StartupError),
    /// The runtime will not take the proxy as a caller.
    #[error("startup stopped {step}: {source}", step = Step::RuntimeCredential)]
    RuntimeCredential {
        #[from]
        source: crate::forward::http::CredentialCheckError,
    },
}

/// A step of startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    ConnectNats,
    EnsureStreams,
    EnsureConsumer,
    RuntimeHealthy,
    AgentCard,
    Manifest,
    RuntimeCredential,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::ConnectNats => "connecting to NATS",
            Step::EnsureStreams => "creating or checking the streams",
            Step::EnsureConsumer => "creating or updating the agent's consumer",
            Step::RuntimeHealthy => "waiting for the runtime's /health to answer 200",
            Step::AgentCard => "reading the runtime's agent card",
            Step::Manifest => "reading the runtime's contract manifest",
            Step::RuntimeCredential => "presenting the proxy's credential to the runtime",
        })
    }
}

/// Why startup did not finish.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(
        "startup did not finish {step} within STARTUP_TIMEOUT ({}); last error: {last}",
        daedalus_contract::container::format_duration(*timeout)
    )]
    Deadline {
        step: Step,
        /// The configured `STARTUP_TIMEOUT` (not the time some step took).
        timeout: Duration,
        last: String,
    },
}
