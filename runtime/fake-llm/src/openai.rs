//! The OpenAI chat completions face of the fake.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{Reply, State, tokens};

/// Top-level parameters the API accepts; anything else is refused like the real API does.
const KNOWN: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "stream",
    "stream_options",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "response_format",
    "n",
    "user",
    "parallel_tool_calls",
    "logprobs",
    "reasoning_effort",
];

fn error(status: StatusCode, message: &str, kind: &str, param: Option<&str>) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "param": param, "code": null}});
    (status, Json(body)).into_response()
}

fn invalid(message: &str, param: Option<&str>) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        message,
        "invalid_request_error",
        param,
    )
}

pub(super) async fn models(Extract(state): Extract<Arc<State>>, headers: HeaderMap) -> Response {
    if !authorized(&state, &headers) {
        return error(
            StatusCode::UNAUTHORIZED,
            "Incorrect API key provided",
            "invalid_request_error",
            None,
        );
    }
    let data: Vec<Value> = state
        .models
        .iter()
        .map(|m| json!({"id": m, "object": "model", "owned_by": "fake"}))
        .collect();
    Json(json!({"object": "list", "data": data})).into_response()
}

fn authorized(state: &State, headers: &HeaderMap) -> bool {
    headers.get(header::AUTHORIZATION).is_some() && state.accepts(headers)
}

pub(super) async fn chat(
    Extract(state): Extract<Arc<State>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return invalid("We could not parse the JSON body of your request.", None);
    };
    if !authorized(&state, &headers) {
        state.record(
            "/v1/chat/completions",
            &headers,
            &body,
            Some("unauthorized".into()),
        );
        return error(
            StatusCode::UNAUTHORIZED,
            "Incorrect API key provided",
            "invalid_request_error",
            None,
        );
    }
    if let Err((message, param)) = validate(&body, &state.models) {
        state.record(
            "/v1/chat/completions",
            &headers,
            &body,
            Some(message.clone()),
        );
        return invalid(&message, param.as_deref());
    }
    state.record("/v1/chat/completions", &headers, &body, None);
    let Some(mut reply) = state.next_reply(&body) else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the fake's script is empty",
            "server_error",
            None,
        );
    };
    while let Reply::Delayed(d, inner) = reply {
        tokio::time::sleep(d).await;
        reply = *inner;
    }
    let prompt = tokens(&body["messages"].to_string());
    let stream = body["stream"].as_bool().unwrap_or(false);
    match reply {
        Reply::Error {
            status,
            retry_after,
        } => {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = error(code, &format!("scripted {status}"), "server_error", None);
            if let Some(value) = retry_after {
                response.headers_mut().insert(
                    header::RETRY_AFTER,
                    value.parse().expect("a valid header value"),
                );
            }
            response
        }
        Reply::Paused {
            before,
            after,
            gate,
        } if stream => paused_sse(&before, &after, gate, prompt),
        Reply::Paused {
            before,
            after,
            gate,
        } => {
            gate.passed().await;
            let text = before + &after;
            Json(completion(
                &json!({"role": "assistant", "content": text}),
                "stop",
                prompt,
                tokens(&text),
            ))
            .into_response()
        }
        Reply::Trickled { text, every } if stream => {
            let mut frames: Vec<String> = text_chunks(&text, prompt)
                .iter()
                .map(|c| format!("data: {c}\n\n"))
                .collect();
            frames.push("data: [DONE]\n\n".to_owned());
            crate::trickled(frames, every)
        }
        Reply::Trickled { text, every } => {
            tokio::time::sleep(crate::trickle_time(&text, every)).await;
            text_completion(&text, prompt)
        }
        Reply::Text(text) if stream => sse(text_chunks(&text, prompt)),
        Reply::Text(text) => text_completion(&text, prompt),
        Reply::ToolCalls(calls) if stream => sse(tool_chunks(&calls, prompt)),
        Reply::ToolCalls(calls) => {
            let tool_calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, args))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
                .collect();
            Json(completion(
                &json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
                "tool_calls",
                prompt,
                5,
            ))
            .into_response()
        }
        Reply::Delayed(..) => unreachable!("delays are unwrapped above"),
    }
}

/// A whole text answer, not streamed.
fn text_completion(text: &str, prompt: u64) -> Response {
    Json(completion(
        &json!({"role": "assistant", "content": text}),
        "stop",
        prompt,
        tokens(text),
    ))
    .into_response()
}

fn completion(message: &Value, finish: &str, prompt: u64, completion: u64) -> Value {
    json!({
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                  "prompt_tokens_details": {"cached_tokens": 0}}
    })
}

