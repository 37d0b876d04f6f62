//! The corpus's documents, read into their types: `suite.acts.yaml` and the files it
//! includes, each a list of suites of tests, each test a list of steps. What a step asserts
//! (an `expect` body, an error, a stream) is the assertion language of [`super::assertions`],
//! kept as JSON values; everything around it is typed, and a key the runner does not know
//! fails the load (`deny_unknown_fields`), so the corpus cannot outgrow the runner unseen.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// The corpus this runner was built for, vendored in `conformance/acts/`.
pub const VENDORED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/acts");
/// Its entry document.
pub const SUITE_FILE: &str = "suite.acts.yaml";
/// The specification commit the corpus is pinned at.
pub const CORPUS_COMMIT: &str = "dbcabfba";

/// Why the corpus cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not an ACTS document this runner knows: {why}")]
    Parse { path: PathBuf, why: String },
    #[error("{path} includes {include}, which is not a plain file name beside it")]
    Include { path: PathBuf, include: String },
    #[error("test id {0} appears twice")]
    DuplicateTest(String),
}

/// One ACTS document.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Document {
    pub acts_version: String,
    pub spec_version: String,
    #[serde(default)]
    pub spec_ref: Option<String>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Document variables, `{{name}}` in its tests.
    #[serde(default)]
    pub variables: BTreeMap<String, Value>,
    /// Other documents, by file name beside this one.
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub suites: Vec<Suite>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    pub title: String,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    pub tests: Vec<Test>,
}

/// How much a test weighs: MUST and SHOULD certify; MAY reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Must,
    Should,
    May,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Must => "must",
            Self::Should => "should",
            Self::May => "may",
        }
    }
}

/// A protocol binding, as the corpus names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Binding {
    Jsonrpc,
    Rest,
    Grpc,
}

impl Binding {
    pub const ALL: [Self; 3] = [Self::Jsonrpc, Self::Rest, Self::Grpc];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Jsonrpc => "jsonrpc",
            Self::Rest => "rest",
            Self::Grpc => "grpc",
        }
    }

    /// Its `protocolBinding` in an agent card (A2A §5: `HTTP+JSON` for REST).
    pub fn card_name(self) -> &'static str {
        match self {
            Self::Jsonrpc => "JSONRPC",
            Self::Rest => "HTTP+JSON",
            Self::Grpc => "GRPC",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Test {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub spec_ref: Option<String>,
    pub level: Level,
    #[serde(default)]
    pub preconditions: Option<Preconditions>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The bindings it is for; every binding when absent.
    #[serde(default)]
    pub transport: Option<Vec<Binding>>,
    /// The `tck-*` behaviours the server under test must play.
    #[serde(default)]
    pub requires_behaviors: Vec<String>,
    pub steps: Vec<Step>,
}

impl Test {
    /// Whether it runs over `binding`.
    pub fn is_for(&self, binding: Binding) -> bool {
        self.transport.as_ref().is_none_or(|t| t.contains(&binding))
    }
}

/// What the agent card must say for a test to apply.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preconditions {
    /// `capabilities.<name>` of the card; `authentication` means the card declares a
    /// security requirement.
    #[serde(default)]
    pub capabilities: BTreeMap<String, bool>,
}

/// The operations the corpus names (A2A §3.1, in its own spelling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    GetAgentCard,
    GetExtendedAgentCard,
    /// `CreateTaskPushNotificationConfig`.
    SetPushNotificationConfig,
    GetPushNotificationConfig,
    ListPushNotificationConfigs,
    DeletePushNotificationConfig,
}

