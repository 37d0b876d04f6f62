//! The Task a stream describes, rebuilt from its events: one set of rules for every reader of
//! a stream (the proxy, `publish --follow`, the conformance suite, the runtime's own tests).
//!
//! - `task` sets the task as it stands;
//! - `statusUpdate` sets `status`, and merges its `metadata` into the task's;
//! - `artifactUpdate` with `append: false` puts its artifact in place (a new one, or the
//!   replacement of the artifact with the same id); with `append: true` its parts are added to
//!   that artifact, a text part joining a text part that ends it (so streamed text is one
//!   part, as the finished Task holds it), and the `name`, `description`, `extensions` and
//!   `metadata` it carries, if any, replace the artifact's (a last chunk can name what the
//!   first could not).
//!
//! The stream is over at the status update with `final: true`; an event after it is an error.

use super::{Artifact, Part, PartContent, StreamEvent, Task, TaskStatus};

/// Why a stream does not describe a task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RebuildError {
    #[error("the first event is not a task")]
    NoTaskFirst,
    #[error("an event came after the final status update")]
    AfterFinal,
    #[error("event for task {found}, but the stream is of task {expected}")]
    OtherTask { expected: String, found: String },
    #[error("artifact {0} is appended to before it was sent")]
    AppendToUnknown(String),
}

/// Rebuilds a task from its stream, event by event.
#[derive(Debug, Clone, Default)]
pub struct TaskRebuilder {
    task: Option<Task>,
    ended: bool,
}

impl TaskRebuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Goes on from `task` as it stands, as if its stream had opened with it.
    pub fn resume(task: Task) -> Self {
        Self {
            task: Some(task),
            ended: false,
        }
    }

    /// Applies the next event of the stream.
    pub fn apply(&mut self, event: &StreamEvent) -> Result<(), RebuildError> {
        if self.ended {
            return Err(RebuildError::AfterFinal);
        }
        let task = match (event, &mut self.task) {
            (StreamEvent::Task(first), None) => {
                self.task = Some(first.clone());
                return Ok(());
            }
            (_, None) => return Err(RebuildError::NoTaskFirst),
            (_, Some(task)) => task,
        };
        match event {
            StreamEvent::Task(again) => {
                same_task(task, &again.id)?;
                *task = again.clone();
            }
            StreamEvent::StatusUpdate(update) => {
                same_task(task, &update.task_id)?;
                task.status = update.status.clone();
                if let Some(metadata) = &update.metadata {
                    task.metadata
                        .get_or_insert_with(Default::default)
                        .extend(metadata.clone());
                }
                self.ended = update.r#final;
            }
            StreamEvent::ArtifactUpdate(update) => {
                same_task(task, &update.task_id)?;
                let id = &update.artifact.artifact_id;
                let existing = task.artifacts.iter_mut().find(|a| &a.artifact_id == id);
                match (existing, update.append) {
                    (Some(artifact), true) => artifact.append_chunk(&update.artifact),
                    (None, true) => return Err(RebuildError::AppendToUnknown(id.clone())),
                    (Some(artifact), false) => *artifact = update.artifact.clone(),
                    (None, false) => task.artifacts.push(update.artifact.clone()),
                }
            }
        }
        Ok(())
    }

    /// Whether the final status update has been applied.
    pub fn is_final(&self) -> bool {
        self.ended
    }

    /// The task as rebuilt so far.
    pub fn task(&self) -> Option<&Task> {
        self.task.as_ref()
    }

    /// The rebuilt task.
    pub fn into_task(self) -> Option<Task> {
        self.task
    }

    /// The status the stream last reported.
    pub fn status(&self) -> Option<&TaskStatus> {
        self.task.as_ref().map(|t| &t.status)
    }
}

fn same_task(task: &Task, id: &str) -> Result<(), RebuildError> {
    if task.id == id {
        Ok(())
    } else {
        Err(RebuildError::OtherTask {
            expected: task.id.clone(),
            found: id.to_owned(),
        })
    }
}

