//! The Anthropic Messages face of the fake.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State as Extract};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{Reply, State, tokens};
use crate::prompt_cache::PromptTokens;

const KNOWN: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "tools",
    "tool_choice",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "thinking",
    "service_tier",
    "output_config",
];

fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
    )
        .into_response()
}

fn invalid(message: &str) -> Response {
    error(StatusCode::BAD_REQUEST, "invalid_request_error", message)
}

fn authorized(state: &State, headers: &HeaderMap) -> bool {
    headers.get("x-api-key").is_some() && state.accepts(headers)
}

pub(super) async fn model(
    Extract(state): Extract<Arc<State>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if !authorized(&state, &headers) {
        return error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        );
    }
    if state.models.contains(&id) {
        Json(json!({"type": "model", "id": id, "display_name": id})).into_response()
    } else {
        error(
            StatusCode::NOT_FOUND,
            "not_found_error",
            &format!("model: {id}"),
        )
    }
}

pub(super) async fn messages(
    Extract(state): Extract<Arc<State>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return invalid("There was an issue with your request body: not JSON");
    };
    if !authorized(&state, &headers) {
        state.record("/v1/messages", &headers, &body, Some("unauthorized".into()));
        return error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        );
    }
    let checked = if headers.contains_key("anthropic-version") {
        validate(&body, &state.models)
    } else {
        Err("anthropic-version: header is required".to_owned())
    };
    if let Err(message) = checked {
        state.record("/v1/messages", &headers, &body, Some(message.clone()));
        return invalid(&message);
    }
    state.record("/v1/messages", &headers, &body, None);
    let Some(mut reply) = state.next_reply(&body) else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "the fake's script is empty",
        );
    };
    while let Reply::Delayed(d, inner) = reply {
        tokio::time::sleep(d).await;
        reply = *inner;
    }
    if let Reply::Trickled { text, every } = reply {
        tokio::time::sleep(crate::trickle_time(&text, every)).await;
        reply = Reply::Text(text);
    }
    let prompt = state.prompt_cache.cost(&body, tokens);
    let stream = body["stream"].as_bool().unwrap_or(false);
    if let Reply::Paused {
        before,
        after,
        gate,
    } = reply
    {
        if stream {
            let output = tokens(&before) + tokens(&after);
            return paused_sse(&before, &after, gate, &usage(prompt, output));
        }
        gate.passed().await;
        reply = Reply::Text(before + &after);
    }
    let (content, stop, output) = match reply {
        Reply::Error {
            status,
            retry_after,
        } => {
            let kind = match status {
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = error(code, kind, &format!("scripted {status}"));
            if let Some(value) = retry_after {
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    value.parse().expect("a valid header value"),
                );
            }
            return response;
        }
        Reply::Text(text) => {
            let n = tokens(&text);
            (vec![json!({"type": "text", "text": text})], "end_turn", n)
        }
        Reply::ToolCalls(calls) => {
            let blocks = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": args}))
                .collect();
            (blocks, "tool_use", 5)
        }
        Reply::Delayed(..) | Reply::Paused { .. } | Reply::Trickled { .. } => {
            unreachable!("delays and pauses are unwrapped above")
        }
    };
    let usage = usage(prompt, output);
    if stream {
        sse(&content, stop, &usage)
    } else {
        Json(json!({"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"], "content": content,
                    "stop_reason": stop, "stop_sequence": null, "usage": usage}))
        .into_response()
    }
}

/// What a reply cost, as the API reports it: the prompt as the cache made it, and the output.
fn usage(prompt: PromptTokens, output: u64) -> Value {
    json!({"input_tokens": prompt.input, "output_tokens": output,
           "cache_creation_input_tokens": prompt.cache_write,
           "cache_read_input_tokens": prompt.cache_read})
}

type Event = (&'static str, Value);

fn message_start(usage: &Value) -> Event {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant", "content": [],
               "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1,
                         "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
                         "cache_read_input_tokens": usage["cache_read_input_tokens"]}}}),
    )
}

fn text_block_start(i: usize) -> Event {
    (
        "content_block_start",
        json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
    )
}

/// `text` as deltas of block `i`, two words each.
fn text_deltas(i: usize, text: &str) -> Vec<Event> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    words
        .chunks(2)
        .map(|piece| {
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": piece.concat()}}),
            )
        })
        .collect()
}

