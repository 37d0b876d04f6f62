//! Properties over generated inputs: the lenient request reader, the subject-token function,
//! URL redaction and the duration parser never panic and always give a typed answer.
//! `PROPTEST_CASES` raises the case count for a deeper run.

use daedalus_contract::container::parse_duration;
use daedalus_contract::redact::{redact_text, redact_url};
use daedalus_contract::token::{MAX_TOKEN_LEN, is_token, token};
use daedalus_contract::{ReadError, SendMessageRequest, read};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Any JSON value, a few levels deep, with the keys a request uses showing up often.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("message".to_owned()),
        Just("messageId".to_owned()),
        Just("message_id".to_owned()),
        Just("taskId".to_owned()),
        Just("contextId".to_owned()),
        Just("role".to_owned()),
        Just("parts".to_owned()),
        Just("text".to_owned()),
        Just("kind".to_owned()),
        Just("file".to_owned()),
        Just("raw".to_owned()),
        Just("data".to_owned()),
        Just("url".to_owned()),
        Just("mediaType".to_owned()),
        Just("configuration".to_owned()),
        Just("historyLength".to_owned()),
        Just("metadata".to_owned()),
        ".{0,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("user".to_owned()),
            Just("ROLE_USER".to_owned()),
            Just("agent".to_owned()),
            ".{0,40}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid request with one field replaced by a generated value.
fn mutated_request() -> impl Strategy<Value = Value> {
    let paths = prop_oneof![
        Just(vec!["message"]),
        Just(vec!["message", "messageId"]),
        Just(vec!["message", "role"]),
        Just(vec!["message", "parts"]),
        Just(vec!["message", "taskId"]),
        Just(vec!["message", "contextId"]),
        Just(vec!["configuration"]),
        Just(vec!["configuration", "historyLength"]),
        Just(vec!["metadata"]),
    ];
    (paths, json_value()).prop_map(|(path, value)| {
        let mut request = json!({
            "message": {"messageId": "m", "role": "user", "parts": [{"text": "hi"}]},
            "configuration": {"historyLength": 2}
        });
        let mut at = &mut request;
        for key in &path[..path.len() - 1] {
            at = &mut at[*key];
        }
        at[path[path.len() - 1]] = value;
        request
    })
}

proptest! {
    #[test]
    fn the_reader_answers_any_bytes_with_a_request_or_a_typed_error(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        match read::from_slice::<SendMessageRequest>(&bytes) {
            Ok(_) | Err(ReadError::Syntax { .. } | ReadError::Shape { .. }) => {}
        }
    }

    #[test]
    fn the_reader_answers_any_json_with_a_request_or_a_shape_error(value in json_value()) {
        let bytes = serde_json::to_vec(&value).expect("JSON");
        match read::from_slice::<SendMessageRequest>(&bytes) {
            Ok(_) | Err(ReadError::Shape { .. }) => {}
            Err(e @ ReadError::Syntax { .. }) => prop_assert!(false, "valid JSON read as a syntax error: {e}"),
        }
    }

    #[test]
    fn a_mutated_request_is_read_or_refused_naming_a_path(request in mutated_request()) {
        let bytes = serde_json::to_vec(&request).expect("JSON");
        if let Err(e) = read::from_slice::<SendMessageRequest>(&bytes) {
            match e {
                ReadError::Shape { path, .. } => prop_assert!(!path.is_empty()),
                ReadError::Syntax { .. } => prop_assert!(false, "valid JSON read as a syntax error"),
            }
        }
    }

    #[test]
    fn every_token_is_a_bounded_subject_token(id in ".{0,300}") {
        let t = token(&id);
        prop_assert!(is_token(&t, MAX_TOKEN_LEN), "{id:?} -> {t:?}");
    }

    #[test]
    fn different_ids_have_different_tokens(a in ".{0,200}", b in ".{0,200}") {
        prop_assume!(a != b);
        prop_assert_ne!(token(&a), token(&b));
    }

    #[test]
    fn redaction_never_shows_the_userinfo_or_the_query(
        user in "[a-z]{1,8}",
        secret in "[A-Za-z0-9]{12,20}",
        host in "[a-z]{1,10}(\\.[a-z]{2,5})?",
        path in "(/[a-z]{0,6}){0,3}",
        before in "[ a-z:(]{0,10}",
    ) {
        let url = format!("https://{user}:{secret}@{host}{path}?key={secret}");
        prop_assert!(!redact_url(&url).contains(&secret));
        let text = format!("{before}{url} failed");
        prop_assert!(!redact_text(&text).contains(&secret), "{}", redact_text(&text));
    }

    #[test]
    fn durations_parse_or_refuse_without_panicking(input in "[0-9.]{0,25}(ms|s|m|h|hrs|x)?([0-9.]{0,25}(ms|s|m|h))*") {
        let _ = parse_duration(&input);
    }
}
