//! GitHub's REST API as GitHub describes it: the OpenAPI document of
//! api.github.com from npm `@octokit/openapi` (fetched by
//! `scripts/dev-env.sh`). The fake GitHub checks every request it takes and
//! every answer it gives against it:
//!
//! - a request's method and path must be a documented operation, each query
//!   parameter one that operation documents, and each attribute of its JSON
//!   body one of the request body's properties;
//! - its body must be what the request body's schema takes: the types,
//!   required fields and enums it declares (`crate::github_body`); GitHub
//!   refuses any other body with 422 before doing anything;
//! - every field of a successful answer (and of the objects nested in it)
//!   must be a property of the documented answer's schema.
//!
//! So the fake can never be kinder than GitHub: a field GitHub does not
//! send, or a parameter it does not take, is a test failure. GraphQL is not
//! in the document and is not checked here.

use crate::github_body::BodySchemas;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The version `scripts/dev-env.sh` fetches.
pub const VERSION: &str = "23.0.2";

/// How deep answers are checked (objects in objects).
const DEPTH: usize = 6;

pub struct GitHubApi {
    doc: Value,
    operations: Vec<Operation>,
    bodies: BodySchemas,
}

/// A body GitHub refuses: its 422 answer.
#[derive(Debug)]
pub struct Refusal {
    /// `Invalid request.` and a line per problem, as GitHub words it.
    pub message: String,
    /// The operation's documentation page, as GitHub's answer links it.
    pub documentation_url: String,
    /// The operation, for the test's failure.
    pub operation: String,
}

/// One documented operation.
#[derive(Debug)]
pub struct Operation {
    pub method: String,
    /// The path template, e.g. `/repos/{owner}/{repo}/issues`.
    pub template: String,
    segments: Vec<Option<String>>,
    query: BTreeSet<String>,
    body: Option<Value>,
    /// The number `BodySchemas` knows the body's schema by.
    body_index: Option<usize>,
    /// Whether a request without a body is refused.
    body_required: bool,
    /// The operation's page in GitHub's REST documentation.
    docs: String,
    answers: Map<String, Value>,
}

/// Where `scripts/dev-env.sh` put the document.
pub fn document_path() -> PathBuf {
    let state = std::env::var_os("FORGEHAND_DEV_STATE")
        .map_or_else(|| PathBuf::from("/tmp/forgehand-dev"), PathBuf::from);
    state.join(format!("github-openapi/api.github.com-{VERSION}.json"))
}

/// The document, loaded once per test process.
pub fn api() -> &'static GitHubApi {
    static API: OnceLock<GitHubApi> = OnceLock::new();
    API.get_or_init(|| {
        let path = document_path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "GitHub's OpenAPI description is missing at {} ({e}); run scripts/dev-env.sh (it fetches @octokit/openapi {VERSION} from npm)",
                path.display()
            )
        });
        let doc: Value = serde_json::from_str(&text).expect("GitHub's OpenAPI description is JSON");
        GitHubApi::new(doc).unwrap_or_else(|why| panic!("{why}"))
    })
}

impl GitHubApi {
    fn new(doc: Value) -> Result<GitHubApi, String> {
        let mut operations = Vec::new();
        let mut bodies = Vec::new();
        if let Some(paths) = doc["paths"].as_object() {
            for (template, item) in paths {
                let shared = item["parameters"].as_array().cloned().unwrap_or_default();
                for (method, op) in item.as_object().into_iter().flatten() {
                    if !["get", "post", "put", "patch", "delete"].contains(&method.as_str()) {
                        continue;
                    }
                    let mut query = BTreeSet::new();
                    let params = op["parameters"].as_array().cloned().unwrap_or_default();
                    for param in shared.iter().chain(&params) {
                        let param = resolve(&doc, param);
                        if param["in"] == "query" {
                            if let Some(name) = param["name"].as_str() {
                                query.insert(name.to_owned());
                            }
                        }
                    }
                    let request_body = resolve(&doc, &op["requestBody"]);
                    let body = request_body["content"]["application/json"]["schema"].clone();
                    let body_index = (!body.is_null()).then(|| {
                        bodies.push(body.clone());
                        bodies.len() - 1
                    });
                    operations.push(Operation {
                        method: method.to_uppercase(),
                        template: template.clone(),
                        segments: template
                            .trim_start_matches('/')
                            .split('/')
                            .map(|s| (!s.starts_with('{')).then(|| s.to_owned()))
                            .collect(),
                        query,
                        body: (!body.is_null()).then_some(body),
                        body_index,
                        body_required: request_body["required"] == true,
                        docs: op["externalDocs"]["url"].as_str().unwrap_or_default().to_owned(),
                        answers: op["responses"].as_object().cloned().unwrap_or_default(),
                    });
                }
            }
        }
        let bodies = BodySchemas::new(&doc, &bodies)?;
        Ok(GitHubApi {
            doc,
            operations,
            bodies,
        })
    }