/// The end of a message: its block closed, the stop reason and usage, the stop.
fn message_end(i: usize, stop: &str, usage: &Value) -> Vec<Event> {
    vec![
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": usage["output_tokens"]}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

fn frame(events: Vec<Event>) -> String {
    let mut body = String::new();
    for (name, data) in events {
        let _ = write!(body, "event: {name}\ndata: {data}\n\n");
    }
    body
}

/// A streamed text answer that stops after `before` until `gate` opens.
fn paused_sse(before: &str, after: &str, gate: crate::Gate, usage: &Value) -> Response {
    let mut head = vec![message_start(usage), text_block_start(0)];
    head.extend(text_deltas(0, before));
    let mut tail = text_deltas(0, after);
    tail.extend(message_end(0, "end_turn", usage));
    crate::held_at(frame(head), gate, frame(tail))
}

fn sse(content: &[Value], stop: &str, usage: &Value) -> Response {
    let mut events: Vec<Event> = vec![message_start(usage)];
    for (i, block) in content.iter().enumerate() {
        if block["type"] == "text" {
            events.push(text_block_start(i));
            events.extend(text_deltas(i, block["text"].as_str().unwrap_or_default()));
        } else {
            events.push(("content_block_start", json!({"type": "content_block_start", "index": i,
                "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})));
            let input = block["input"].to_string();
            let (head, tail) = input.split_at(input.len() / 2);
            for part in [head, tail] {
                events.push(("content_block_delta", json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": part}})));
            }
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        ));
    }
    let mut end = message_end(0, stop, usage);
    end.remove(0);
    events.extend(end);
    ([(header::CONTENT_TYPE, "text/event-stream")], frame(events)).into_response()
}

/// The checks the real API makes, as far as a test can observe them.
fn validate(body: &Value, models: &[String]) -> Result<(), String> {
    let object = body.as_object().ok_or("the body must be an object")?;
    if let Some(key) = object.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(format!("{key}: Extra inputs are not permitted"));
    }
    let model = body["model"].as_str().ok_or("model: Field required")?;
    if !models.iter().any(|m| m == model) {
        return Err(format!("model: {model}"));
    }
    if body["max_tokens"].as_u64().is_none_or(|n| n == 0) {
        return Err("max_tokens: Field required".to_owned());
    }
    if let Some(t) = body.get("temperature")
        && !t.as_f64().is_some_and(|t| (0.0..=1.0).contains(&t))
    {
        return Err("temperature: Input should be less than or equal to 1".to_owned());
    }
    if let Some(system) = body.get("system") {
        let ok = system.is_string()
            || system.as_array().is_some_and(|blocks| {
                blocks
                    .iter()
                    .all(|b| b["type"] == "text" && b["text"].is_string())
            });
        if !ok {
            return Err("system: must be a string or a list of text blocks".to_owned());
        }
    }
    if let Some(config) = body.get("output_config") {
        let effort = config["effort"].as_str();
        if !matches!(effort, Some("low" | "medium" | "high" | "xhigh" | "max")) {
            return Err(
                "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"
                    .to_owned(),
            );
        }
    }
    crate::prompt_cache::validate(body)?;
    validate_messages(
        body["messages"]
            .as_array()
            .filter(|m| !m.is_empty())
            .ok_or("messages: Field required")?,
    )?;
    for (i, tool) in body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = tool["name"]
            .as_str()
            .ok_or(format!("tools.{i}.name: Field required"))?;
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(format!(
                "tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            ));
        }
        if tool["input_schema"]["type"] != "object" {
            return Err(format!(
                "tools.{i}.input_schema.type: Input should be 'object'"
            ));
        }
    }
    Ok(())
}

fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(items) => items.clone(),
        _ => Vec::new(),
    }
}

fn validate_messages(messages: &[Value]) -> Result<(), String> {
    let mut expected = "user";
    let mut open_tool_uses: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"]
            .as_str()
            .ok_or(format!("messages.{i}.role: Field required"))?;
        if role != expected {
            return Err(format!(
                "messages: roles must alternate between \"user\" and \"assistant\", but found multiple \"{role}\" roles in a row (messages.{i})"
            ));
        }
        let content = blocks(&m["content"]);
        if content.is_empty() {
            return Err(format!(
                "messages.{i}: all messages must have non-empty content"
            ));
        }
        if role == "user" {
            let answered: Vec<String> = content
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .filter_map(|b| b["tool_use_id"].as_str().map(str::to_owned))
                .collect();
            for id in &answered {
                if !open_tool_uses.contains(id) {
                    return Err(format!(
                        "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                    ));
                }
            }
            if let Some(missing) = open_tool_uses.iter().find(|id| !answered.contains(id)) {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}"
                ));
            }
            open_tool_uses.clear();
        }
        for (j, block) in content.iter().enumerate() {
            let at = format!("messages.{i}.content.{j}");
            match (role, block["type"].as_str()) {
                ("user" | "assistant", Some("text")) if block["text"].is_string() => {}
                ("user", Some("image")) if block["source"]["type"].is_string() => {}
                ("user", Some("tool_result")) if block["tool_use_id"].is_string() => {}
                ("assistant", Some("tool_use")) => {
                    let id = block["id"]
                        .as_str()
                        .ok_or(format!("{at}.id: Field required"))?;
                    block["name"]
                        .as_str()
                        .ok_or(format!("{at}.name: Field required"))?;
                    if !block["input"].is_object() {
                        return Err(format!("{at}.input: Input should be a valid dictionary"));
                    }
                    open_tool_uses.push(id.to_owned());
                }
                (_, kind) => {
                    return Err(format!(
                        "{at}: a {role} message cannot hold a {kind:?} block"
                    ));
                }
            }
        }
        expected = if role == "user" { "assistant" } else { "user" };
    }
    if !open_tool_uses.is_empty() {
        return Err(format!(
            "messages: `tool_use` ids were found without `tool_result` blocks immediately after: {}",
            open_tool_uses.join(", ")
        ));
    }
    Ok(())
}