/// Adds `more`'s parts to `artifact` (text onto a plain text part that ends it, anything else
/// after), and takes the descriptive fields `more` carries.
impl Artifact {
    /// Adds a chunk of this artifact (an `artifactUpdate` with `append: true`): its parts, a
    /// plain text part joining a plain text part that ends this one, and whichever of `name`,
    /// `description`, `extensions` and `metadata` it carries.
    pub fn append_chunk(&mut self, more: &Artifact) {
        if more.name.is_some() {
            self.name.clone_from(&more.name);
        }
        if more.description.is_some() {
            self.description.clone_from(&more.description);
        }
        if more.extensions.is_some() {
            self.extensions.clone_from(&more.extensions);
        }
        if more.metadata.is_some() {
            self.metadata.clone_from(&more.metadata);
        }
        for part in &more.parts {
            let joined = match (self.parts.last_mut(), &part.content) {
                (Some(last), PartContent::Text(more))
                    if is_plain_text(last) && is_plain_text(part) =>
                {
                    if let PartContent::Text(text) = &mut last.content {
                        text.push_str(more);
                    }
                    true
                }
                _ => false,
            };
            if !joined {
                self.parts.push(part.clone());
            }
        }
    }
}

fn is_plain_text(part: &Part) -> bool {
    matches!(part.content, PartContent::Text(_))
        && part.media_type.is_none()
        && part.filename.is_none()
        && part.metadata.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent};

    fn task(state: TaskState) -> Task {
        Task {
            id: "t".into(),
            context_id: Some("c".into()),
            status: TaskStatus {
                state,
                message: None,
                timestamp: None,
            },
            artifacts: Vec::new(),
            history: None,
            metadata: None,
        }
    }

    fn chunk(id: &str, text: &str, append: bool) -> StreamEvent {
        StreamEvent::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Artifact::text(id, text),
            append,
            last_chunk: false,
            metadata: None,
        })
    }

    fn status(state: TaskState, last: bool) -> StreamEvent {
        StreamEvent::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state,
                message: None,
                timestamp: None,
            },
            r#final: last,
            metadata: None,
        })
    }

    #[test]
    fn appended_text_is_one_part_and_a_replacement_starts_over() {
        let mut rebuilt = TaskRebuilder::new();
        for event in [
            StreamEvent::Task(task(TaskState::Submitted)),
            status(TaskState::Working, false),
            chunk("a", "Let me ", false),
            chunk("a", "look.", true),
            chunk("a", "The answer", false),
            chunk("a", " is 4.", true),
            status(TaskState::Completed, true),
        ] {
            rebuilt.apply(&event).expect("a valid stream");
        }
        assert!(rebuilt.is_final());
        let task = rebuilt.into_task().expect("a task");
        assert_eq!(task.status.state, TaskState::Completed);
        assert_eq!(task.artifacts.len(), 1);
        assert_eq!(
            task.artifacts[0].parts,
            vec![Part::text("The answer is 4.")]
        );
    }

    #[test]
    fn a_stream_must_start_with_its_task_and_end_at_final() {
        let mut rebuilt = TaskRebuilder::new();
        assert_eq!(
            rebuilt.apply(&status(TaskState::Working, false)),
            Err(RebuildError::NoTaskFirst)
        );
        rebuilt
            .apply(&StreamEvent::Task(task(TaskState::Working)))
            .expect("task first");
        assert_eq!(
            rebuilt.apply(&chunk("x", "more", true)),
            Err(RebuildError::AppendToUnknown("x".into()))
        );
        rebuilt
            .apply(&status(TaskState::Failed, true))
            .expect("final");
        assert_eq!(
            rebuilt.apply(&status(TaskState::Failed, true)),
            Err(RebuildError::AfterFinal)
        );
    }
}