    /// GitHub's 422 for a request whose body its operation's schema does
    /// not take; `None` when it takes it, or when the request is no
    /// documented operation (`check_request` says so). A request without
    /// a body (`Value::Null`) is checked only where a body is required.
    pub fn refuse_body(&self, method: &str, segments: &[&str], body: &Value) -> Option<Refusal> {
        let op = self.operation(method, segments)?;
        let index = op.body_index?;
        if body.is_null() && !op.body_required {
            return None;
        }
        let problems = self.bodies.problems(index, body);
        if problems.is_empty() {
            return None;
        }
        Some(Refusal {
            message: format!("Invalid request.\n\n{}", problems.join("\n")),
            documentation_url: op.docs.clone(),
            operation: format!("{method} {}", op.template),
        })
    }

    /// The operation `method` and `segments` (the path's, decoded) name:
    /// the documented one with the most literal segments that fits.
    fn operation(&self, method: &str, segments: &[&str]) -> Option<&Operation> {
        self.operations
            .iter()
            .filter(|op| op.method == method && op.segments.len() == segments.len())
            .filter(|op| {
                op.segments
                    .iter()
                    .zip(segments)
                    .all(|(want, got)| want.as_deref().is_none_or(|w| w == *got))
            })
            .max_by_key(|op| op.segments.iter().filter(|s| s.is_some()).count())
    }

    /// Checks a request; the operation it is, or what is wrong with it.
    pub fn check_request(
        &self,
        method: &str,
        segments: &[&str],
        query: &[String],
        body: &Value,
    ) -> Result<&Operation, String> {
        let op = self
            .operation(method, segments)
            .ok_or_else(|| format!("{method} /{} is not a documented operation", segments.join("/")))?;
        let unknown: Vec<&String> = query.iter().filter(|q| !op.query.contains(*q)).collect();
        if !unknown.is_empty() {
            return Err(format!(
                "{method} {}: query parameter(s) {unknown:?} are not documented",
                op.template
            ));
        }
        if let (Some(schema), Value::Object(_)) = (&op.body, body) {
            let mut problems = Vec::new();
            self.check_value(schema, body, "body", DEPTH, &mut problems);
            if !problems.is_empty() {
                return Err(format!("{method} {}: {}", op.template, problems.join("; ")));
            }
        }
        Ok(op)
    }

    /// Checks a successful answer of `op` with `status`.
    pub fn check_answer(&self, op: &Operation, status: u16, answer: &Value) -> Result<(), String> {
        let Some(response) = op.answers.get(&status.to_string()) else {
            return Err(format!(
                "{} {}: status {status} is not a documented answer",
                op.method, op.template
            ));
        };
        let response = resolve(&self.doc, response);
        let schema = &response["content"]["application/json"]["schema"];
        if schema.is_null() {
            return Ok(());
        }
        let mut problems = Vec::new();
        self.check_value(schema, answer, "answer", DEPTH, &mut problems);
        match problems.is_empty() {
            true => Ok(()),
            false => Err(format!("{} {}: {}", op.method, op.template, problems.join("; "))),
        }
    }

    /// Checks a webhook payload GitHub would deliver for `name` (e.g.
    /// `issue-comment-created`, a key of the document's `x-webhooks`).
    pub fn check_webhook(&self, name: &str, payload: &Value) -> Result<(), String> {
        let schema =
            &self.doc["x-webhooks"][name]["post"]["requestBody"]["content"]["application/json"]["schema"];
        if schema.is_null() {
            return Err(format!("webhook {name} is not documented"));
        }
        let mut problems = Vec::new();
        for required in resolve(&self.doc, schema)["required"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let required = required.as_str().unwrap_or_default();
            if payload.get(required).is_none() {
                problems.push(format!("payload.{required} is required"));
            }
        }
        self.check_value(schema, payload, "payload", DEPTH, &mut problems);
        match problems.is_empty() {
            true => Ok(()),
            false => Err(format!("webhook {name}: {}", problems.join("; "))),
        }
    }

