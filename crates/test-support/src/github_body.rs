//! Request bodies checked the way GitHub checks them: against the JSON
//! schema of each operation's request body in GitHub's OpenAPI description
//! (types, required fields, enums, `oneOf` / `anyOf` / `allOf` and `$ref`
//! into `components`), refused in GitHub's words.
//!
//! The description is OpenAPI 3.0, whose schemas are JSON Schema draft 4
//! plus `nullable`; `nullable: true` is rewritten as JSON Schema's `null`
//! type before the `jsonschema` crate validates with draft 4. Formats are
//! not checked (GitHub's description names formats such as `uri` loosely).
//!
//! GitHub answers a body its schema refuses with 422 and
//! `{"message": "Invalid request.\n\n<one line per problem>",
//! "documentation_url": <the operation's page>, "status": "422"}`, each
//! line as integrators quote them:
//! - `"title" wasn't supplied.` (a required field is missing),
//! - `For 'properties/body', nil is not a string.` (magit/forge#748 has
//!   `false is not a string or null.`, release-it#1014 `nil is not a string.`),
//! - `For 'items', nil is not a string or object.` (an array's item;
//!   ixxmu/mp_duty#3639, from `PATCH /repos/{o}/{r}/issues/{n}`),
//! - `For 'properties/state', bogus is not a member of ["open", "closed"].`
//!   (a value outside an enum, written unquoted as GitHub does).
//!
//! A line names the schema of the value it is about: `properties/NAME` for
//! an object's field, `items` for an array's item, nothing for the body.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use jsonschema::{Draft, Registry, ValidationError, Validator};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The address the rewritten schemas are registered under (never fetched).
const BASE: &str = "https://api.github.com/openapi.json";

/// The request-body schemas of a description, each validated on first use.
pub struct BodySchemas {
    registry: Registry<'static>,
    validators: Vec<OnceLock<Result<Validator, String>>>,
}

impl BodySchemas {
    /// `bodies` are the request-body schemas (in the order their numbers
    /// name them later); `doc` is the description they `$ref` into.
    pub fn new(doc: &Value, bodies: &[Value]) -> Result<BodySchemas, String> {
        let mut components = doc["components"].clone();
        open_nullable(&mut components);
        let bodies: Vec<Value> = bodies
            .iter()
            .map(|schema| {
                let mut schema = schema.clone();
                open_nullable(&mut schema);
                schema
            })
            .collect();
        let count = bodies.len();
        let resource = Draft::Draft4.create_resource(json!({"components": components, "bodies": bodies}));
        let registry = Registry::new()
            .draft(Draft::Draft4)
            .add(BASE, resource)
            .and_then(|builder| builder.prepare())
            .map_err(|e| format!("GitHub's request-body schemas do not load: {e}"))?;
        Ok(BodySchemas {
            registry,
            validators: (0..count).map(|_| OnceLock::new()).collect(),
        })
    }

    /// GitHub's lines for what is wrong with `body` as request body
    /// `index`; empty when GitHub takes it.
    pub fn problems(&self, index: usize, body: &Value) -> Vec<String> {
        let Some(slot) = self.validators.get(index) else {
            return vec![format!("no request-body schema number {index}")];
        };
        let validator = slot.get_or_init(|| {
            jsonschema::options()
                .with_draft(Draft::Draft4)
                .with_registry(&self.registry)
                .should_validate_formats(false)
                .build(&json!({"$ref": format!("{BASE}#/bodies/{index}")}))
                .map_err(|e| format!("request-body schema {index} does not compile: {e}"))
        });
        match validator {
            Ok(validator) => words(&validator.iter_errors(body).collect::<Vec<_>>()),
            Err(why) => vec![why.clone()],
        }
    }
}

/// OpenAPI 3.0's `nullable: true` as JSON Schema: `null` joins the `type`
/// (and the `enum`, which would refuse it otherwise); a schema without a
/// `type` (a `$ref`, `oneOf`, ...) becomes "it, or null".
fn open_nullable(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(open_nullable),
        Value::Object(map) => {
            map.values_mut().for_each(open_nullable);
            if map.get("nullable") != Some(&Value::Bool(true)) {
                return;
            }
            map.remove("nullable");
            if let Some(Value::Array(options)) = map.get_mut("enum") {
                if !options.contains(&Value::Null) {
                    options.push(Value::Null);
                }
            }
            match map.get_mut("type") {
                Some(Value::String(kind)) => {
                    let kind = std::mem::take(kind);
                    map.insert("type".into(), json!([kind, "null"]));
                }
                Some(_) => {}
                None => {
                    let inner = std::mem::take(map);
                    *value = json!({"anyOf": [Value::Object(inner), {"type": "null"}]});
                }
            }
        }
        _ => {}
    }
}

