//! The Anthropic face's prompt cache, as the API keeps it: a request's blocks are read in order
//! (tools, then system, then messages); each block carrying `cache_control` is a breakpoint
//! that caches everything up to it. A later request whose prefix up to a breakpoint matches a
//! cached one reads those tokens from the cache; the rest up to its last breakpoint is written.
//! Usage reports them as `cache_read_input_tokens` and `cache_creation_input_tokens`, and
//! `input_tokens` counts only what was neither.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use serde_json::Value;

/// The most breakpoints a request may set.
pub(crate) const MAX_BREAKPOINTS: usize = 4;

/// Prefixes cached so far, by hash.
#[derive(Debug, Default)]
pub(crate) struct PromptCache(Mutex<HashSet<u64>>);

/// What a request's prompt cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PromptTokens {
    pub(crate) input: u64,
    pub(crate) cache_read: u64,
    pub(crate) cache_write: u64,
}

/// The request's blocks in cache order, each without its `cache_control`, and whether it had
/// one.
fn blocks(body: &Value) -> Vec<(Value, bool)> {
    let mut out = Vec::new();
    let mut push = |block: &Value| {
        let mut bare = block.clone();
        let marked = bare
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        out.push((bare, marked));
    };
    for tool in body["tools"].as_array().into_iter().flatten() {
        push(tool);
    }
    match &body["system"] {
        Value::Array(system) => system.iter().for_each(&mut push),
        Value::String(text) => push(&Value::String(text.clone())),
        _ => {}
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        match &message["content"] {
            Value::Array(content) => content.iter().for_each(&mut push),
            other => push(other),
        }
    }
    out
}

/// Checks the request's `cache_control` blocks as the API does.
pub(crate) fn validate(body: &Value) -> Result<(), String> {
    let mut marked = 0;
    let mut check = |block: &Value, at: String| -> Result<(), String> {
        let Some(control) = block.get("cache_control") else {
            return Ok(());
        };
        marked += 1;
        if control["type"] != "ephemeral" {
            return Err(format!(
                "{at}.cache_control.type: Input should be 'ephemeral'"
            ));
        }
        if let Some(ttl) = control.get("ttl")
            && !matches!(ttl.as_str(), Some("5m" | "1h"))
        {
            return Err(format!(
                "{at}.cache_control.ttl: Input should be '5m' or '1h'"
            ));
        }
        Ok(())
    };
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        check(tool, format!("tools.{i}"))?;
    }
    for (i, block) in body["system"].as_array().into_iter().flatten().enumerate() {
        check(block, format!("system.{i}"))?;
    }
    for (i, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (j, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            check(block, format!("messages.{i}.content.{j}"))?;
        }
    }
    if marked > MAX_BREAKPOINTS {
        return Err(format!(
            "A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marked}."
        ));
    }
    Ok(())
}

impl PromptCache {
    /// What `body`'s prompt costs now, counting tokens with `tokens`; its breakpoints are
    /// cached from here on.
    pub(crate) fn cost(&self, body: &Value, tokens: impl Fn(&str) -> u64) -> PromptTokens {
        let mut hasher = DefaultHasher::new();
        let mut so_far = 0;
        let mut breakpoints = Vec::new();
        for (block, marked) in blocks(body) {
            let text = block.to_string();
            text.hash(&mut hasher);
            so_far += tokens(&text);
            if marked {
                breakpoints.push((hasher.finish(), so_far));
            }
        }
        let total = so_far.max(1);
        let mut cached = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let read = breakpoints
            .iter()
            .rev()
            .find(|(hash, _)| cached.contains(hash))
            .map_or(0, |(_, n)| *n);
        let last = breakpoints.last().map_or(0, |(_, n)| *n);
        cached.extend(breakpoints.iter().map(|(hash, _)| *hash));
        let write = last.saturating_sub(read);
        PromptTokens {
            input: total.saturating_sub(read + write).max(1),
            cache_read: read,
            cache_write: write,
        }
    }
}