    /// Every field of `value` must be a property `schema` declares.
    fn check_value(&self, schema: &Value, value: &Value, at: &str, depth: usize, problems: &mut Vec<String>) {
        if depth == 0 {
            return;
        }
        match value {
            Value::Array(items) => {
                let item_schemas = self.alternatives(schema, "items");
                for (i, item) in items.iter().enumerate().take(20) {
                    let mut best: Option<Vec<String>> = None;
                    for item_schema in &item_schemas {
                        let mut found = Vec::new();
                        self.check_value(item_schema, item, &format!("{at}[{i}]"), depth - 1, &mut found);
                        if best.as_ref().is_none_or(|b| found.len() < b.len()) {
                            best = Some(found);
                        }
                    }
                    problems.extend(best.unwrap_or_default());
                }
            }
            Value::Object(fields) => {
                let Some(properties) = self.properties(schema) else {
                    return;
                };
                for (name, field) in fields {
                    match properties.iter().find(|(n, _)| n == name) {
                        Some((_, field_schema)) => self.check_value(
                            field_schema,
                            field,
                            &format!("{at}.{name}"),
                            depth - 1,
                            problems,
                        ),
                        None => problems.push(format!("{at}.{name} is not documented")),
                    }
                }
            }
            _ => {}
        }
    }

    /// The schemas `schema` may be (through `oneOf` / `anyOf` / `allOf`
    /// and `$ref`), each with its `key` taken (`items`), or itself.
    fn alternatives(&self, schema: &Value, key: &str) -> Vec<Value> {
        let schema = resolve(&self.doc, schema);
        let mut out = Vec::new();
        for combined in ["oneOf", "anyOf", "allOf"] {
            for part in schema[combined].as_array().into_iter().flatten() {
                out.extend(self.alternatives(part, key));
            }
        }
        if !schema[key].is_null() {
            out.push(resolve(&self.doc, &schema[key]).clone());
        }
        out
    }

    /// The properties an object of `schema` may have, with their schemas;
    /// `None` when it may have any (no properties declared, or
    /// `additionalProperties` allowed).
    fn properties(&self, schema: &Value) -> Option<Vec<(String, Value)>> {
        let schema = resolve(&self.doc, schema);
        let mut out: Vec<(String, Value)> = Vec::new();
        let mut declared = false;
        for combined in ["oneOf", "anyOf", "allOf"] {
            for part in schema[combined].as_array().into_iter().flatten() {
                match self.properties(part) {
                    Some(props) => {
                        declared = true;
                        out.extend(props);
                    }
                    None => return None,
                }
            }
        }
        if let Some(props) = schema["properties"].as_object() {
            declared = true;
            out.extend(props.iter().map(|(n, s)| (n.clone(), s.clone())));
        }
        let open = match &schema["additionalProperties"] {
            Value::Bool(open) => *open,
            Value::Object(_) => true,
            _ => false,
        };
        (declared && !open).then_some(out)
    }
}

