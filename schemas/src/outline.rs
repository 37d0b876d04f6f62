//! The strict reader: a Task body that is already exactly in the contract dialect, read only
//! for what a consumer decides by (id, state, whether it has output, whether a failure says
//! why), so it can be passed on byte for byte instead of parsed and written again.
//!
//! "Exactly the contract dialect" means: the body [`crate::write::contract::to_vec`] would write
//! for the Task it holds, up to key order, whitespace and string escapes. So every field is
//! spelled as the contract writes it (camelCase, `"completed"`, `"agent"`), nothing unknown,
//! no `null` for an absent field, no empty `artifacts`, and every part carries exactly one of
//! `text`, `raw`, `url`, `data`. Anything else is `None`, and the caller takes the lenient
//! path ([`crate::read::from_slice`], then the writer), which accepts every dialect.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::{Dialect, Role, TaskState};

/// What a Task body in the contract dialect says, for deciding what to do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutline<'a> {
    pub id: Cow<'a, str>,
    pub state: TaskState,
    /// At least one artifact, and every artifact has a part.
    pub has_output: bool,
    /// `status.message` is there and has a part.
    pub explained: bool,
}

impl<'a> TaskOutline<'a> {
    /// The outline of `body` if it is a Task exactly in the contract dialect, else `None`.
    pub fn read(body: &'a [u8]) -> Option<Self> {
        let task: TaskIn<'a> = serde_json::from_slice(body).ok()?;
        let artifacts = task.artifacts.unwrap_or_default();
        Some(Self {
            id: task.id,
            state: task.status.state.0,
            has_output: !artifacts.is_empty() && artifacts.iter().all(|a| !a.parts.is_empty()),
            explained: task.status.message.is_some_and(|m| !m.parts.is_empty()),
        })
    }
}

#[expect(dead_code, reason = "read to check the shape, never used")]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TaskIn<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(default, deserialize_with = "present")]
    context_id: Option<Text>,
    status: StatusIn,
    #[serde(default, deserialize_with = "non_empty")]
    artifacts: Option<Vec<ArtifactIn>>,
    #[serde(default, deserialize_with = "present")]
    history: Option<Vec<MessageIn>>,
    #[serde(default, deserialize_with = "present")]
    metadata: Option<Object>,
}

#[expect(dead_code, reason = "read to check the shape, never used")]
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusIn {
    state: Contract<TaskState>,
    #[serde(default, deserialize_with = "present")]
    message: Option<MessageIn>,
    #[serde(default, deserialize_with = "present")]
    timestamp: Option<Text>,
}

#[expect(dead_code, reason = "read to check the shape, never used")]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MessageIn {
    message_id: Text,
    role: Contract<Role>,
    parts: Vec<PartIn>,
    #[serde(default, deserialize_with = "present")]
    task_id: Option<Text>,
    #[serde(default, deserialize_with = "present")]
    context_id: Option<Text>,
    #[serde(default, deserialize_with = "present")]
    reference_task_ids: Option<Vec<Text>>,
    #[serde(default, deserialize_with = "present")]
    extensions: Option<Vec<Text>>,
    #[serde(default, deserialize_with = "present")]
    metadata: Option<Object>,
}

#[expect(dead_code, reason = "read to check the shape, never used")]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ArtifactIn {
    artifact_id: Text,
    #[serde(default, deserialize_with = "present")]
    name: Option<Text>,
    #[serde(default, deserialize_with = "present")]
    description: Option<Text>,
    parts: Vec<PartIn>,
    #[serde(default, deserialize_with = "present")]
    extensions: Option<Vec<Text>>,
    #[serde(default, deserialize_with = "present")]
    metadata: Option<Object>,
}

/// A part with exactly one content field.
#[derive(Deserialize)]
#[serde(try_from = "PartFields")]
struct PartIn;

#[expect(dead_code, reason = "read to check the shape, never used")]
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PartFields {
    #[serde(default, deserialize_with = "present")]
    text: Option<Text>,
    #[serde(default, deserialize_with = "present")]
    raw: Option<Text>,
    #[serde(default, deserialize_with = "present")]
    url: Option<Text>,
    /// Any JSON value, `null` included.
    #[serde(default, deserialize_with = "present")]
    data: Option<IgnoredAny>,
    #[serde(default, deserialize_with = "present")]
    media_type: Option<Text>,
    #[serde(default, deserialize_with = "present")]
    filename: Option<Text>,
    #[serde(default, deserialize_with = "present")]
    metadata: Option<Object>,
}

impl TryFrom<PartFields> for PartIn {
    type Error = &'static str;

