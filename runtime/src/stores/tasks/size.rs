//! How many bytes a task, a message or an event holds, roughly: its text and data, and a
//! fixed overhead per message, part and event. What the store's byte budget counts.

use daedalus_contract::{Message, Part, PartContent, StreamEvent, Task};

/// Bytes held by the parts of a message, and a fixed overhead.
pub(crate) fn message_bytes(m: &Message) -> usize {
    const MESSAGE_OVERHEAD: usize = 128;
    MESSAGE_OVERHEAD + m.message_id.len() + parts_bytes(&m.parts)
}

pub(crate) fn parts_bytes(parts: &[Part]) -> usize {
    const PART_OVERHEAD: usize = 64;
    parts
        .iter()
        .map(|p| {
            let content = match &p.content {
                PartContent::Text(s) | PartContent::Raw(s) | PartContent::Url(s) => s.len(),
                // Structured data is rare and small; its JSON length is a fair measure.
                PartContent::Data(v) => v.to_string().len(),
            };
            PART_OVERHEAD
                + content
                + p.media_type.as_ref().map_or(0, String::len)
                + p.filename.as_ref().map_or(0, String::len)
        })
        .sum()
}

/// Bytes held by a task: its status message, artifacts and history.
pub(crate) fn task_bytes(task: &Task) -> usize {
    let status = task.status.message.as_ref().map_or(0, message_bytes);
    let artifacts: usize = task
        .artifacts
        .iter()
        .map(|a| parts_bytes(&a.parts) + 64)
        .sum();
    let history: usize = task.history.iter().flatten().map(message_bytes).sum();
    256 + task.id.len() + status + artifacts + history
}

/// Bytes held by a stream event.
pub(crate) fn event_bytes(event: &StreamEvent) -> usize {
    const FIXED: usize = 256;
    FIXED
        + match event {
            StreamEvent::Task(task) => task_bytes(task),
            StreamEvent::ArtifactUpdate(u) => parts_bytes(&u.artifact.parts),
            StreamEvent::StatusUpdate(u) => u.status.message.as_ref().map_or(0, message_bytes),
        }
}
