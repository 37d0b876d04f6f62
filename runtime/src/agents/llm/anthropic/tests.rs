//! The Anthropic client's wire: requests built, answers and streams read.

use super::*;

fn asking(sampling: Sampling) -> ChatRequest {
    ChatRequest {
        sampling,
        ..ChatRequest::saying("claude-x", "hi")
    }
}

#[test]
fn sampling_is_spelled_as_messages_takes_it() {
    let body = to_wire(&asking(Sampling {
        temperature: Some(0.5),
        top_p: Some(0.9),
        top_k: Some(40),
        max_tokens: Some(100),
        stop: vec!["END".into(), "STOP".into()],
        tool_choice: Some(ToolChoice::Tool("s__t".into())),
        effort: Some(Effort::Xhigh),
        ..Sampling::default()
    }));
    for (key, value) in [
        ("temperature", json!(0.5)),
        ("top_p", json!(0.9)),
        ("top_k", json!(40)),
        ("max_tokens", json!(100)),
        ("stop_sequences", json!(["END", "STOP"])),
        ("tool_choice", json!({"type": "tool", "name": "s__t"})),
        ("output_config", json!({"effort": "xhigh"})),
    ] {
        assert_eq!(body[key], value, "{key}");
    }
    for (choice, wire) in [
        (ToolChoice::Auto, json!({"type": "auto"})),
        (ToolChoice::None, json!({"type": "none"})),
        (ToolChoice::Required, json!({"type": "any"})),
    ] {
        let body = to_wire(&asking(Sampling {
            tool_choice: Some(choice),
            ..Sampling::default()
        }));
        assert_eq!(body["tool_choice"], wire);
    }
    // Keys the API does not have never reach it, even set.
    let body = to_wire(&asking(Sampling {
        seed: Some(1),
        presence_penalty: Some(0.1),
        frequency_penalty: Some(0.1),
        response_format: Some(serde_json::Map::new()),
        ..Sampling::default()
    }));
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["max_tokens", "messages", "model"]);
    assert_eq!(
        body["max_tokens"], DEFAULT_MAX_TOKENS,
        "the API requires one"
    );
}

#[test]
fn tool_results_become_one_user_turn_after_the_tool_use() {
    let request = ChatRequest {
        model: "claude-x".into(),
        system: Some("sys".into()),
        messages: vec![
            ChatMessage::User {
                content: vec![Content::Text { text: "hi".into() }],
            },
            ChatMessage::Assistant {
                text: Some("checking".into()),
                tool_calls: vec![
                    ToolCall {
                        id: "t1".into(),
                        name: "a__b".into(),
                        arguments: json!({"x": 1}),
                    },
                    ToolCall {
                        id: "t2".into(),
                        name: "a__c".into(),
                        arguments: json!({}),
                    },
                ],
            },
            ChatMessage::Tool {
                call_id: "t1".into(),
                content: "one".into(),
                is_error: false,
            },
            ChatMessage::Tool {
                call_id: "t2".into(),
                content: "boom".into(),
                is_error: true,
            },
        ],
        tools: Vec::new(),
        sampling: Sampling::default(),
        stream: false,
        caller: crate::platform::bearer::Bearer::default(),
        extra: serde_json::Map::new(),
    };
    let body = to_wire(&request);
    assert_eq!(body["system"][0]["text"], "sys");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "tool_use", "id": "t1", "name": "a__b", "input": {"x": 1}})
    );
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(
        messages[2]["content"][1],
        json!({"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": true,
               "cache_control": {"type": "ephemeral"}}),
        "the newest block is the conversation's cache breakpoint"
    );
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(body["max_tokens"], 4096);
}

#[test]
fn thinking_counts_as_reasoning_tokens_streamed_or_not() {
    let whole: MessageWire = serde_json::from_str(
        r#"{"content":[{"type":"thinking","thinking":"12345678","signature":"s"},{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":9}}"#,
    )
    .unwrap();
    let r = from_message(whole);
    assert_eq!((r.usage.reasoning_tokens, r.usage.output_tokens), (2, 9));
    assert_eq!(r.text.as_deref(), Some("hi"));
    let mut a = StreamAssembler::default();
    for event in [
        r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"1234567890"}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#,
    ] {
        a.add(event).unwrap();
    }
    let r = a.finish().unwrap();
    assert_eq!(r.usage.reasoning_tokens, 3, "10 characters of thinking");
    assert_eq!(r.text.as_deref(), Some("hi"));
}

#[test]
fn a_streamed_message_is_reassembled_with_cache_usage() {
    let events = [
        r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":12,"cache_creation_input_tokens":3,"cache_read_input_tokens":9,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"ping"}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"add."}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"fixture__add","input":{}}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\": 2,"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"b\": 3}"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":25}}"#,
        r#"{"type":"message_stop"}"#,
    ];
    let mut a = StreamAssembler::default();
    let mut deltas = Vec::new();
    for e in events {
        if let Step::Delta(t) = a.add(e).unwrap() {
            deltas.push(t);
        }
    }
    assert_eq!(deltas, ["Let me ", "add."]);
    let r = a.finish().unwrap();
    assert_eq!(r.text.as_deref(), Some("Let me add."));
    assert_eq!(
        r.tool_calls,
        vec![ToolCall {
            id: "toolu_1".into(),
            name: "fixture__add".into(),
            arguments: json!({"a": 2, "b": 3})
        }]
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 12,
            output_tokens: 25,
            cache_read_tokens: 9,
            cache_write_tokens: 3,
            reasoning_tokens: 0
        }
    );
}

#[test]
fn a_stream_error_event_is_an_error() {
    let mut a = StreamAssembler::default();
    let e = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let err = a.add(e).err().unwrap();
    assert!(matches!(err, LlmError::Http { status: 529, .. }), "{err}");
    assert!(err.is_retryable());
}
