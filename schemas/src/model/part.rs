//! `Part`: one piece of message or artifact content.
//!
//! A part carries exactly one of `text`, `raw` (base64), `url` or `data`, plus optional
//! `mediaType`, `filename` and `metadata`. The reader also takes the v0.3 shapes
//! (`{"kind": "file", "file": {"bytes"|"uri", "mimeType", "name"}}`) and snake_case names.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::Metadata;
use crate::write::{Dialect, DialectSerialize};

/// The one content field of a part.
#[derive(Debug, Clone, PartialEq)]
pub enum PartContent {
    /// Plain text.
    Text(String),
    /// File bytes, base64-encoded as on the wire.
    Raw(String),
    /// A URL pointing at the file's content.
    Url(String),
    /// Any structured JSON value.
    Data(Value),
}

/// A piece of content in a message or an artifact.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "PartIn")]
pub struct Part {
    pub content: PartContent,
    pub media_type: Option<String>,
    pub filename: Option<String>,
    pub metadata: Option<Metadata>,
}

impl Part {
    /// A text part with no media type.
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_content(PartContent::Text(text.into()))
    }

    /// A part holding `content` and nothing else.
    pub fn from_content(content: PartContent) -> Self {
        Self {
            content,
            media_type: None,
            filename: None,
            metadata: None,
        }
    }

    /// The text of a text part.
    pub fn as_text(&self) -> Option<&str> {
        match &self.content {
            PartContent::Text(t) => Some(t),
            _ => None,
        }
    }
}

impl Serialize for Part {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.serialize_in(Dialect::Contract, s)
    }
}

/// A v0.3 `file` part's `file` object.
struct V03File<'a>(&'a Part);

impl Serialize for V03File<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match &self.0.content {
            PartContent::Raw(v) => map.serialize_entry("bytes", v)?,
            PartContent::Url(v) => map.serialize_entry("uri", v)?,
            PartContent::Text(_) | PartContent::Data(_) => {}
        }
        if let Some(v) = &self.0.media_type {
            map.serialize_entry("mimeType", v)?;
        }
        if let Some(v) = &self.0.filename {
            map.serialize_entry("name", v)?;
        }
        map.end()
    }
}

impl DialectSerialize for Part {
    fn serialize_in<S: Serializer>(&self, dialect: Dialect, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if dialect == Dialect::A2aV03 {
            match &self.content {
                PartContent::Text(v) => {
                    map.serialize_entry("kind", "text")?;
                    map.serialize_entry("text", v)?;
                }
                PartContent::Raw(_) | PartContent::Url(_) => {
                    map.serialize_entry("kind", "file")?;
                    map.serialize_entry("file", &V03File(self))?;
                }
                PartContent::Data(v) => {
                    map.serialize_entry("kind", "data")?;
                    map.serialize_entry("data", v)?;
                }
            }
            if let Some(v) = &self.metadata {
                map.serialize_entry("metadata", v)?;
            }
            return map.end();
        }
        match &self.content {
            PartContent::Text(v) => map.serialize_entry("text", v)?,
            PartContent::Raw(v) => map.serialize_entry("raw", v)?,
            PartContent::Url(v) => map.serialize_entry("url", v)?,
            PartContent::Data(v) => map.serialize_entry("data", v)?,
        }
        if let Some(v) = &self.media_type {
            map.serialize_entry("mediaType", v)?;
        }
        if let Some(v) = &self.filename {
            map.serialize_entry("filename", v)?;
        }
        if let Some(v) = &self.metadata {
            map.serialize_entry("metadata", v)?;
        }
        map.end()
    }
}

/// Every spelling of a part the reader accepts.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartIn {
    text: Option<String>,
    raw: Option<String>,
    url: Option<String>,
    /// `data` may legitimately be JSON `null`, so presence is tracked separately.
    #[serde(default, deserialize_with = "present")]
    data: Option<Value>,
    /// v0.3: `{"kind": "file", "file": {...}}`.
    file: Option<FileIn>,
    #[serde(alias = "media_type", alias = "mimeType", alias = "mime_type")]
    media_type: Option<String>,
    filename: Option<String>,
    metadata: Option<Metadata>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileIn {
    bytes: Option<String>,
    uri: Option<String>,
    #[serde(alias = "mime_type", alias = "mediaType", alias = "media_type")]
    mime_type: Option<String>,
    name: Option<String>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl TryFrom<PartIn> for Part {
    type Error = String;

    fn try_from(p: PartIn) -> Result<Self, String> {
        let mut media_type = p.media_type;
        let mut filename = p.filename;
        let mut found: Vec<(&str, PartContent)> = Vec::with_capacity(1);
        if let Some(v) = p.text {
            found.push(("text", PartContent::Text(v)));
        }
        if let Some(v) = p.raw {
            found.push(("raw", PartContent::Raw(v)));
        }
        if let Some(v) = p.url {
            found.push(("url", PartContent::Url(v)));
        }
        if let Some(v) = p.data {
            found.push(("data", PartContent::Data(v)));
        }
        if let Some(file) = p.file {
            media_type = media_type.or(file.mime_type);
            filename = filename.or(file.name);
            match (file.bytes, file.uri) {
                (Some(bytes), None) => found.push(("file.bytes", PartContent::Raw(bytes))),
                (None, Some(uri)) => found.push(("file.uri", PartContent::Url(uri))),
                _ => return Err("a file part needs exactly one of file.bytes and file.uri".into()),
            }
        }
        if found.len() != 1 {
            let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "a part must carry exactly one of text, raw, url, data (found {})",
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            ));
        }
        let (_, content) = found.remove(0);
        Ok(Part {
            content,
            media_type,
            filename,
            metadata: p.metadata,
        })
    }
}
