//! Check identities and outcomes.

use std::fmt;

use serde::Serialize;

/// Every check the suite knows, with its id, level and severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum CheckId {
    Health,
    CardFetch,
    CardSchema,
    CardSkill,
    CardSignature,
    TaskSchema,
    TaskState,
    TaskIdFromTaskId,
    TaskIdFromMessageId,
    CompletedArtifact,
    FailedMessage,
    Malformed400,
    ContentType415,
    // Advisories.
    CardA2aV1,
    ContextId,
    InputContinue,
    NotARequest400,
    Charset,
    BodyLimit413,
    ErrorBody,
    Manifest,
    CardSigned,
    // Level 2.
    SigtermDrain,
    GraceCancel,
    JsonLogs,
    TraceContext,
    ManifestLevel2,
    // Level 3.
    SseContentType,
    SseOrder,
    SseSchema,
    SseRebuild,
    CardStreaming,
    SessionResume,
    SessionRestart,
    CompactionMetadata,
}

/// Whether a failing check fails the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A requirement of the contract.
    Required,
    /// A convention beyond the contract; reported, never fatal.
    Advisory,
}

impl CheckId {
    /// Every check, in report order.
    pub const ALL: [CheckId; 35] = [
        CheckId::Health,
        CheckId::CardFetch,
        CheckId::CardSchema,
        CheckId::CardSkill,
        CheckId::CardSignature,
        CheckId::TaskSchema,
        CheckId::TaskState,
        CheckId::TaskIdFromTaskId,
        CheckId::TaskIdFromMessageId,
        CheckId::CompletedArtifact,
        CheckId::FailedMessage,
        CheckId::Malformed400,
        CheckId::ContentType415,
        CheckId::CardA2aV1,
        CheckId::ContextId,
        CheckId::InputContinue,
        CheckId::NotARequest400,
        CheckId::Charset,
        CheckId::BodyLimit413,
        CheckId::ErrorBody,
        CheckId::Manifest,
        CheckId::CardSigned,
        CheckId::SigtermDrain,
        CheckId::GraceCancel,
        CheckId::JsonLogs,
        CheckId::TraceContext,
        CheckId::ManifestLevel2,
        CheckId::SseContentType,
        CheckId::SseOrder,
        CheckId::SseSchema,
        CheckId::SseRebuild,
        CheckId::CardStreaming,
        CheckId::SessionResume,
        CheckId::SessionRestart,
        CheckId::CompactionMetadata,
    ];

