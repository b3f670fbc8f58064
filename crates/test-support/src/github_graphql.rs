//! GitHub's GraphQL API as GitHub describes it: the schema in npm
//! `@octokit/graphql-schema` (fetched by `scripts/dev-env.sh`). The fake
//! GitHub runs every GraphQL request through [`check`] before answering it,
//! so a query GitHub would refuse is refused there too, in GitHub's shape
//! (HTTP 200, `{"errors": [{"message", "locations", ...}]}`, no `data`):
//!
//! - the document must parse and validate against the schema (fields,
//!   arguments and their types, fragments on types that exist, every
//!   variable used and declared, nothing left unused), by `apollo-compiler`;
//! - the operation the request names (or its only one) must exist;
//! - each declared variable's value must coerce to the declared type
//!   (GitHub: "Variable $owner of type String! was provided invalid value");
//! - every connection must be paginated with `first` or `last` of at most
//!   100 (GitHub's documented node limits: "You must provide a `first` or
//!   `last` value to properly paginate the `issues` connection.").

use apollo_compiler::executable::{Operation, Selection, SelectionSet};
use apollo_compiler::parser::SourceSpan;
use apollo_compiler::response::{GraphQLError, JsonMap};
use apollo_compiler::validation::Valid;
use apollo_compiler::{ExecutableDocument, Schema};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The version `scripts/dev-env.sh` fetches.
pub const VERSION: &str = "15.26.1";

/// The most records one connection may ask for (GitHub's node limits).
const MAX_PAGE: i64 = 100;

/// Where `scripts/dev-env.sh` put the schema.
pub fn schema_path() -> PathBuf {
    let state = std::env::var_os("FORGEHAND_DEV_STATE")
        .map_or_else(|| PathBuf::from("/tmp/forgehand-dev"), PathBuf::from);
    state.join(format!("github-graphql/schema-{VERSION}.graphql"))
}

/// The schema, parsed and validated once per test process. A missing file
/// fails the test that needs it, with the way to get it.
pub fn schema() -> &'static Valid<Schema> {
    static SCHEMA: OnceLock<Valid<Schema>> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = schema_path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "GitHub's GraphQL schema is missing at {} ({e}); run scripts/dev-env.sh (it fetches @octokit/graphql-schema {VERSION} from npm)",
                path.display()
            )
        });
        parse(text, &path)
            .validate()
            .unwrap_or_else(|e| panic!("GitHub's GraphQL schema does not validate: {}", e.errors))
    })
}

/// The schema as GitHub serves it. The published file defines two fields
/// of `EnterpriseOwnerInfo` twice (`repositoryDeployKeySetting` and
/// `…Organizations`, the second copy with another field's description);
/// the first definition is kept, as GitHub serves one field. Any other
/// defect fails.
fn parse(text: String, path: &std::path::Path) -> Schema {
    match Schema::parse(text, path) {
        Ok(schema) => schema,
        Err(e)
            if e.errors
                .iter()
                .all(|d| d.to_json().message.starts_with("duplicate definitions for the")) =>
        {
            e.partial
        }
        Err(e) => panic!("GitHub's GraphQL schema does not parse: {}", e.errors),
    }
}