    fn try_from(p: PartFields) -> Result<Self, Self::Error> {
        let contents = [
            p.text.is_some(),
            p.raw.is_some(),
            p.url.is_some(),
            p.data.is_some(),
        ];
        match contents.iter().filter(|c| **c).count() {
            1 => Ok(PartIn),
            _ => Err("a part carries exactly one of text, raw, url, data"),
        }
    }
}

/// A field that is there: its value read as `T`, so `null` is refused (the writer leaves an
/// absent field out; it never writes `null`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Like [`present`], and not empty (the writer leaves out empty `artifacts`).
fn non_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Vec<T>>, D::Error> {
    let items = Vec::<T>::deserialize(d)?;
    if items.is_empty() {
        return Err(de::Error::custom(
            "empty, where the writer leaves the field out",
        ));
    }
    Ok(Some(items))
}

/// Any JSON string, not kept.
struct Text;

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Text, E> {
                Ok(Text)
            }
        }
        d.deserialize_str(V)
    }
}

/// Any JSON object, not kept.
struct Object;

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Object;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Object, M::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Object)
            }
        }
        d.deserialize_map(V)
    }
}

/// A value of an enum the dialects spell differently, spelled as the contract writes it.
struct Contract<T>(T);

/// An enum with a contract spelling.
trait Spelled: Copy + 'static {
    const ALL: &'static [Self];
    const EXPECTING: &'static str;
    fn contract_spelling(self) -> &'static str;
}

impl Spelled for TaskState {
    const ALL: &'static [Self] = &TaskState::ALL;
    const EXPECTING: &'static str = "a task state in the contract's spelling";
    fn contract_spelling(self) -> &'static str {
        self.as_str(Dialect::Contract)
    }
}

impl Spelled for Role {
    const ALL: &'static [Self] = &[Role::User, Role::Agent];
    const EXPECTING: &'static str = "a role in the contract's spelling";
    fn contract_spelling(self) -> &'static str {
        self.as_str(Dialect::Contract)
    }
}

