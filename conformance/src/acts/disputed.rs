//! The corpus's tests that the released specification (A2A v1.0.1) contradicts. The corpus
//! is a draft; where the two disagree the specification wins, and such a test is reported as
//! disputed (its section, and why), neither passed nor failed. docs/conformance.md lists them.

use super::corpus::Binding;

/// A disputed test: its id, the bindings it is disputed on (all when empty), the
/// specification's section, and why.
struct Dispute {
    id: &'static str,
    bindings: &'static [Binding],
    section: &'static str,
    why: &'static str,
}

/// Sending a message without its `messageId` (as these raw steps do) is a request the
/// specification calls invalid.
const NO_MESSAGE_ID: &str = "the raw request's message has no messageId, which A2A v1.0.1 requires of every Message (§4.1.4; REQUIRED in the proto); a server may refuse it as invalid params, and the test counts on it being accepted";

/// The error the specification names for push operations on an agent without push.
const PUSH_NOT_SUPPORTED: &str = "an agent whose card says pushNotifications: false MUST answer its push-config operations with PushNotificationNotSupportedError (§3.3.4); the test wants UnsupportedOperationError";

const DISPUTES: &[Dispute] = &[
    Dispute {
        id: "CARD-DISC-002",
        bindings: &[],
        section: "A2A v1.0.1 §4.4.6 AgentInterface.protocolBinding, §5",
        why: "the test wants every interface's protocolBinding in JSONRPC, GRPC, REST; the specification names HTTP+JSON for REST, and a card may declare bindings beyond the three (ours declares the runtime contract's)",
    },
    Dispute {
        id: "SEC-AUTH-006",
        bindings: &[],
        section: "A2A v1.0.1 §8.2",
        why: "the public agent card is served without authentication (200, the card); the test's body wants an error or a problem title whatever the status, which a 200 card never has",
    },
    Dispute {
        id: "CORE-CTX-001",
        bindings: &[],
        section: "A2A v1.0.1 §3.4.1",
        why: "agents MAY accept and preserve a client-provided contextId; the test requires every server to reject one",
    },
    Dispute {
        id: "CORE-SEND-004",
        bindings: &[],
        section: "A2A v1.0.1 §4.1.6 Part.mediaType, §3.3.2",
        why: "a part's media type is its mediaType; the test puts it in metadata.contentType, whose meaning the specification leaves to the agent, and expects ContentTypeNotSupportedError for it",
    },
    Dispute {
        id: "CORE-ERR-007",
        bindings: &[],
        section: "A2A v1.0.1 §9.5 (JSON-RPC error.data), §11.6 (HTTP+JSON error.details)",
        why: "an error's details are an array of objects, each with an @type; the test wants error data to be one object",
    },
    Dispute {
        id: "REST-PD-001",
        bindings: &[],
        section: "A2A v1.0.1 §11.6",
        why: "HTTP+JSON errors are google.rpc.Status objects under `error` (code, status, message, details); the test wants RFC 9457 problem details (type, title, status)",
    },
    Dispute {
        id: "CORE-HIST-005",
        bindings: &[],
        section: "A2A v1.0.1 §3.7",
        why: "which messages a task's history keeps is the agent's to decide (ours keeps the agent's questions between the user's turns), and clients MUST NOT rely on it; the test reads the third user message at history[2]",
    },
    Dispute {
        id: "DM-FMT-003",
        bindings: &[],
        section: "A2A v1.0.1 §3.4.1",
        why: "an agent that generates a contextId MUST include it in the response, Task or Message; the test wants a reply message without one",
    },
    Dispute {
        id: "CORE-LIST-003",
        bindings: &[Binding::Grpc],
        section: "A2A v1.0.1 §10 (gRPC binding), ListTasksResponse",
        why: "a proto3 string has no presence: the last page's empty nextPageToken is the field's default, which ProtoJSON leaves out; the test wants it present as a string",
    },
    Dispute {
        id: "DM-ART-003",
        bindings: &[],
        section: "A2A v1.0.1 §4.1.6 Part",
        why: "a file part is a Part with raw bytes, a filename and a mediaType of its own; the test wants a `file` object with `name` and `mediaType` (the v0.3 shape)",
    },
    Dispute {
        id: "DM-ART-004",
        bindings: &[],
        section: "A2A v1.0.1 §4.1.6 Part",
        why: "a file by URL is a Part with a url, a filename and a mediaType of its own; the test wants a `fileUrl` object with `url` and `name`",
    },
    Dispute {
        id: "JSONRPC-ENV-001",
        bindings: &[],
        section: "A2A v1.0.1 §4.1.4",
        why: NO_MESSAGE_ID,
    },
    Dispute {
        id: "JSONRPC-CT-001",
        bindings: &[],
        section: "A2A v1.0.1 §4.1.4",
        why: NO_MESSAGE_ID,
    },
    Dispute {
        id: "JSONRPC-SSE-001",
        bindings: &[],
        section: "A2A v1.0.1 §4.1.4",
        why: NO_MESSAGE_ID,
    },
    Dispute {
        id: "DM-FMT-001",
        bindings: &[],
        section: "A2A v1.0.1 §4.1.4",
        why: NO_MESSAGE_ID,
    },
    Dispute {
        id: "DM-EXTRA-001",
        bindings: &[],
        section: "A2A v1.0.1 §4.1.4",
        why: NO_MESSAGE_ID,
    },
    Dispute {
        id: "CORE-CAP-001",
        bindings: &[],
        section: "A2A v1.0.1 §3.3.4",
        why: PUSH_NOT_SUPPORTED,
    },
    Dispute {
        id: "PUSH-CFG-004",
        bindings: &[],
        section: "A2A v1.0.1 §3.3.4",
        why: PUSH_NOT_SUPPORTED,
    },
    Dispute {
        id: "VER-NEG-002",
        bindings: &[],
        section: "A2A v1.0.1 §4.1.4",
        why: NO_MESSAGE_ID,
    },
];

/// Why `id` is disputed on `binding`, if it is.
pub fn disputed(id: &str, binding: Binding) -> Option<(&'static str, &'static str)> {
    DISPUTES
        .iter()
        .find(|d| d.id == id && (d.bindings.is_empty() || d.bindings.contains(&binding)))
        .map(|d| (d.section, d.why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_disputed_id_is_a_test_of_the_corpus_and_says_why() {
        let corpus = crate::acts::corpus::Corpus::vendored().expect("the corpus");
        for dispute in DISPUTES {
            assert!(
                corpus.tests.iter().any(|t| t.test.id == dispute.id),
                "{} is not a test of the corpus",
                dispute.id
            );
            assert!(dispute.section.starts_with("A2A v1.0.1 §") && !dispute.why.is_empty());
        }
        assert_eq!(
            disputed("CORE-CTX-001", Binding::Grpc).map(|d| d.0),
            Some("A2A v1.0.1 §3.4.1")
        );
        assert_eq!(disputed("CORE-SEND-001", Binding::Jsonrpc), None);
    }
}
