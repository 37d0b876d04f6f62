//! Properties of the `agents.yaml` parser over generated documents: any text, and trees built
//! from the file's own keys with values of every type, give a deployment or a typed error that
//! names the file; never a panic. `PROPTEST_CASES` raises the case count for a deeper run.

use daedalus_runtime::config::deployment::{Deployment, DeploymentError};
use proptest::prelude::*;
use serde_json::Value;

const FILE: &str = "agents.yaml";

/// Keys of the deployment file, and some that are not.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("agents".to_owned()),
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("default_model".to_owned()),
        Just("model".to_owned()),
        Just("instruction".to_owned()),
        Just("servers".to_owned()),
        Just("depends_on".to_owned()),
        Just("port".to_owned()),
        Just("registry_port".to_owned()),
        Just("request_params".to_owned()),
        Just("temperature".to_owned()),
        Just("max_iterations".to_owned()),
        Just("instance_scope".to_owned()),
        Just("mcp".to_owned()),
        Just("url".to_owned()),
        Just("headers".to_owned()),
        Just("read_timeout_seconds".to_owned()),
        Just("forward_inbound_auth".to_owned()),
        Just("openai".to_owned()),
        Just("anthropic".to_owned()),
        Just("timeout".to_owned()),
        Just("api_key".to_owned()),
        Just("base_url".to_owned()),
        Just("model_capabilities".to_owned()),
        Just("context_window".to_owned()),
        Just("skills".to_owned()),
        "[a-z_.]{0,10}",
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("openai.gpt-4o".to_owned()),
            Just("passthrough".to_owned()),
            Just("shared".to_owned()),
            Just("${UNSET_VAR}".to_owned()),
            Just("http://127.0.0.1:1/mcp".to_owned()),
            ".{0,30}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 80, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A document most of whose shape is right: agents under `agents`, other keys at the top.
fn document() -> impl Strategy<Value = Value> {
    (
        prop::collection::btree_map("[a-z]{1,4}", value(), 0..4),
        prop::collection::btree_map(key(), value(), 0..5),
    )
        .prop_map(|(agents, top)| {
            let mut doc: serde_json::Map<String, Value> = top.into_iter().collect();
            doc.insert(
                "agents".to_owned(),
                Value::Object(agents.into_iter().collect()),
            );
            Value::Object(doc)
        })
}

fn parse(text: &str) -> Result<Deployment, DeploymentError> {
    Deployment::from_texts(
        FILE,
        &[(FILE.to_owned(), text.to_owned())],
        &|_| None,
        "passthrough",
    )
}

fn names_the_file(e: &DeploymentError) -> bool {
    e.to_string().contains(FILE)
}

proptest! {

    #[test]
    fn any_text_gives_a_deployment_or_an_error_naming_the_file(text in "(.|\n){0,400}") {
        if let Err(e) = parse(&text) {
            prop_assert!(names_the_file(&e), "{e}");
        }
    }

    #[test]
    fn any_tree_of_the_file_s_keys_gives_a_deployment_or_an_error_naming_the_file(doc in document()) {
        // JSON is YAML: the tree goes in as text, the way a file would.
        let text = serde_json::to_string(&doc).expect("JSON");
        if let Err(e) = parse(&text) {
            prop_assert!(names_the_file(&e), "{e}");
        }
    }
}
