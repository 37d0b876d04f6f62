//! The OpenAI client's wire: requests built, answers and streams read.

use super::*;

#[test]
fn tool_call_deltas_are_reassembled_by_index() {
    let mut a = StreamAssembler::default();
    let chunks = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"check."}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"fixture__add","arguments":"{\"a\":"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"fixture__echo","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"2,\"b\":3}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"text\":\"hi\"}"}}]},"finish_reason":"tool_calls"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":5}}}"#,
    ];
    let deltas: Vec<String> = chunks
        .iter()
        .filter_map(|c| match a.add(c).unwrap() {
            Step::Delta(text) => Some(text),
            Step::Continue | Step::Stop => None,
        })
        .collect();
    assert_eq!(deltas, ["Let me ", "check."]);
    let r = a.finish().unwrap();
    assert_eq!(r.text.as_deref(), Some("Let me check."));
    assert_eq!(r.stop_reason, StopReason::ToolUse);
    assert_eq!(
        r.tool_calls[0],
        ToolCall {
            id: "call_1".into(),
            name: "fixture__add".into(),
            arguments: serde_json::json!({"a": 2, "b": 3})
        }
    );
    assert_eq!(r.tool_calls[1].arguments, serde_json::json!({"text": "hi"}));
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 11,
            output_tokens: 7,
            cache_read_tokens: 4,
            cache_write_tokens: 0,
            reasoning_tokens: 5
        }
    );
}

fn asking(sampling: Sampling) -> ChatRequest {
    ChatRequest {
        sampling,
        ..ChatRequest::saying("gpt-x", "hi")
    }
}

#[test]
fn sampling_is_spelled_as_chat_completions_takes_it() {
    let format = serde_json::json!({"type": "json_object"});
    let every = Sampling {
        temperature: Some(0.5),
        top_p: Some(0.9),
        top_k: Some(40),
        max_tokens: Some(100),
        stop: vec!["END".into()],
        seed: Some(-1),
        presence_penalty: Some(0.1),
        frequency_penalty: Some(0.2),
        response_format: format.as_object().cloned(),
        tool_choice: Some(ToolChoice::Tool("s__t".into())),
        effort: Some(Effort::Max),
    };
    let body = to_wire(&asking(every), OpenAiDialect::Compatible);
    for (key, value) in [
        ("temperature", serde_json::json!(0.5)),
        ("top_p", serde_json::json!(0.9)),
        ("top_k", serde_json::json!(40)),
        ("max_tokens", serde_json::json!(100)),
        ("stop", serde_json::json!(["END"])),
        ("seed", serde_json::json!(-1)),
        ("presence_penalty", serde_json::json!(0.1)),
        ("frequency_penalty", serde_json::json!(0.2)),
        ("response_format", format),
        (
            "tool_choice",
            serde_json::json!({"type": "function", "function": {"name": "s__t"}}),
        ),
        ("reasoning_effort", serde_json::json!("high")),
    ] {
        assert_eq!(body[key], value, "{key}");
    }
    for (choice, wire) in [
        (ToolChoice::Auto, "auto"),
        (ToolChoice::None, "none"),
        (ToolChoice::Required, "required"),
    ] {
        let asked = asking(Sampling {
            tool_choice: Some(choice),
            effort: Some(Effort::Low),
            ..Sampling::default()
        });
        let body = to_wire(&asked, OpenAiDialect::Compatible);
        assert_eq!(body["tool_choice"], wire);
        assert_eq!(body["reasoning_effort"], "low");
    }
    let bare = to_wire(&asking(Sampling::default()), OpenAiDialect::Compatible);
    let keys: Vec<&String> = bare.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["messages", "model"], "nothing unset is sent");
}

#[test]
fn the_output_budget_is_spelled_per_dialect() {
    let asked = asking(Sampling {
        max_tokens: Some(100),
        ..Sampling::default()
    });
    let own = to_wire(&asked, OpenAiDialect::Openai);
    assert_eq!(own["max_completion_tokens"], 100);
    assert!(
        own.get("max_tokens").is_none(),
        "reasoning models refuse it"
    );
    let compatible = to_wire(&asked, OpenAiDialect::Compatible);
    assert_eq!(compatible["max_tokens"], 100);
    assert!(compatible.get("max_completion_tokens").is_none());
}

#[test]
fn requests_carry_tools_results_images_and_params() {
    let request = ChatRequest {
        model: "gpt-x".into(),
        system: Some("be brief".into()),
        messages: vec![
            ChatMessage::User {
                content: vec![
                    Content::Text {
                        text: "look".into(),
                    },
                    Content::Image {
                        media_type: "image/png".into(),
                        data: "AAAA".into(),
                    },
                ],
            },
            ChatMessage::Assistant {
                text: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "s__t".into(),
                    arguments: serde_json::json!({"q": 1}),
                }],
            },
            ChatMessage::Tool {
                call_id: "c1".into(),
                content: "42".into(),
                is_error: false,
            },
        ],
        tools: vec![super::super::ToolSpec {
            name: "s__t".into(),
            description: "d".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }],
        sampling: Sampling {
            temperature: Some(0.2),
            ..Sampling::default()
        },
        stream: true,
        caller: crate::platform::bearer::Bearer::default(),
        extra: serde_json::Map::new(),
    };
    let body = to_wire(&request, OpenAiDialect::Compatible);
    assert_eq!(
        body["messages"][0],
        serde_json::json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(
        body["messages"][1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"q\":1}"
    );
    assert!(body["messages"][2].get("content").is_none());
    assert_eq!(
        body["messages"][3],
        serde_json::json!({"role": "tool", "content": "42", "tool_call_id": "c1"})
    );
    assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
    assert_eq!(body["temperature"], 0.2);
    assert_eq!(body["stream_options"]["include_usage"], true);
}