    pub fn id(self) -> &'static str {
        match self {
            CheckId::Health => "L1-HEALTH",
            CheckId::CardFetch => "L1-CARD-FETCH",
            CheckId::CardSchema => "L1-CARD-SCHEMA",
            CheckId::CardSkill => "L1-CARD-SKILL",
            CheckId::CardSignature => "L1-CARD-SIGNATURE",
            CheckId::TaskSchema => "L1-TASK-SCHEMA",
            CheckId::TaskState => "L1-TASK-STATE",
            CheckId::TaskIdFromTaskId => "L1-TASK-ID-FROM-TASKID",
            CheckId::TaskIdFromMessageId => "L1-TASK-ID-FROM-MESSAGEID",
            CheckId::CompletedArtifact => "L1-COMPLETED-ARTIFACT",
            CheckId::FailedMessage => "L1-FAILED-MESSAGE",
            CheckId::Malformed400 => "L1-400-MALFORMED",
            CheckId::ContentType415 => "L1-415-CONTENT-TYPE",
            CheckId::CardA2aV1 => "L1-CARD-A2A-V1",
            CheckId::ContextId => "L1-CONTEXT-ID",
            CheckId::InputContinue => "L1-INPUT-CONTINUE",
            CheckId::NotARequest400 => "L1-400-NOT-A-REQUEST",
            CheckId::Charset => "L1-CHARSET",
            CheckId::BodyLimit413 => "L1-413-BODY-LIMIT",
            CheckId::ErrorBody => "L1-ERROR-BODY",
            CheckId::Manifest => "L1-MANIFEST",
            CheckId::CardSigned => "L1-CARD-SIGNED",
            CheckId::SigtermDrain => "L2-SIGTERM-DRAIN",
            CheckId::GraceCancel => "L2-GRACE-CANCEL",
            CheckId::JsonLogs => "L2-JSON-LOGS",
            CheckId::TraceContext => "L2-TRACE-CONTEXT",
            CheckId::ManifestLevel2 => "L2-MANIFEST",
            CheckId::SseContentType => "L3-SSE-CONTENT-TYPE",
            CheckId::SseOrder => "L3-SSE-ORDER",
            CheckId::SseSchema => "L3-SSE-SCHEMA",
            CheckId::SseRebuild => "L3-SSE-REBUILD",
            CheckId::CardStreaming => "L3-CARD-STREAMING",
            CheckId::SessionResume => "L3-SESSION-RESUME",
            CheckId::SessionRestart => "L3-SESSION-RESTART",
            CheckId::CompactionMetadata => "L3-COMPACTION-METADATA",
        }
    }

    /// What the check asserts, in one line.
    pub fn title(self) -> &'static str {
        match self {
            CheckId::Health => "GET /health answers 200 with JSON {\"status\": \"ok\"}",
            CheckId::CardFetch => "GET /.well-known/agent-card.json answers 200 with JSON",
            CheckId::CardSchema => "the agent card validates against agent-card.schema.json",
            CheckId::CardSkill => "the card has a skill with id, name, description and tags",
            CheckId::CardSignature => {
                "a signed card verifies (A2A §8.4) against the keys it publishes: its jku, else \
                 /.well-known/jwks.json"
            }
            CheckId::TaskSchema => "POST / answers 200 with a Task valid against task.schema.json",
            CheckId::TaskState => "returned tasks are completed, failed or input-required",
            CheckId::TaskIdFromTaskId => "Task id equals the request's message.taskId",
            CheckId::TaskIdFromMessageId => "Task id equals message.messageId when no taskId",
            CheckId::CompletedArtifact => "completed tasks include at least one artifact",
            CheckId::FailedMessage => "failed tasks include status.message",
            CheckId::Malformed400 => "malformed JSON gets 400",
            CheckId::ContentType415 => "a Content-Type other than application/json gets 415",
            CheckId::CardA2aV1 => "the card also validates as an A2A v1.0 AgentCard",
            CheckId::ContextId => "contextId is echoed when sent and generated when not",
            CheckId::InputContinue => "answering an input-required task continues it",
            CheckId::NotARequest400 => "JSON that is not a SendMessageRequest gets 400",
            CheckId::Charset => "application/json; charset=utf-8 is accepted",
            CheckId::BodyLimit413 => "a 17 MiB body gets 413",
            CheckId::ErrorBody => "error responses carry {\"error\": {code, message}}",
            CheckId::Manifest => "/.well-known/runtime-contract.json, if served, is valid",
            CheckId::CardSigned => "the agent card is signed (A2A §8.4)",
            CheckId::SigtermDrain => {
                "on SIGTERM an in-flight task completes, new work gets 503, and the process \
                 exits 0 within TERMINATION_GRACE_PERIOD"
            }
            CheckId::GraceCancel => {
                "past TERMINATION_GRACE_PERIOD remaining work is canceled and the process exits 0"
            }
            CheckId::JsonLogs => "every line on stdout is one JSON object",
            CheckId::TraceContext => {
                "the trace id of an inbound traceparent appears in the log lines of that request"
            }
            CheckId::ManifestLevel2 => {
                "the manifest, if served, declares level 2 or more and traceContext: true"
            }
            CheckId::SseContentType => {
                "POST / with Accept: text/event-stream answers 200 text/event-stream"
            }
            CheckId::SseOrder => {
                "the stream starts with a task event and ends with the one final statusUpdate"
            }
            CheckId::SseSchema => "every stream event validates against stream-event.schema.json",
            CheckId::SseRebuild => {
                "the stream rebuilds to the Task the same request answers without streaming"
            }
            CheckId::CardStreaming => {
                "the card says capabilities.streaming: true exactly when SSE works"
            }
            CheckId::SessionResume => {
                "a second task of a context has the first task's message in its history"
            }
            CheckId::SessionRestart => {
                "a context continues across a restart of the runtime that keeps WORK_DIR (--exec)"
            }
            CheckId::CompactionMetadata => {
                "metadata.compaction, wherever it appears, is {strategy, messagesBefore, \
                 messagesAfter, tokensBefore, tokensAfter}"
            }
        }
    }

    pub fn level(self) -> u8 {
        match self {
            CheckId::SigtermDrain
            | CheckId::GraceCancel
            | CheckId::JsonLogs
            | CheckId::TraceContext
            | CheckId::ManifestLevel2 => 2,
            CheckId::SseContentType
            | CheckId::SseOrder
            | CheckId::SseSchema
            | CheckId::SseRebuild
            | CheckId::CardStreaming
            | CheckId::SessionResume
            | CheckId::SessionRestart
            | CheckId::CompactionMetadata => 3,
            _ => 1,
        }
    }

    pub fn severity(self) -> Severity {
        match self {
            CheckId::CardA2aV1
            | CheckId::ContextId
            | CheckId::InputContinue
            | CheckId::NotARequest400
            | CheckId::Charset
            | CheckId::BodyLimit413
            | CheckId::ErrorBody
            | CheckId::Manifest
            | CheckId::CardSigned => Severity::Advisory,
            _ => Severity::Required,
        }
    }

    /// Looks a check up by its id (`L1-HEALTH`).
    pub fn from_id(id: &str) -> Option<CheckId> {
        CheckId::ALL.into_iter().find(|c| c.id() == id)
    }
}

impl fmt::Display for CheckId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// How a check came out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    /// The runtime does not do what the check asserts; the reason says what it did.
    Fail(String),
    /// The check could not be judged (a prerequisite failed, or nothing to inspect).
    Skip(String),
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    pub check: CheckId,
    pub outcome: Outcome,
}

impl CheckResult {
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Pass
    }

    pub fn failed(&self) -> bool {
        matches!(self.outcome, Outcome::Fail(_))
    }

    /// The reason of a failure or a skip.
    pub fn reason(&self) -> Option<&str> {
        match &self.outcome {
            Outcome::Pass => None,
            Outcome::Fail(r) | Outcome::Skip(r) => Some(r),
        }
    }
}