/// The validator's errors as GitHub's lines: required fields missing from
/// one object are named in one line, as GitHub does.
fn words(errors: &[ValidationError<'_>]) -> Vec<String> {
    let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut lines = Vec::new();
    for error in errors {
        match error.kind() {
            ValidationErrorKind::Required { property } => missing
                .entry(prefix(error))
                .or_default()
                .push(property.as_str().unwrap_or_default().to_owned()),
            _ => lines.push(line(error)),
        }
    }
    for (prefix, mut names) in missing {
        names.sort();
        let verb = if names.len() == 1 { "wasn't" } else { "weren't" };
        lines.push(format!("{prefix}\"{}\" {verb} supplied.", names.join("\", \"")));
    }
    lines
}

/// `For 'properties/NAME', ` or `For 'items', ` for the value `error` is
/// about; nothing for the body itself.
fn prefix(error: &ValidationError<'_>) -> String {
    match error.instance_path().iter().last() {
        Some(LocationSegment::Property(name)) => format!("For 'properties/{name}', "),
        Some(LocationSegment::Index(_)) => "For 'items', ".into(),
        None => String::new(),
    }
}

/// One problem in GitHub's words.
fn line(error: &ValidationError<'_>) -> String {
    let at = prefix(error);
    let value = error.instance();
    match error.kind() {
        ValidationErrorKind::Type { kind } => {
            let kinds: Vec<&str> = match kind {
                TypeKind::Single(one) => vec![one.as_str()],
                TypeKind::Multiple(set) => set.iter().map(|t| t.as_str()).collect(),
            };
            format!("{at}{} is not {}.", inspect(value), types(&kinds))
        }
        ValidationErrorKind::Enum { options } => {
            format!("{at}{} is not a member of {}.", to_s(value), inspect(options))
        }
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            alternatives(&at, value, context)
        }
        ValidationErrorKind::MinItems { limit } => {
            let n = value.as_array().map_or(0, Vec::len);
            format!(
                "{at}{limit} item{} required; only {n} {} supplied.",
                plural(*limit),
                if n == 1 { "was" } else { "were" }
            )
        }
        ValidationErrorKind::MaxLength { limit } => {
            let n = value.as_str().map_or(0, |s| s.chars().count());
            format!(
                "{at}Only {limit} character{} allowed; {n} {} supplied.",
                if *limit == 1 { " is" } else { "s are" },
                if n == 1 { "was" } else { "were" }
            )
        }
        _ => format!("{at}{error}."),
    }
}

/// A value none of `oneOf` / `anyOf`'s schemas takes: when it is of none
/// of their types, the types they take (`nil is not a string or object.`);
/// otherwise what the closest one refuses.
fn alternatives(at: &str, value: &Value, context: &[Vec<ValidationError<'static>>]) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    let mut only_types = true;
    for errors in context {
        for error in errors {
            match error.kind() {
                ValidationErrorKind::Type { kind } if error.instance().as_ref() == value => match kind {
                    TypeKind::Single(one) => kinds.push(one.as_str()),
                    TypeKind::Multiple(set) => kinds.extend(set.iter().map(|t| t.as_str())),
                },
                _ => only_types = false,
            }
        }
    }
    if only_types && !kinds.is_empty() {
        kinds.dedup();
        return format!("{at}{} is not {}.", inspect(value), types(&kinds));
    }
    // The alternative of the right type that comes closest.
    let closest = context
        .iter()
        .filter(|errors| {
            !errors.iter().any(|e| {
                matches!(e.kind(), ValidationErrorKind::Type { .. }) && e.instance().as_ref() == value
            })
        })
        .min_by_key(|errors| errors.len());
    match closest {
        Some(errors) => words(errors).join("\n"),
        None => format!("{at}{} is not {}.", inspect(value), types(&kinds)),
    }
}

/// `a string`, `a string or null`, `an integer, string or null`.
fn types(kinds: &[&str]) -> String {
    let Some((first, rest)) = kinds.split_first() else {
        return "valid".into();
    };
    let article = if first.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    match rest.split_last() {
        None => format!("{article} {first}"),
        Some((last, [])) => format!("{article} {first} or {last}"),
        Some((last, middle)) => format!("{article} {first}, {} or {last}", middle.join(", ")),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A value as Ruby's `inspect` writes it (GitHub's messages do).
fn inspect(value: &Value) -> String {
    match value {
        Value::Null => "nil".into(),
        Value::Array(items) => format!("[{}]", items.iter().map(inspect).collect::<Vec<_>>().join(", ")),
        Value::Object(fields) => hash(fields),
        other => other.to_string(),
    }
}

fn hash(fields: &Map<String, Value>) -> String {
    let pairs: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{} => {}", Value::String(k.clone()), inspect(v)))
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

/// A value as Ruby's `to_s` writes it: a string bare, nil as nothing.
fn to_s(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => inspect(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_becomes_a_null_type() {
        let mut schema = json!({"type": "string", "nullable": true, "enum": ["a"]});
        open_nullable(&mut schema);
        assert_eq!(schema, json!({"type": ["string", "null"], "enum": ["a", null]}));
        let mut schema = json!({"oneOf": [{"type": "string"}], "nullable": true});
        open_nullable(&mut schema);
        assert_eq!(
            schema,
            json!({"anyOf": [{"oneOf": [{"type": "string"}]}, {"type": "null"}]})
        );
    }

    #[test]
    fn values_and_types_are_worded_as_github_words_them() {
        assert_eq!(types(&["string"]), "a string");
        assert_eq!(types(&["string", "null"]), "a string or null");
        assert_eq!(
            types(&["integer", "string", "null"]),
            "an integer, string or null"
        );
        assert_eq!(inspect(&json!({"a": [1, null]})), r#"{"a" => [1, nil]}"#);
        assert_eq!(to_s(&json!("bogus")), "bogus");
    }
}