fn chunk(delta: &Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn usage_chunk(prompt: u64, completion: u64) -> Value {
    json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "choices": [],
           "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
}

fn text_chunks(text: &str, prompt: u64) -> Vec<Value> {
    let mut out = vec![chunk(&json!({"role": "assistant", "content": ""}), None)];
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    for piece in words.chunks(2) {
        out.push(chunk(&json!({"content": piece.concat()}), None));
    }
    out.push(chunk(&json!({}), Some("stop")));
    out.push(usage_chunk(prompt, tokens(text)));
    out
}

fn tool_chunks(calls: &[(String, Value)], prompt: u64) -> Vec<Value> {
    let mut out = vec![chunk(&json!({"role": "assistant", "content": null}), None)];
    for (i, (name, args)) in calls.iter().enumerate() {
        let args = args.to_string();
        let (head, tail) = args.split_at(args.len() / 2);
        out.push(chunk(&json!({"tool_calls": [{"index": i, "id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": head}}]}), None));
        out.push(chunk(
            &json!({"tool_calls": [{"index": i, "function": {"arguments": tail}}]}),
            None,
        ));
    }
    out.push(chunk(&json!({}), Some("tool_calls")));
    out.push(usage_chunk(prompt, 5));
    out
}

/// `before` streamed at once, then, once `gate` opens, `after` and the end of the stream.
fn paused_sse(before: &str, after: &str, gate: crate::Gate, prompt: u64) -> Response {
    let whole = format!("{before}{after}");
    let mut first = text_chunks(before, prompt);
    // Keep the role chunk and the text; the end goes after the pause.
    first.truncate(first.len() - 2);
    let mut rest = text_chunks(after, prompt);
    rest.remove(0);
    if let Some(usage) = rest.last_mut() {
        *usage = usage_chunk(prompt, tokens(&whole));
    }
    let frame = |chunks: Vec<Value>| {
        let mut body = String::new();
        for c in chunks {
            body.push_str("data: ");
            body.push_str(&c.to_string());
            body.push_str("\n\n");
        }
        body
    };
    crate::held_at(frame(first), gate, frame(rest) + "data: [DONE]\n\n")
}

fn sse(chunks: Vec<Value>) -> Response {
    let mut body = String::new();
    for c in chunks {
        body.push_str("data: ");
        body.push_str(&c.to_string());
        body.push_str("\n\n");
    }
    body.push_str("data: [DONE]\n\n");
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

type Invalid = (String, Option<String>);

fn bad(message: impl Into<String>, param: &str) -> Invalid {
    (message.into(), Some(param.to_owned()))
}

/// The checks the real API makes, as far as a test can observe them.
fn validate(body: &Value, models: &[String]) -> Result<(), Invalid> {
    let object = body
        .as_object()
        .ok_or_else(|| bad("the body must be an object", ""))?;
    for key in object.keys() {
        if !KNOWN.contains(&key.as_str()) {
            return Err(bad(
                format!("Unrecognized request argument supplied: {key}"),
                key,
            ));
        }
    }
    let model = body["model"]
        .as_str()
        .ok_or_else(|| bad("you must provide a model parameter", "model"))?;
    if !models.iter().any(|m| m == model) {
        return Err(bad(
            format!("The model `{model}` does not exist or you do not have access to it."),
            "model",
        ));
    }
    let messages = body["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("messages must be a non-empty array", "messages"))?;
    validate_messages(messages)?;
    validate_tools(body)?;
    validate_options(body)?;
    validate_for_model(body, model)
}

/// Whether `model` is of one of OpenAI's reasoning families (o1, o3, o4, gpt-5 but its chat
/// models).
fn reasons(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let o_series = ["o1", "o3", "o4"]
        .iter()
        .any(|f| m == *f || m.starts_with(&format!("{f}-")));
    o_series || (m.starts_with("gpt-5") && !m.contains("-chat"))
}

/// What the API refuses by model family: reasoning models take no `max_tokens` and no
/// sampling dials (`temperature` only at its default, 1); other models take no
/// `reasoning_effort`.
fn validate_for_model(body: &Value, model: &str) -> Result<(), Invalid> {
    let unsupported = |key: &str| {
        bad(
            format!("Unsupported parameter: '{key}' is not supported with this model."),
            key,
        )
    };
    if !reasons(model) {
        return match body.get("reasoning_effort") {
            Some(_) => Err(unsupported("reasoning_effort")),
            None => Ok(()),
        };
    }
    if body.get("max_tokens").is_some() {
        return Err(bad(
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            "max_tokens",
        ));
    }
    for key in ["top_p", "presence_penalty", "frequency_penalty"] {
        if body.get(key).is_some() {
            return Err(unsupported(key));
        }
    }
    match body.get("temperature") {
        Some(t) if t.as_f64() != Some(1.0) => Err(bad(
            format!(
                "Unsupported value: 'temperature' does not support {t} with this model. Only the default (1) value is supported."
            ),
            "temperature",
        )),
        _ => Ok(()),
    }
}

/// Roles, order, and every tool result answering an earlier call.
fn validate_messages(messages: &[Value]) -> Result<(), Invalid> {
    let mut open_calls: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let role = m["role"]
            .as_str()
            .ok_or_else(|| bad("role is required", &at))?;
        if role != "tool" && !open_calls.is_empty() {
            return Err(bad(
                format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                    open_calls.join(", ")
                ),
                &at,
            ));
        }
        match role {
            "system" | "developer" => {
                m["content"]
                    .as_str()
                    .ok_or_else(|| bad("system content must be a string", &at))?;
            }
            "user" => validate_user_content(&m["content"], &at)?,
            "assistant" => {
                let calls = m.get("tool_calls").and_then(Value::as_array);
                if m.get("content").is_none_or(Value::is_null) && calls.is_none_or(Vec::is_empty) {
                    return Err(bad("an assistant message needs content or tool_calls", &at));
                }
                for (j, call) in calls.into_iter().flatten().enumerate() {
                    let cat = format!("{at}.tool_calls[{j}]");
                    let id = call["id"]
                        .as_str()
                        .ok_or_else(|| bad("tool call id is required", &cat))?;
                    if call["type"] != "function" {
                        return Err(bad("tool call type must be 'function'", &cat));
                    }
                    call["function"]["name"]
                        .as_str()
                        .ok_or_else(|| bad("function.name is required", &cat))?;
                    let args = call["function"]["arguments"]
                        .as_str()
                        .ok_or_else(|| bad("function.arguments must be a string", &cat))?;
                    serde_json::from_str::<Value>(args)
                        .map_err(|_| bad("function.arguments must be JSON", &cat))?;
                    open_calls.push(id.to_owned());
                }
            }
            "tool" => {
                let id = m["tool_call_id"]
                    .as_str()
                    .ok_or_else(|| bad("tool_call_id is required", &at))?;
                let Some(pos) = open_calls.iter().position(|c| c == id) else {
                    return Err(bad(
                        format!(
                            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' ({id})"
                        ),
                        &at,
                    ));
                };
                open_calls.remove(pos);
                m["content"]
                    .as_str()
                    .ok_or_else(|| bad("tool content must be a string", &at))?;
            }
            other => {
                return Err(bad(
                    format!(
                        "Invalid value: '{other}'. Supported values are: 'system', 'assistant', 'user', 'tool', and 'developer'."
                    ),
                    &at,
                ));
            }
        }
    }
    if !open_calls.is_empty() {
        return Err(bad(
            format!(
                "tool_call_ids did not have response messages: {}",
                open_calls.join(", ")
            ),
            "messages",
        ));
    }
    Ok(())
}

