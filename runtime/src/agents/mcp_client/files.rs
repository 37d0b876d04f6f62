//! The files in an MCP tool result, as A2A file parts: an embedded resource (its text or blob,
//! named after its URI), a resource link (by URL, named by its name), an image or audio clip
//! (its bytes). The model reads one line about each instead of its bytes.

use std::fmt::Write as _;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use daedalus_contract::{Part, PartContent};
use rmcp::model::{ContentBlock, ResourceContents};

/// A file of a tool result: the part the caller gets, and the line the model reads.
#[derive(Debug, Clone, PartialEq)]
pub struct File {
    pub part: Part,
    pub line: String,
}

fn part(content: PartContent, media_type: Option<&str>, filename: Option<String>) -> Part {
    let mut part = Part::from_content(content);
    part.media_type = media_type.map(str::to_owned);
    part.filename = filename.filter(|f| !f.is_empty());
    part
}

/// The last path segment of a URI (`file:///tmp/report.pdf` is `report.pdf`).
fn name_of(uri: &str) -> Option<String> {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    path.rsplit('/')
        .next()
        .filter(|s| !s.is_empty() && !s.contains(':'))
        .map(str::to_owned)
}

fn said(what: &str, name: Option<&str>, media_type: Option<&str>, bytes: Option<usize>) -> String {
    let mut line = format!("[{what}");
    if let Some(name) = name {
        line.push(' ');
        line.push_str(name);
    }
    let mut about = Vec::new();
    if let Some(t) = media_type {
        about.push(t.to_owned());
    }
    if let Some(n) = bytes {
        about.push(format!("{n} bytes"));
    }
    if !about.is_empty() {
        let _ = write!(line, " ({})", about.join(", "));
    }
    line.push_str(", attached to the answer]");
    line
}

/// An image or audio clip (`what`): its base64 `data`, of `media_type`.
fn clip(what: &str, data: &str, media_type: &str) -> File {
    let bytes = STANDARD.decode(data).map(|b| b.len()).ok();
    File {
        part: part(PartContent::Raw(data.to_owned()), Some(media_type), None),
        line: said(what, None, Some(media_type), bytes),
    }
}

/// The file `block` holds, if it holds one (text, and what is not known yet, is no file).
pub fn file_of(block: &ContentBlock) -> Option<File> {
    let decoded_len = |b64: &str| STANDARD.decode(b64).map(|b| b.len()).ok();
    match block {
        ContentBlock::Image(image) => Some(clip("image", &image.data, &image.mime_type)),
        ContentBlock::Audio(audio) => Some(clip("audio", &audio.data, &audio.mime_type)),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => {
                let name = name_of(uri);
                Some(File {
                    line: said(
                        "file",
                        name.as_deref(),
                        mime_type.as_deref(),
                        Some(text.len()),
                    ),
                    part: part(
                        PartContent::Raw(STANDARD.encode(text)),
                        mime_type.as_deref().or(Some("text/plain")),
                        name,
                    ),
                })
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => {
                let name = name_of(uri);
                Some(File {
                    line: said(
                        "file",
                        name.as_deref(),
                        mime_type.as_deref(),
                        decoded_len(blob),
                    ),
                    part: part(PartContent::Raw(blob.clone()), mime_type.as_deref(), name),
                })
            }
            _ => None,
        },
        ContentBlock::ResourceLink(link) => Some(File {
            line: format!(
                "[a link to {} ({}), attached to the answer]",
                link.name, link.uri
            ),
            part: part(
                PartContent::Url(link.uri.clone()),
                link.mime_type.as_deref(),
                Some(link.name.clone()),
            ),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{EmbeddedResource, Resource};

    use super::*;

    #[test]
    fn embedded_resources_links_and_images_become_file_parts() {
        let text = ContentBlock::Resource(EmbeddedResource::new(
            ResourceContents::TextResourceContents {
                uri: "file:///tmp/report.txt".into(),
                mime_type: Some("text/plain".into()),
                text: "tck".into(),
                meta: None,
            },
        ));
        let file = file_of(&text).unwrap();
        assert_eq!(file.part.content, PartContent::Raw("dGNr".into()));
        assert_eq!(file.part.filename.as_deref(), Some("report.txt"));
        assert_eq!(file.part.media_type.as_deref(), Some("text/plain"));
        assert_eq!(
            file.line,
            "[file report.txt (text/plain, 3 bytes), attached to the answer]"
        );
        let blob = ContentBlock::Resource(EmbeddedResource::new(
            ResourceContents::BlobResourceContents {
                uri: "mem://x/logo.png".into(),
                mime_type: Some("image/png".into()),
                blob: "iVBORw0=".into(),
                meta: None,
            },
        ));
        assert_eq!(
            file_of(&blob).unwrap().part.content,
            PartContent::Raw("iVBORw0=".into())
        );
        let mut linked = Resource::new("https://example.com/out.csv", "out.csv");
        linked.mime_type = Some("text/csv".into());
        let link = ContentBlock::resource_link(linked);
        let file = file_of(&link).unwrap();
        assert_eq!(
            file.part.content,
            PartContent::Url("https://example.com/out.csv".into())
        );
        assert_eq!(file.part.filename.as_deref(), Some("out.csv"));
        assert!(file_of(&ContentBlock::text("hi")).is_none());
    }
}
