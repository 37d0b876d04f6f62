//! `metadata.compaction` (level 3): what the runtime did to a conversation that outgrew its
//! model, on the Task of the turn that compacted and on a status update of its stream.

use serde::{Deserialize, Serialize};

use super::Metadata;

/// The key of the report in a Task's or a status update's `metadata`.
pub const COMPACTION_KEY: &str = "compaction";

/// How the oldest whole turns of a conversation were made to fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactionStrategy {
    /// The model summarized them, and the summary took their place.
    Summarize,
    /// They were dropped.
    Truncate,
}

impl CompactionStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionStrategy::Summarize => "summarize",
            CompactionStrategy::Truncate => "truncate",
        }
    }
}

/// One compaction: the conversation sent to the model before and after it (messages, with a
/// summary counted as one, and estimated tokens, the system prompt and tools included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    pub strategy: CompactionStrategy,
    pub messages_before: u64,
    pub messages_after: u64,
    pub tokens_before: u64,
    pub tokens_after: u64,
}

impl Compaction {
    /// The report read from `metadata`, if it holds a well-formed one.
    pub fn from_metadata(metadata: Option<&Metadata>) -> Option<Self> {
        serde_json::from_value(metadata?.get(COMPACTION_KEY)?.clone()).ok()
    }

    /// Puts the report into `metadata`, creating it if needed.
    pub fn insert_into(&self, metadata: &mut Option<Metadata>) {
        let value = serde_json::to_value(self).expect("a compaction report serializes");
        metadata
            .get_or_insert_with(Metadata::new)
            .insert(COMPACTION_KEY.to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::validate::Schema;

    #[test]
    fn the_report_round_trips_through_metadata_and_validates_on_a_task() {
        let report = Compaction {
            strategy: CompactionStrategy::Summarize,
            messages_before: 40,
            messages_after: 9,
            tokens_before: 7_000,
            tokens_after: 2_100,
        };
        let mut metadata = None;
        report.insert_into(&mut metadata);
        assert_eq!(Compaction::from_metadata(metadata.as_ref()), Some(report));
        let task = json!({"id": "t", "contextId": "c", "status": {"state": "working"}, "metadata": metadata});
        assert!(Schema::Task.validate(&task).is_ok(), "{task}");
        assert_eq!(task["metadata"]["compaction"]["messagesBefore"], 40);
        assert_eq!(task["metadata"]["compaction"]["strategy"], "summarize");
    }
}