/// What GitHub does with a request to its GraphQL endpoint whose JSON body
/// is `body`, before running it: `Ok` when it would run, or the `errors`
/// GitHub answers with instead (each with `message`, and `locations` where
/// the document has a place to point at).
pub fn check(body: &Value) -> Result<(), Vec<Value>> {
    let Some(query) = body.get("query").and_then(Value::as_str) else {
        return Err(vec![
            json!({"message": "A query attribute must be specified and must be a string."}),
        ]);
    };
    let schema = schema();
    let document = ExecutableDocument::parse_and_validate(schema, query, "query.graphql")
        .map_err(|e| e.errors.iter().map(|d| to_json(&d.to_json())).collect::<Vec<_>>())?;
    let name = body.get("operationName").and_then(Value::as_str);
    let operation = document
        .operations
        .get(name)
        .map_err(|e| vec![to_json(&e.to_graphql_error(&document.sources))])?;
    let variables = match body.get("variables") {
        Some(Value::Object(map)) => map.clone(),
        _ => serde_json::Map::new(),
    };
    check_variables(schema, &document, operation, &variables)?;
    let mut errors = Vec::new();
    let walk = Walk {
        document: &document,
        variables: &variables,
    };
    walk.connections(&operation.selection_set, &mut errors, 0);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Each declared variable's value, coerced to its declared type one at a
/// time so the error names the variable as GitHub's does.
fn check_variables(
    schema: &Valid<Schema>,
    document: &ExecutableDocument,
    operation: &Operation,
    variables: &serde_json::Map<String, Value>,
) -> Result<(), Vec<Value>> {
    let values: JsonMap = variables
        .iter()
        .map(|(k, v)| (k.as_str().into(), v.clone().into()))
        .collect();
    let mut errors = Vec::new();
    for definition in &operation.variables {
        let mut alone = operation.clone();
        alone.variables = vec![definition.clone()];
        if let Err(e) = apollo_compiler::request::coerce_variable_values(schema, &alone, &values) {
            let mut error = to_json(&GraphQLError::new(
                format!(
                    "Variable ${} of type {} was provided invalid value",
                    definition.name, definition.ty
                ),
                definition.location(),
                &document.sources,
            ));
            error["extensions"] = json!({
                "value": variables.get(definition.name.as_str()).cloned().unwrap_or(Value::Null),
                "problems": [{"path": [], "explanation": e.message().to_string()}],
            });
            errors.push(error);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The connections a document asks for, with the request's variables.
struct Walk<'a> {
    document: &'a ExecutableDocument,
    variables: &'a serde_json::Map<String, Value>,
}

impl Walk<'_> {
    fn connections(&self, set: &SelectionSet, errors: &mut Vec<Value>, depth: usize) {
        // Fragments cannot spread into themselves in a valid document; the
        // bound only guards against a bug here.
        if depth > 64 {
            return;
        }
        for selection in &set.selections {
            match selection {
                Selection::Field(field) => {
                    let ty = field.definition.ty.inner_named_type().as_str();
                    if ty.ends_with("Connection") {
                        self.page(&field.name, field.location(), &field.arguments, errors);
                    }
                    self.connections(&field.selection_set, errors, depth + 1);
                }
                Selection::InlineFragment(inline) => {
                    self.connections(&inline.selection_set, errors, depth + 1)
                }
                Selection::FragmentSpread(spread) => {
                    if let Some(fragment) = self.document.fragments.get(&spread.fragment_name) {
                        self.connections(&fragment.selection_set, errors, depth + 1);
                    }
                }
            }
        }
    }

    /// GitHub's node limits on one connection: `first` or `last` given, and
    /// at most 100.
    fn page(
        &self,
        name: &str,
        location: Option<SourceSpan>,
        arguments: &[apollo_compiler::Node<apollo_compiler::ast::Argument>],
        errors: &mut Vec<Value>,
    ) {
        let mut given = false;
        for argument in arguments {
            let key = argument.name.as_str();
            if key != "first" && key != "last" {
                continue;
            }
            let Some(count) = self.int(&argument.value) else {
                continue;
            };
            given = true;
            if count > MAX_PAGE {
                errors.push(self.error(
                    format!("Requesting {count} records on the `{name}` connection exceeds the `{key}` limit of {MAX_PAGE} records."),
                    location,
                ));
            }
        }
        if !given {
            errors.push(self.error(
                format!("You must provide a `first` or `last` value to properly paginate the `{name}` connection."),
                location,
            ));
        }
    }

    /// An argument's integer value, a literal or a variable's (null: none).
    fn int(&self, value: &apollo_compiler::ast::Value) -> Option<i64> {
        match value {
            apollo_compiler::ast::Value::Int(int) => int.try_to_i32().ok().map(i64::from),
            apollo_compiler::ast::Value::Variable(var) => self.variables.get(var.as_str())?.as_i64(),
            _ => None,
        }
    }

    fn error(&self, message: String, location: Option<SourceSpan>) -> Value {
        to_json(&GraphQLError::new(message, location, &self.document.sources))
    }
}

/// Whether `answer`, the fake's answer to the valid request `body`, has
/// only what the request selected: every field of `data`, at every depth,
/// must be a field (by alias or name) the document asked for there, since
/// GitHub sends nothing else. `Err` names the first that is not.
pub fn check_answer(body: &Value, answer: &Value) -> Result<(), String> {
    let (Some(query), Some(data)) = (body.get("query").and_then(Value::as_str), answer.get("data")) else {
        return Ok(());
    };
    let document = ExecutableDocument::parse_and_validate(schema(), query, "query.graphql")
        .map_err(|e| format!("the answered document does not validate: {}", e.errors))?;
    let name = body.get("operationName").and_then(Value::as_str);
    let operation = document
        .operations
        .get(name)
        .map_err(|e| e.message().to_string())?;
    selected_only(&document, &[&operation.selection_set], data, "data")
}

/// `value` against the selection sets that apply to it (several when
/// fragments on different types select beside each other).
fn selected_only(
    document: &ExecutableDocument,
    sets: &[&SelectionSet],
    value: &Value,
    at: &str,
) -> Result<(), String> {
    match value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(n, item)| selected_only(document, sets, item, &format!("{at}[{n}]"))),
        Value::Object(fields) => {
            let mut asked = Vec::new();
            for set in sets {
                flatten(document, set, &mut asked, 0);
            }
            for (key, inner) in fields {
                let matching: Vec<&SelectionSet> = asked
                    .iter()
                    .filter(|f| f.response_key().as_str() == key)
                    .map(|f| &f.selection_set)
                    .collect();
                if matching.is_empty() {
                    return Err(format!("{at}.{key} was not asked for"));
                }
                selected_only(document, &matching, inner, &format!("{at}.{key}"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The fields of a selection set, fragments spread in.
fn flatten<'a>(
    document: &'a ExecutableDocument,
    set: &'a SelectionSet,
    out: &mut Vec<&'a apollo_compiler::executable::Field>,
    depth: usize,
) {
    if depth > 64 {
        return;
    }
    for selection in &set.selections {
        match selection {
            Selection::Field(field) => out.push(field),
            Selection::InlineFragment(inline) => flatten(document, &inline.selection_set, out, depth + 1),
            Selection::FragmentSpread(spread) => {
                if let Some(fragment) = document.fragments.get(&spread.fragment_name) {
                    flatten(document, &fragment.selection_set, out, depth + 1);
                }
            }
        }
    }
}

fn to_json(error: &GraphQLError) -> Value {
    serde_json::to_value(error).unwrap_or_else(|_| json!({"message": error.message}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(query: &str, variables: Value) -> Vec<Value> {
        check(&json!({"query": query, "variables": variables})).unwrap_err()
    }

    fn messages(errors: &[Value]) -> String {
        errors
            .iter()
            .map(|e| e["message"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    }

    const REPO: &str =
        "query($owner: String!, $name: String!) { repository(owner: $owner, name: $name) { FIELD } }";

    #[test]
    fn a_field_github_does_not_have_is_refused_with_its_place() {
        let errors = refused(
            &REPO.replace("FIELD", "lastEditedOn"),
            json!({"owner": "acme", "name": "app"}),
        );
        let said = messages(&errors);
        assert!(said.contains("lastEditedOn"), "{said}");
        assert_eq!(errors[0]["locations"][0]["line"], 1, "{errors:?}");
        assert!(errors[0]["locations"][0]["column"].as_u64().unwrap() > 1);
        // The same document with a field Repository has runs.
        check(&json!({"query": REPO.replace("FIELD", "id"), "variables": {"owner": "acme", "name": "app"}}))
            .unwrap();
    }

    #[test]
    fn arguments_and_variables_must_have_the_schemas_types() {
        // An argument of the wrong type in the document.
        let said = messages(&refused(
            "{ repository(owner: 7, name: \"app\") { id } }",
            Value::Null,
        ));
        assert!(said.contains("String!"), "{said}");
        // A variable declared as another type than the argument takes.
        let said = messages(&refused(
            "query($owner: Int!) { repository(owner: $owner, name: \"app\") { id } }",
            json!({"owner": 7}),
        ));
        assert!(said.contains("owner"), "{said}");
        // A required variable not given, and one of the wrong JSON type.
        let errors = refused(&REPO.replace("FIELD", "id"), json!({"owner": 7}));
        let said = messages(&errors);
        assert!(
            said.contains("Variable $owner of type String! was provided invalid value")
                && said.contains("Variable $name of type String! was provided invalid value"),
            "{said}"
        );
        assert!(errors[0]["extensions"]["problems"][0]["explanation"].is_string());
        // A variable used but never declared; one declared but never used.
        assert!(!refused("{ repository(owner: $o, name: \"a\") { id } }", Value::Null).is_empty());
        assert!(!refused(
            "query($unused: Int) { repository(owner: \"o\", name: \"a\") { id } }",
            Value::Null
        )
        .is_empty());
    }

    #[test]
    fn connections_must_be_paginated_within_githubs_node_limits() {
        let said = messages(&refused(
            &REPO.replace("FIELD", "issues { nodes { number } }"),
            json!({"owner": "acme", "name": "app"}),
        ));
        assert!(
            said.contains(
                "You must provide a `first` or `last` value to properly paginate the `issues` connection."
            ),
            "{said}"
        );
        let said = messages(&refused(
            "query($owner: String!, $name: String!, $n: Int) { repository(owner: $owner, name: $name) { issues(first: $n) { nodes { number } } } }",
            json!({"owner": "acme", "name": "app", "n": 101}),
        ));
        assert!(
            said.contains(
                "Requesting 101 records on the `issues` connection exceeds the `first` limit of 100 records."
            ),
            "{said}"
        );
        check(&json!({"query": REPO.replace("FIELD", "issues(last: 100) { nodes { number } }"), "variables": {"owner": "acme", "name": "app"}})).unwrap();
    }

    #[test]
    fn an_answer_with_a_field_the_query_did_not_select_is_caught() {
        let body = json!({"query": REPO.replace("FIELD", "issueOrPullRequest(number: 1) { ... on Issue { lastEditedAt } ... on PullRequest { lastEditedAt } }"), "variables": {"owner": "acme", "name": "app"}});
        let answer = json!({"data": {"repository": {"issueOrPullRequest": {"lastEditedAt": null}}}});
        check_answer(&body, &answer).unwrap();
        let kinder = json!({"data": {"repository": {"issueOrPullRequest": {"lastEditedAt": null, "updatedAt": "2026-01-01T00:00:00Z"}}}});
        let err = check_answer(&body, &kinder).unwrap_err();
        assert_eq!(
            err,
            "data.repository.issueOrPullRequest.updatedAt was not asked for"
        );
        // Lists are checked item by item; a null where an object was asked is fine.
        let body = json!({"query": REPO.replace("FIELD", "issues(first: 2) { nodes { number } }"), "variables": {"owner": "acme", "name": "app"}});
        check_answer(
            &body,
            &json!({"data": {"repository": {"issues": {"nodes": [{"number": 1}, {"number": 2}]}}}}),
        )
        .unwrap();
        check_answer(&body, &json!({"data": {"repository": null}})).unwrap();
        let err = check_answer(
            &body,
            &json!({"data": {"repository": {"issues": {"nodes": [{"number": 1, "title": "t"}]}}}}),
        )
        .unwrap_err();
        assert_eq!(err, "data.repository.issues.nodes[0].title was not asked for");
    }

    #[test]
    fn a_body_without_a_query_or_with_an_unknown_operation_is_refused() {
        let said = messages(&check(&json!({"variables": {}})).unwrap_err());
        assert!(said.contains("A query attribute must be specified"), "{said}");
        let errors =
            check(&json!({"query": "query A { viewer { login } }", "operationName": "B"})).unwrap_err();
        assert!(!errors.is_empty());
        let errors = check(&json!({"query": "{ viewer { login "})).unwrap_err();
        assert!(messages(&errors).contains("syntax error"), "{errors:?}");
    }
}
