//! The ids a task message carries: what a result, a dead letter and a reply are addressed by.

/// The ids a task message carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ids {
    pub task_id: String,
    pub message_id: String,
    pub context_id: Option<String>,
}