impl<'de, T: Spelled> Deserialize<'de> for Contract<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<T: Spelled> Visitor<'_> for V<T> {
            type Value = Contract<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(T::EXPECTING)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Contract<T>, E> {
                T::ALL
                    .iter()
                    .find(|value| value.contract_spelling() == s)
                    .map(|value| Contract(*value))
                    .ok_or_else(|| E::invalid_value(de::Unexpected::Str(s), &self))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::TaskOutline;
    use crate::write::contract;
    use crate::{Task, read};

    /// A Task in the contract dialect with every kind of field the writer writes.
    fn full_task() -> Value {
        json!({
            "id": "t-1",
            "contextId": "c-1",
            "status": {
                "state": "completed",
                "message": {"messageId": "m-2", "role": "agent", "parts": [{"text": "done"}],
                            "taskId": "t-1", "contextId": "c-1", "referenceTaskIds": ["t-0"],
                            "extensions": ["x"], "metadata": {"k": 1}},
                "timestamp": "2026-11-24T00:00:00.000Z"
            },
            "artifacts": [{
                "artifactId": "a-1", "name": "n", "description": "d",
                "parts": [
                    {"text": "hello", "metadata": {}},
                    {"raw": "aGk=", "mediaType": "image/png", "filename": "x.png"},
                    {"url": "https://example.com/f"},
                    {"data": null},
                    {"data": {"deep": [1, 2.5, "three", null]}}
                ],
                "extensions": ["e"], "metadata": {"a": {"b": []}}
            }],
            "history": [{"messageId": "m-1", "role": "user", "parts": [{"text": "hi"}]}],
            "metadata": {"source": "test"}
        })
    }

    /// The claim the proxy relies on: what the outline accepts, the lenient reader reads the
    /// same way, and the writer would write the same JSON back.
    fn assert_passes_unchanged(body: &[u8]) {
        let Some(outline) = TaskOutline::read(body) else {
            return;
        };
        let task: Task = read::from_slice(body).unwrap_or_else(|e| {
            panic!(
                "the outline took what the reader refuses ({e}): {}",
                String::from_utf8_lossy(body)
            )
        });
        let original: Value = serde_json::from_slice(body).expect("JSON");
        let rewritten: Value = serde_json::from_slice(&contract::to_vec(&task)).expect("JSON");
        assert_eq!(original, rewritten, "the writer would change this body");
        assert_eq!(outline.id, task.id);
        assert_eq!(outline.state, task.status.state);
        let has_output =
            !task.artifacts.is_empty() && task.artifacts.iter().all(|a| !a.parts.is_empty());
        assert_eq!(outline.has_output, has_output);
        let explained = task
            .status
            .message
            .as_ref()
            .is_some_and(|m| !m.parts.is_empty());
        assert_eq!(outline.explained, explained);
    }

    #[test]
    fn the_writers_own_output_is_read_as_it_is() {
        let body = serde_json::to_vec(&full_task()).expect("JSON");
        let outline = TaskOutline::read(&body).expect("contract dialect");
        assert_eq!(outline.id, "t-1");
        assert_eq!(outline.state, crate::TaskState::Completed);
        assert!(outline.has_output && outline.explained);
        assert_passes_unchanged(&body);
        let task: Task = read::from_slice(&body).expect("a Task");
        assert!(TaskOutline::read(&contract::to_vec(&task)).is_some());
        let minimal = br#"{"id":"t","status":{"state":"input-required"}}"#;
        let outline = TaskOutline::read(minimal).expect("contract dialect");
        assert!(!outline.has_output && !outline.explained);
    }

    #[test]
    fn other_spellings_and_shapes_take_the_lenient_path() {
        let other: [Value; 12] = [
            json!({"id": "t", "status": {"state": "TASK_STATE_COMPLETED"}}),
            json!({"id": "t", "status": {"state": "cancelled"}}),
            json!({"id": "t", "context_id": "c", "status": {"state": "failed"}}),
            json!({"id": "t", "contextId": null, "status": {"state": "failed"}}),
            json!({"id": "t", "kind": "task", "status": {"state": "failed"}}),
            json!({"id": "t", "status": {"state": "failed"}, "artifacts": []}),
            json!({"id": "t", "status": {"state": "failed", "message":
                {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}}),
            json!({"id": "t", "status": {"state": "failed", "message":
                {"message_id": "m", "role": "agent", "parts": [{"text": "x"}]}}}),
            json!({"id": "t", "status": {"state": "completed"}, "artifacts":
                [{"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}]}),
            json!({"id": "t", "status": {"state": "completed"}, "artifacts":
                [{"artifactId": "a", "parts": [{"text": "x", "url": "u"}]}]}),
            json!({"id": "t", "status": {"state": "completed"}, "artifacts":
                [{"artifactId": "a", "parts": [{"raw": "aGk=", "mimeType": "image/png"}]}]}),
            json!({"id": "t", "status": {"state": "completed"}, "metadata": 7}),
        ];
        for body in other {
            let bytes = serde_json::to_vec(&body).expect("JSON");
            assert!(TaskOutline::read(&bytes).is_none(), "{body}");
        }
        assert!(TaskOutline::read(b"not json").is_none());
        assert!(TaskOutline::read(br#"{"id":"t","id":"u","status":{"state":"failed"}}"#).is_none());
    }

    /// Every object of `value`, by JSON pointer.
    fn objects(value: &Value, at: &str, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                out.push(at.to_owned());
                for (k, v) in map {
                    objects(v, &format!("{at}/{k}"), out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    objects(v, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    /// What a runtime might send instead of the exact contract dialect.
    const MUTATIONS: usize = 10;

    fn mutate(value: &mut Value, object: &str, which: usize, pick: usize) {
        let Some(Value::Object(map)) = value.pointer_mut(object) else {
            return;
        };
        let keys: Vec<String> = map.keys().cloned().collect();
        let key = keys
            .get(pick % keys.len().max(1))
            .cloned()
            .unwrap_or_default();
        match which {
            // A key in snake_case or an older name.
            0 => {
                if let Some(v) = map.remove(&key) {
                    let renamed = match key.as_str() {
                        "mediaType" => "mimeType".to_owned(),
                        "parts" => "content".to_owned(),
                        k => k.chars().fold(String::new(), |mut s, c| {
                            if c.is_ascii_uppercase() {
                                s.push('_');
                            }
                            s.push(c.to_ascii_lowercase());
                            s
                        }),
                    };
                    map.insert(renamed, v);
                }
            }
            1 => {
                map.insert(key, Value::Null);
            }
            2 => {
                map.insert("kind".into(), json!("text"));
            }
            3 => {
                map.insert(key, json!([]));
            }
            4 => {
                map.insert(key, json!(7));
            }
            5 => {
                map.insert(key, json!({}));
            }
            6 => {
                map.insert("text".into(), json!("more"));
            }
            7 => {
                map.remove(&key);
            }
            8 => {
                if let Some(Value::String(s)) = map.get_mut(&key) {
                    *s = s.to_ascii_uppercase();
                }
            }
            _ => {
                map.insert(key, json!("TASK_STATE_FAILED"));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        #[test]
        fn whatever_the_outline_accepts_passes_unchanged(
            edits in prop::collection::vec(
                (any::<prop::sample::Index>(), 0..MUTATIONS, any::<usize>()),
                0..4,
            ),
        ) {
            let mut task = full_task();
            for (object, which, pick) in edits {
                let mut found = Vec::new();
                objects(&task, "", &mut found);
                let at = object.get(&found).clone();
                mutate(&mut task, &at, which, pick);
            }
            assert_passes_unchanged(&serde_json::to_vec(&task).expect("JSON"));
        }
    }
}
