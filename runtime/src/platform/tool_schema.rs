//! The JSON Schema of a typed argument struct as a tool's input `properties`: derived by
//! `schemars`, every subschema inlined, so the properties stand on their own inside another
//! schema (a `$ref` into `$defs` would dangle there).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// The `properties` of `T`'s schema, with no `$ref` left in them.
pub fn properties_of<T: JsonSchema>() -> Map<String, Value> {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let schema = generator.into_root_schema_for::<T>();
    schema
        .as_value()
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::properties_of;

    #[derive(schemars::JsonSchema)]
    #[expect(dead_code, reason = "only its schema is read")]
    struct Outer {
        inner: Option<Vec<Inner>>,
    }

    #[derive(schemars::JsonSchema)]
    #[expect(dead_code, reason = "only its schema is read")]
    struct Inner {
        name: String,
    }

    #[test]
    fn nested_types_are_inlined_not_referenced() {
        let properties = serde_json::Value::Object(properties_of::<Outer>());
        let text = properties.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert!(text.contains(r#""name""#), "{text}");
    }
}