/// Tool definitions: functions with safe names and JSON Schema object parameters.
fn validate_tools(body: &Value) -> Result<(), Invalid> {
    if let Some(tools) = body.get("tools") {
        let tools = tools
            .as_array()
            .ok_or_else(|| bad("tools must be an array", "tools"))?;
        for (i, t) in tools.iter().enumerate() {
            let at = format!("tools[{i}]");
            if t["type"] != "function" {
                return Err(bad("tool type must be 'function'", &at));
            }
            let name = t["function"]["name"]
                .as_str()
                .ok_or_else(|| bad("function.name is required", &at))?;
            let name_ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !name_ok {
                return Err(bad(
                    format!(
                        "Invalid 'tools[{i}].function.name': string does not match pattern '^[a-zA-Z0-9_-]+$'"
                    ),
                    &at,
                ));
            }
            let params = &t["function"]["parameters"];
            if !params.is_null() && params["type"] != "object" {
                return Err(bad(
                    "function.parameters must be a JSON Schema object with \"type\": \"object\"",
                    &at,
                ));
            }
        }
    }
    Ok(())
}

/// `tool_choice`, `temperature` and `stream_options`.
fn validate_options(body: &Value) -> Result<(), Invalid> {
    if let Some(effort) = body.get("reasoning_effort")
        && !matches!(effort.as_str(), Some("minimal" | "low" | "medium" | "high"))
    {
        return Err(bad(
            "reasoning_effort must be one of minimal, low, medium, high",
            "reasoning_effort",
        ));
    }
    if let Some(choice) = body.get("tool_choice") {
        let ok = matches!(choice.as_str(), Some("auto" | "none" | "required"))
            || (choice["type"] == "function" && choice["function"]["name"].is_string());
        if !ok {
            return Err(bad(
                "tool_choice must be auto, none, required or a function",
                "tool_choice",
            ));
        }
    }
    if let Some(t) = body.get("temperature") {
        let ok = t.as_f64().is_some_and(|t| (0.0..=2.0).contains(&t));
        if !ok {
            return Err(bad(
                "temperature must be a number between 0 and 2",
                "temperature",
            ));
        }
    }
    if body.get("stream_options").is_some() && body["stream"] != true {
        return Err(bad(
            "stream_options is only allowed when stream is true",
            "stream_options",
        ));
    }
    Ok(())
}

fn validate_user_content(content: &Value, at: &str) -> Result<(), Invalid> {
    match content {
        Value::String(_) => Ok(()),
        Value::Array(parts) if !parts.is_empty() => {
            for (k, p) in parts.iter().enumerate() {
                let pat = format!("{at}.content[{k}]");
                match p["type"].as_str() {
                    Some("text") if p["text"].is_string() => {}
                    Some("image_url") if p["image_url"]["url"].is_string() => {}
                    _ => {
                        return Err(bad(
                            "content parts are {type: text, text} or {type: image_url, image_url: {url}}",
                            &pat,
                        ));
                    }
                }
            }
            Ok(())
        }
        _ => Err(bad(
            "user content must be a string or a non-empty array of parts",
            at,
        )),
    }
}