/// `value` with a `$ref` followed (within the document).
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    let mut value = value;
    for _ in 0..8 {
        let Some(pointer) = value["$ref"].as_str() else {
            return value;
        };
        value = doc
            .pointer(pointer.trim_start_matches('#'))
            .unwrap_or(&Value::Null);
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_github_does_not_document_is_caught() {
        let api = api();
        let op = api
            .check_request("GET", &["repos", "acme", "app", "issues", "7"], &[], &Value::Null)
            .unwrap();
        assert_eq!(op.template, "/repos/{owner}/{repo}/issues/{issue_number}");
        // A field GitLab serves and GitHub does not.
        let answer = json!({"number": 7, "title": "t", "last_edited_at": "2026-01-01T00:00:00Z"});
        let err = api.check_answer(op, 200, &answer).unwrap_err();
        assert!(err.contains("answer.last_edited_at is not documented"), "{err}");
        // Nested objects are checked too.
        let answer = json!({"number": 7, "user": {"login": "maya", "karma": 3}});
        let err = api.check_answer(op, 200, &answer).unwrap_err();
        assert!(err.contains("answer.user.karma"), "{err}");
        assert!(api
            .check_answer(op, 200, &json!({"number": 7, "user": {"login": "maya"}}))
            .is_ok());
        // A literal segment wins over a parameter.
        let op = api
            .check_request(
                "GET",
                &["repos", "acme", "app", "issues", "comments"],
                &["since".into()],
                &Value::Null,
            )
            .unwrap();
        assert_eq!(op.template, "/repos/{owner}/{repo}/issues/comments");
        let err = api
            .check_request(
                "GET",
                &["repos", "acme", "app", "issues"],
                &["updated_after".into()],
                &Value::Null,
            )
            .unwrap_err();
        assert!(err.contains("updated_after"), "{err}");
        let err = api
            .check_request("PUT", &["repos", "acme", "app", "issues"], &[], &Value::Null)
            .unwrap_err();
        assert!(err.contains("not a documented operation"), "{err}");
        let err = api
            .check_request(
                "POST",
                &["repos", "acme", "app", "issues", "7", "comments"],
                &[],
                &json!({"body": "hi", "sticky": true}),
            )
            .unwrap_err();
        assert!(err.contains("body.sticky"), "{err}");
    }

    /// What `refuse_body` answers, as (message, documentation_url).
    fn refusal(method: &str, path: &str, body: Value) -> Option<(String, String)> {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        api()
            .refuse_body(method, &segments, &body)
            .map(|r| (r.message, r.documentation_url))
    }

    #[test]
    fn bodies_github_refuses_are_refused_in_its_words() {
        let comments = "/repos/acme/app/issues/7/comments";
        let docs = "https://docs.github.com/rest/issues/comments#create-an-issue-comment";
        let cases = [
            // A wrong type.
            (
                "POST",
                comments,
                json!({"body": 42}),
                "For 'properties/body', 42 is not a string.",
            ),
            // A required field missing.
            ("POST", comments, json!({}), "\"body\" wasn't supplied."),
            // A null where the schema is not nullable.
            (
                "POST",
                comments,
                json!({"body": null}),
                "For 'properties/body', nil is not a string.",
            ),
            // A value outside an enum.
            (
                "PATCH",
                "/repos/acme/app/issues/7",
                json!({"state": "bogus"}),
                "For 'properties/state', bogus is not a member of [\"open\", \"closed\"].",
            ),
            // An array's item of no type its `oneOf` takes.
            (
                "POST",
                "/repos/acme/app/issues/7/labels",
                json!({"labels": [null]}),
                "For 'items', nil is not a string or object.",
            ),
            // Fewer items than the schema's `minItems`.
            (
                "POST",
                "/repos/acme/app/issues/7/labels",
                json!({"labels": []}),
                "For 'properties/labels', 1 item required; only 0 were supplied.",
            ),
            (
                "POST",
                "/repos/acme/app/issues/7/reactions",
                json!({"content": "smile"}),
                "For 'properties/content', smile is not a member of",
            ),
        ];
        for (method, path, body, words) in cases {
            let (message, url) =
                refusal(method, path, body.clone()).unwrap_or_else(|| panic!("{method} {path} took {body}"));
            assert!(message.starts_with("Invalid request.\n\n"), "{message}");
            assert!(message.contains(words), "{body}: {message}");
            assert!(url.starts_with("https://docs.github.com/rest/"), "{url}");
        }
        assert_eq!(refusal("POST", comments, json!({"body": 42})).unwrap().1, docs);
        // What GitHub takes: nullable fields set to null, a oneOf's string.
        for (method, path, body) in [
            (
                "PATCH",
                "/repos/acme/app/issues/7",
                json!({"body": null, "milestone": null, "state": "closed"}),
            ),
            (
                "POST",
                "/repos/acme/app/issues/7/labels",
                json!({"labels": ["bug"]}),
            ),
            ("POST", comments, json!({"body": "hi"})),
            // No body where none is required.
            ("PUT", "/repos/acme/app/issues/7/lock", Value::Null),
        ] {
            assert_eq!(
                refusal(method, path, body.clone()),
                None,
                "{method} {path} {body}"
            );
        }
    }
}