impl Operation {
    /// Whether its answer is a stream.
    pub fn streams(self) -> bool {
        matches!(self, Self::SendStreamingMessage | Self::SubscribeToTask)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub id: String,
    #[serde(default)]
    pub operation: Option<Operation>,
    #[serde(default)]
    pub params: Option<Value>,
    /// A request sent as written, beside the bindings' own mapping.
    #[serde(default)]
    pub raw: Option<Raw>,
    /// Named values read out of the answer, `{{step.name}}` in later steps.
    #[serde(default)]
    pub capture: BTreeMap<String, String>,
    #[serde(default)]
    pub expect: Option<Expect>,
    #[serde(default)]
    pub expect_error: Option<Value>,
    #[serde(default)]
    pub expect_stream: Option<ExpectStream>,
    #[serde(default)]
    pub repeat: Option<Repeat>,
    /// A client-parsing step (an SDK's client fed a canned answer): not something a runner
    /// can ask of a server.
    #[serde(default)]
    pub client_response: Option<Value>,
    #[serde(default)]
    pub expect_parsed: Option<Value>,
    /// Assertions over the elements a path reaches (`task.artifacts[*].parts[*]`), after the
    /// step.
    #[serde(default)]
    pub assertions: Vec<NamedAssertion>,
}

/// One named assertion: over `source` (a step's answer, `{{step.response}}`), some, every or
/// no element `path` reaches matches.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedAssertion {
    pub source: String,
    #[serde(default)]
    pub any: Option<CollectionMatch>,
    #[serde(default)]
    pub all: Option<CollectionMatch>,
    #[serde(default)]
    pub none: Option<CollectionMatch>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectionMatch {
    pub path: String,
    #[serde(rename = "match")]
    pub matching: Value,
}

impl Step {
    /// Whether this step asks what an SDK's client parsed, which no server run can show.
    pub fn is_client_parsing(&self) -> bool {
        self.client_response.is_some() || self.expect_parsed.is_some()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Raw {
    pub method: String,
    pub path: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: Option<Value>,
    /// A body sent byte for byte (not JSON).
    #[serde(default)]
    pub body_raw: Option<String>,
    /// Sent without the run's credentials (set by the runner for the tests about them).
    #[serde(skip)]
    pub bare: bool,
}

/// `expect`: the status and the body. Two corpus steps write body fields (`task`, `error`)
/// beside `status` with no `body` key; those are read as the body's.
#[derive(Debug, Clone, Deserialize)]
pub struct Expect {
    #[serde(default)]
    pub status: Option<Value>,
    #[serde(default)]
    pub body: Option<Value>,
    #[serde(flatten)]
    pub body_fields: serde_json::Map<String, Value>,
}

impl Expect {
    /// The body assertion, the shorthand's fields included.
    pub fn body(&self) -> Option<Value> {
        match (&self.body, self.body_fields.is_empty()) {
            (body, true) => body.clone(),
            (None, false) => Some(Value::Object(self.body_fields.clone())),
            (Some(Value::Object(body)), false) => {
                let mut all = body.clone();
                all.extend(self.body_fields.clone());
                Some(Value::Object(all))
            }
            (Some(other), false) => Some(other.clone()),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectStream {
    #[serde(default)]
    pub min_count: Option<usize>,
    #[serde(default)]
    pub max_count: Option<usize>,
    #[serde(default)]
    pub ordering: Option<Ordering>,
    #[serde(default)]
    pub events: Vec<EventAssertion>,
    #[serde(default)]
    pub final_event: Option<Value>,
    #[serde(default)]
    pub each_event: Option<Value>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ordering {
    /// No event moves back to SUBMITTED, and nothing follows a terminal state.
    MonotonicState,
}

/// One assertion about the events of a stream: at its own position in the list, at `index`,
/// or at any position.
#[derive(Debug, Clone, Deserialize)]
pub struct EventAssertion {
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, rename = "match")]
    pub matching: Option<EventMatch>,
    #[serde(default)]
    pub index: Option<usize>,
    /// What the event must look like.
    #[serde(flatten)]
    pub assertion: serde_json::Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventMatch {
    AnyPosition,
    ExactPosition,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Repeat {
    /// `path == VALUE` or `path in [A, B]`.
    pub until: String,
    #[serde(default)]
    pub max_attempts: Option<u32>,
    #[serde(default)]
    pub delay_ms: Option<u64>,
}

/// A test with the document it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub file: String,
    pub suite: String,
    pub test: Test,
}

/// The corpus, read whole: its tests in load order and the document variables.
#[derive(Debug, Clone)]
pub struct Corpus {
    pub spec_version: String,
    pub variables: BTreeMap<String, Value>,
    pub tests: Vec<Loaded>,
}

fn read_document(path: &Path) -> Result<Document, CorpusError> {
    let text = std::fs::read_to_string(path).map_err(|source| CorpusError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_saphyr::from_str(&text).map_err(|e| CorpusError::Parse {
        path: path.to_owned(),
        why: e.to_string(),
    })
}

impl Corpus {
    /// The vendored corpus.
    pub fn vendored() -> Result<Self, CorpusError> {
        Self::load(&Path::new(VENDORED).join(SUITE_FILE))
    }

    /// The corpus whose entry document is `suite`: its tests, then each included document's,
    /// in order.
    pub fn load(suite: &Path) -> Result<Self, CorpusError> {
        let root = read_document(suite)?;
        let dir = suite.parent().unwrap_or(Path::new("."));
        let mut tests = Vec::new();
        let mut documents = vec![(SUITE_FILE.to_owned(), root.clone())];
        for include in &root.include {
            if include.contains('/') || include.contains('\\') || include.starts_with('.') {
                return Err(CorpusError::Include {
                    path: suite.to_owned(),
                    include: include.clone(),
                });
            }
            documents.push((include.clone(), read_document(&dir.join(include))?));
        }
        let mut variables = BTreeMap::new();
        let mut seen = std::collections::BTreeSet::new();
        for (file, document) in documents {
            variables.extend(document.variables);
            for suite in document.suites {
                for test in suite.tests {
                    if !seen.insert(test.id.clone()) {
                        return Err(CorpusError::DuplicateTest(test.id));
                    }
                    tests.push(Loaded {
                        file: file.clone(),
                        suite: suite.id.clone(),
                        test,
                    });
                }
            }
        }
        Ok(Self {
            spec_version: root.spec_version,
            variables,
            tests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_corpus_loads_whole_with_the_counts_its_provenance_gives() {
        let corpus = Corpus::vendored().expect("the vendored corpus loads");
        assert_eq!(corpus.tests.len(), 111);
        let count = |level| {
            corpus
                .tests
                .iter()
                .filter(|t| t.test.level == level)
                .count()
        };
        assert_eq!(
            (count(Level::Must), count(Level::Should), count(Level::May)),
            (65, 33, 13)
        );
        let on = |binding| {
            corpus
                .tests
                .iter()
                .filter(|t| t.test.is_for(binding))
                .count()
        };
        assert_eq!(
            (on(Binding::Jsonrpc), on(Binding::Grpc), on(Binding::Rest)),
            (101, 89, 93),
            "the official runner's per-binding counts"
        );
    }

    #[test]
    fn a_key_the_runner_does_not_know_fails_the_load() {
        let dir = tempfile::tempdir().expect("a dir");
        let suite = dir.path().join(SUITE_FILE);
        std::fs::write(
            &suite,
            "acts_version: '1.0'\nspec_version: '1.0'\nsuites:\n  - id: s\n    name: s\n    tests:\n      - id: T-1\n        name: t\n        level: must\n        steps:\n          - id: a\n            operation: send_message\n            retry_forever: true\n",
        )
        .expect("written");
        let error = Corpus::load(&suite).expect_err("an unknown step key");
        assert!(matches!(error, CorpusError::Parse { .. }), "{error}");
        assert!(error.to_string().contains("retry_forever"), "{error}");
    }
}
