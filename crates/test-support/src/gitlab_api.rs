//! What GitLab's REST API v4 documents, for the parts forgehand uses: each
//! endpoint with the query parameters and body attributes it takes, and each
//! entity with the fields its answers have. The fake GitLab checks every
//! request it receives and every answer it gives against this, so it can
//! never be kinder than GitLab (it once served a `last_edited_at` that
//! GitLab's REST issue does not have).
//!
//! Source: `doc/api/` in GitLab's repository; each entry names its page.
//! Only documented names are listed; a field GitLab documents but the fake
//! does not serve needs no entry.

use serde_json::Value;

/// One documented endpoint. `path` segments starting with ':' match anything.
pub struct Endpoint {
    pub method: &'static str,
    pub path: &'static str,
    pub query: &'static [&'static str],
    pub body: &'static [&'static str],
    pub answer: Option<Entity>,
    pub doc: &'static str,
}

#[derive(Clone, Copy, Debug)]
pub enum Entity {
    CurrentUser,
    User,
    Project,
    Issue,
    MergeRequest,
    Note,
    LabelEvent,
    Member,
    Event,
    AwardEmoji,
    Pipeline,
    Job,
    Discussion,
    Diff,
}

/// Offset pagination (`doc/api/rest/_index.md`, "Offset-based pagination").
const PAGES: [&str; 2] = ["page", "per_page"];

const ISSUE_LIST: &[&str] = &[
    "page",
    "per_page",
    "state",
    "labels",
    "order_by",
    "sort",
    "updated_after",
    "author_username",
];
const MR_LIST: &[&str] = &[
    "page",
    "per_page",
    "state",
    "labels",
    "order_by",
    "sort",
    "updated_after",
    "source_branch",
];

pub const ENDPOINTS: &[Endpoint] = &[
    Endpoint {
        method: "GET",
        path: "user",
        query: &[],
        body: &[],
        answer: Some(Entity::CurrentUser),
        doc: "users.md: Get the current user",
    },
    Endpoint {
        method: "GET",
        path: "users",
        query: &["page", "per_page", "username"],
        body: &[],
        answer: Some(Entity::User),
        doc: "users.md: List users (username)",
    },
    Endpoint {
        method: "GET",
        path: "projects",
        query: &["page", "per_page", "membership", "archived", "simple"],
        body: &[],
        answer: Some(Entity::Project),
        doc: "projects.md: List all projects",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id",
        query: &[],
        body: &[],
        answer: Some(Entity::Project),
        doc: "projects.md: Get a single project",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/issues",
        query: ISSUE_LIST,
        body: &[],
        answer: Some(Entity::Issue),
        doc: "issues.md: List project issues",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/merge_requests",
        query: MR_LIST,
        body: &[],
        answer: Some(Entity::MergeRequest),
        doc: "merge_requests.md: List project merge requests",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/issues/:iid",
        query: &[],
        body: &[],
        answer: Some(Entity::Issue),
        doc: "issues.md: Single project issue",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/merge_requests/:iid",
        query: &[],
        body: &[],
        answer: Some(Entity::MergeRequest),
        doc: "merge_requests.md: Get single MR",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/issues/:iid/closed_by",
        query: &PAGES,
        body: &[],
        answer: Some(Entity::MergeRequest),
        doc: "issues.md: List merge requests that close a particular issue on merge",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/merge_requests/:iid/diffs",
        query: &["page", "per_page", "unidiff"],
        body: &[],
        answer: Some(Entity::Diff),
        doc: "merge_requests.md: List merge request diffs",
    },
    Endpoint {
        method: "PUT",
        path: "projects/:id/issues/:iid",
        query: &[],
        body: &["add_labels", "remove_labels"],
        answer: Some(Entity::Issue),
        doc: "issues.md: Edit an issue",
    },
    Endpoint {
        method: "PUT",
        path: "projects/:id/merge_requests/:iid",
        query: &[],
        body: &["add_labels", "remove_labels"],
        answer: Some(Entity::MergeRequest),
        doc: "merge_requests.md: Update MR",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/issues",
        query: &[],
        body: &["title", "description", "labels"],
        answer: Some(Entity::Issue),
        doc: "issues.md: New issue",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/merge_requests",
        query: &[],
        body: &[
            "source_branch",
            "target_branch",
            "title",
            "description",
            "remove_source_branch",
        ],
        answer: Some(Entity::MergeRequest),
        doc: "merge_requests.md: Create MR",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/issues/:iid/resource_label_events",
        query: &PAGES,
        body: &[],
        answer: Some(Entity::LabelEvent),
        doc: "resource_label_events.md: List project issue label events",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/merge_requests/:iid/resource_label_events",
        query: &PAGES,
        body: &[],
        answer: Some(Entity::LabelEvent),
        doc: "resource_label_events.md: List project merge request label events",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/members/all/:user_id",
        query: &[],
        body: &[],
        answer: Some(Entity::Member),
        doc: "members.md: Get a member of a group or project, including inherited and invited members",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/events",
        query: &[
            "page",
            "per_page",
            "action",
            "target_type",
            "before",
            "after",
            "sort",
        ],
        body: &[],
        answer: Some(Entity::Event),
        doc: "events.md: List a project's visible events",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/pipelines",
        query: &[
            "page",
            "per_page",
            "sha",
            "ref",
            "status",
            "order_by",
            "sort",
            "source",
            "updated_after",
        ],
        body: &[],
        answer: Some(Entity::Pipeline),
        doc: "pipelines.md: List project pipelines",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/pipelines/:pipeline_id/jobs",
        query: &["page", "per_page", "scope", "include_retried"],
        body: &[],
        answer: Some(Entity::Job),
        doc: "jobs.md: List pipeline jobs",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/jobs/:job_id/trace",
        query: &[],
        body: &[],
        answer: None,
        doc: "jobs.md: Get a log file (plain text)",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/jobs/:job_id/retry",
        query: &[],
        body: &[],
        answer: Some(Entity::Job),
        doc: "jobs.md: Retry a job",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/issues/:iid/award_emoji",
        query: &[],
        body: &["name"],
        answer: Some(Entity::AwardEmoji),
        doc: "emoji_reactions.md: Add a new emoji reaction (issues)",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/merge_requests/:iid/award_emoji",
        query: &[],
        body: &["name"],
        answer: Some(Entity::AwardEmoji),
        doc: "emoji_reactions.md: Add a new emoji reaction (merge requests)",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/issues/:iid/notes/:note_id/award_emoji",
        query: &["page", "per_page"],
        body: &[],
        answer: Some(Entity::AwardEmoji),
        doc: "emoji_reactions.md: List a comment's emoji reactions",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/issues/:iid/notes/:note_id/award_emoji",
        query: &[],
        body: &["name"],
        answer: Some(Entity::AwardEmoji),
        doc: "emoji_reactions.md: Add a new emoji reaction to a comment",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/merge_requests/:iid/notes/:note_id/award_emoji",
        query: &[],
        body: &["name"],
        answer: Some(Entity::AwardEmoji),
        doc: "emoji_reactions.md: Add a new emoji reaction to a comment",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/issues/:iid/notes",
        query: &["page", "per_page", "sort", "order_by"],
        body: &[],
        answer: Some(Entity::Note),
        doc: "notes.md: List project issue notes",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/merge_requests/:iid/notes",
        query: &["page", "per_page", "sort", "order_by"],
        body: &[],
        answer: Some(Entity::Note),
        doc: "notes.md: List all merge request notes",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/issues/:iid/notes",
        query: &[],
        body: &["body"],
        answer: Some(Entity::Note),
        doc: "notes.md: Create new issue note",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/merge_requests/:iid/notes",
        query: &[],
        body: &["body"],
        answer: Some(Entity::Note),
        doc: "notes.md: Create new merge request note",
    },
    Endpoint {
        method: "PUT",
        path: "projects/:id/issues/:iid/notes/:note_id",
        query: &[],
        body: &["body"],
        answer: Some(Entity::Note),
        doc: "notes.md: Modify existing issue note",
    },
    Endpoint {
        method: "PUT",
        path: "projects/:id/merge_requests/:iid/notes/:note_id",
        query: &[],
        body: &["body"],
        answer: Some(Entity::Note),
        doc: "notes.md: Modify existing merge request note",
    },
    Endpoint {
        method: "GET",
        path: "projects/:id/merge_requests/:iid/discussions",
        query: &PAGES,
        body: &[],
        answer: Some(Entity::Discussion),
        doc: "discussions.md: List project merge request discussion items",
    },
    Endpoint {
        method: "POST",
        path: "projects/:id/merge_requests/:iid/discussions/:discussion_id/notes",
        query: &[],
        body: &["body", "note_id", "created_at"],
        answer: Some(Entity::Note),
        doc: "discussions.md: Add note to existing merge request thread",
    },
    Endpoint {
        method: "PUT",
        path: "projects/:id/merge_requests/:iid/discussions/:discussion_id",
        query: &["resolved"],
        body: &["resolved"],
        answer: Some(Entity::Discussion),
        doc: "discussions.md: Resolve a merge request thread",
    },
];

/// The fields each entity's documented example answer has (those the fake serves).
fn fields(entity: Entity) -> &'static [&'static str] {
    match entity {
        // users.md: "For user" example of GET /user.
        Entity::CurrentUser => &[
            "id",
            "username",
            "name",
            "state",
            "locked",
            "avatar_url",
            "web_url",
            "created_at",
            "bio",
            "public_email",
            "email",
        ],
        // users.md, List users: the basic user shape (also authors and label event users).
        Entity::User => &[
            "id",
            "username",
            "name",
            "state",
            "locked",
            "avatar_url",
            "web_url",
        ],
        // projects.md, Get a single project.
        Entity::Project => &[
            "id",
            "description",
            "name",
            "name_with_namespace",
            "path",
            "path_with_namespace",
            "created_at",
            "default_branch",
            "ssh_url_to_repo",
            "http_url_to_repo",
            "web_url",
            "archived",
            "visibility",
        ],
        // issues.md, Single project issue. No `last_edited_at`: GitLab's REST
        // issue does not have one (edits show as system notes).
        Entity::Issue => &[
            "id",
            "iid",
            "project_id",
            "title",
            "description",
            "state",
            "created_at",
            "updated_at",
            "closed_at",
            "closed_by",
            "labels",
            "milestone",
            "assignees",
            "assignee",
            "author",
            "type",
            "issue_type",
            "user_notes_count",
            "merge_requests_count",
            "upvotes",
            "downvotes",
            "due_date",
            "confidential",
            "discussion_locked",
            "web_url",
            "references",
            "task_completion_status",
            "has_tasks",
            "task_status",
            "severity",
            "subscribed",
            "imported",
            "imported_from",
        ],
        // merge_requests.md, Get single MR.
        Entity::MergeRequest => &[
            "id",
            "iid",
            "project_id",
            "title",
            "description",
            "state",
            "created_at",
            "updated_at",
            "merged_by",
            "merge_user",
            "merged_at",
            "closed_by",
            "closed_at",
            "target_branch",
            "source_branch",
            "user_notes_count",
            "upvotes",
            "downvotes",
            "author",
            "assignees",
            "assignee",
            "reviewers",
            "source_project_id",
            "target_project_id",
            "labels",
            "draft",
            "work_in_progress",
            "milestone",
            "merge_when_pipeline_succeeds",
            "merge_status",
            "detailed_merge_status",
            "sha",
            "merge_commit_sha",
            "squash_commit_sha",
            "discussion_locked",
            "should_remove_source_branch",
            "force_remove_source_branch",
            "references",
            "web_url",
            "squash",
            "has_conflicts",
            "imported",
            "imported_from",
            "diff_refs",
        ],
        // merge_requests.md, List merge request diffs.
        Entity::Diff => &[
            "old_path",
            "new_path",
            "a_mode",
            "b_mode",
            "diff",
            "new_file",
            "renamed_file",
            "deleted_file",
            "generated_file",
        ],
        // notes.md, List project issue notes.
        Entity::Note => &[
            "id",
            "type",
            "body",
            "attachment",
            "author",
            "created_at",
            "updated_at",
            "system",
            "noteable_id",
            "noteable_type",
            "project_id",
            "noteable_iid",
            "resolvable",
            // discussions.md: a diff note's place and resolution.
            "position",
            "resolved",
            "resolved_by",
            "resolved_at",
            "confidential",
            "internal",
            "imported",
            "imported_from",
        ],
        // events.md, List a project's visible events (the "commented on" example).
        Entity::Event => &[
            "id",
            "title",
            "project_id",
            "action_name",
            "target_id",
            "target_iid",
            "target_type",
            "author_id",
            "target_title",
            "created_at",
            "note",
            "author",
            "author_username",
            "push_data",
            "imported",
            "imported_from",
        ],
        // pipelines.md, List project pipelines.
        Entity::Pipeline => &[
            "id",
            "iid",
            "project_id",
            "sha",
            "ref",
            "status",
            "source",
            "created_at",
            "updated_at",
            "web_url",
            "name",
        ],
        // jobs.md, List pipeline jobs.
        Entity::Job => &[
            "id",
            "name",
            "stage",
            "status",
            "ref",
            "tag",
            "allow_failure",
            "created_at",
            "started_at",
            "finished_at",
            "duration",
            "queued_duration",
            "web_url",
            "user",
            "commit",
            "pipeline",
            "runner",
            "artifacts",
            "failure_reason",
            "coverage",
            "archived",
        ],
        // emoji_reactions.md, Add a new emoji reaction.
        Entity::AwardEmoji => &[
            "id",
            "name",
            "user",
            "created_at",
            "updated_at",
            "awardable_id",
            "awardable_type",
        ],
        // discussions.md, List project merge request discussion items.
        Entity::Discussion => &["id", "individual_note", "notes"],
        // resource_label_events.md.
        Entity::LabelEvent => &[
            "id",
            "user",
            "created_at",
            "resource_type",
            "resource_id",
            "label",
            "action",
        ],
        // members.md, Get a member.
        Entity::Member => &[
            "id",
            "username",
            "name",
            "state",
            "avatar_url",
            "web_url",
            "access_level",
            "created_at",
            "expires_at",
            "email",
            "group_saml_identity",
            "membership_state",
        ],
    }
}

/// Fields that hold a nested entity, and the fields that one may have.
fn nested(field: &str) -> Option<&'static [&'static str]> {
    match field {
        "author" | "user" | "assignee" | "closed_by" | "merged_by" | "merge_user" => {
            Some(fields(Entity::User))
        }
        // events.md: a comment's event carries the note; a discussion its notes.
        "note" | "notes" => Some(fields(Entity::Note)),
        // discussions.md: where a diff note sits.
        "position" => Some(&[
            "base_sha",
            "start_sha",
            "head_sha",
            "old_path",
            "new_path",
            "position_type",
            "old_line",
            "new_line",
            "line_range",
        ]),
        // merge_requests.md, Get single MR: the commits the diff is between.
        "diff_refs" => Some(&["base_sha", "head_sha", "start_sha"]),
        // resource_label_events.md: the label object.
        "label" => Some(&[
            "id",
            "name",
            "color",
            "description",
            "text_color",
            "description_html",
        ]),
        _ => None,
    }
}

/// The documented endpoint `method` + `segments` (decoded, below /api/v4/) is, if any.
pub fn endpoint(method: &str, segments: &[&str]) -> Option<&'static Endpoint> {
    ENDPOINTS.iter().find(|e| {
        let pattern: Vec<&str> = e.path.split('/').collect();
        e.method == method
            && pattern.len() == segments.len()
            && pattern
                .iter()
                .zip(segments)
                .all(|(p, s)| p.starts_with(':') || p == s)
    })
}

/// A request the fake refuses: GitLab's words for its answer (400), and
/// the conformance violation it records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub error: String,
    pub violation: String,
}

/// What in a request GitLab does not document for its endpoint, or
/// refuses: a required attribute missing or a value its type does not
/// take (the API's parameter validation answers 400 with
/// `{"error": "title is missing, ..."}` before anything is done).
pub fn check_request(
    method: &str,
    segments: &[&str],
    query: &[String],
    body: &Value,
) -> Result<&'static Endpoint, Refusal> {
    let undocumented = |why: String| Refusal {
        error: why.clone(),
        violation: why,
    };
    let Some(e) = endpoint(method, segments) else {
        return Err(undocumented(format!(
            "{method} /{} is not an endpoint forgehand's GitLab client may use (see gitlab_api.rs)",
            segments.join("/")
        )));
    };
    for key in query {
        if !e.query.contains(&key.as_str()) {
            return Err(undocumented(format!(
                "{method} {}: query parameter {key:?} is not documented ({})",
                e.path, e.doc
            )));
        }
    }
    let empty = serde_json::Map::new();
    let object = body.as_object().unwrap_or(&empty);
    for key in object.keys() {
        if !e.body.contains(&key.as_str()) {
            return Err(undocumented(format!(
                "{method} {}: body attribute {key:?} is not documented ({})",
                e.path, e.doc
            )));
        }
    }
    let problems = attribute_problems(e, query, object);
    if problems.is_empty() {
        return Ok(e);
    }
    let error = problems.join(", ");
    Err(Refusal {
        violation: format!("{method} {}: {error} ({})", e.path, e.doc),
        error,
    })
}

/// GitLab's words for each required attribute missing and each value of a
/// type the attribute does not take, in the endpoint's order.
fn attribute_problems(e: &Endpoint, query: &[String], body: &serde_json::Map<String, Value>) -> Vec<String> {
    let required = required(e);
    e.body
        .iter()
        .filter_map(|name| match body.get(*name) {
            None if required.contains(name) && !query.iter().any(|q| q == name) => {
                Some(format!("{name} is missing"))
            }
            Some(value) if !kind(name).takes(value) => Some(format!("{name} is invalid")),
            _ => None,
        })
        .collect()
}

/// The type GitLab's docs give a body attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Integer,
    Boolean,
    /// A comma-separated string or an array of strings.
    Labels,
    /// ISO 8601.
    DateTime,
}

impl Kind {
    /// Whether the API coerces `value` to this type (a number is taken as
    /// text and a numeric string as an integer; `"true"`/`"false"` as a
    /// boolean).
    fn takes(self, value: &Value) -> bool {
        match (self, value) {
            (Kind::Text, Value::String(_) | Value::Number(_)) => true,
            (Kind::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
            (Kind::Integer, Value::String(s)) => s.parse::<i64>().is_ok(),
            (Kind::Boolean, Value::Bool(_)) => true,
            (Kind::Boolean, Value::String(s)) => matches!(s.as_str(), "true" | "false"),
            (Kind::Labels, Value::String(_)) => true,
            (Kind::Labels, Value::Array(items)) => items.iter().all(Value::is_string),
            (Kind::DateTime, Value::String(s)) => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
            _ => false,
        }
    }
}

/// The documented type of each body attribute the endpoints above take.
fn kind(attribute: &str) -> Kind {
    match attribute {
        "note_id" => Kind::Integer,
        "remove_source_branch" | "resolved" => Kind::Boolean,
        "add_labels" | "remove_labels" | "labels" => Kind::Labels,
        "created_at" => Kind::DateTime,
        _ => Kind::Text,
    }
}

/// The attributes `e` requires (its page's "Required: Yes").
fn required(e: &Endpoint) -> &'static [&'static str] {
    match (e.method, e.path) {
        ("POST", "projects/:id/merge_requests") => &["source_branch", "target_branch", "title"],
        ("POST", "projects/:id/issues") => &["title"],
        ("POST", path) if path.ends_with("/award_emoji") => &["name"],
        ("POST" | "PUT", path) if path.contains("/notes") => &["body"],
        ("PUT", "projects/:id/merge_requests/:iid/discussions/:discussion_id") => &["resolved"],
        _ => &[],
    }
}

/// What in an answer GitLab does not document for `entity`.
pub fn check_answer(entity: Entity, answer: &Value) -> Result<(), String> {
    match answer {
        Value::Array(items) => items.iter().try_for_each(|i| check_answer(entity, i)),
        Value::Object(object) => check_object(&format!("{entity:?}"), fields(entity), object),
        _ => Ok(()),
    }
}

fn check_object(name: &str, allowed: &[&str], object: &serde_json::Map<String, Value>) -> Result<(), String> {
    for (key, value) in object {
        if !allowed.contains(&key.as_str()) {
            return Err(format!(
                "{name}: field {key:?} is not in GitLab's documented answer"
            ));
        }
        match (nested(key), value) {
            (Some(inner), Value::Object(o)) => check_object(&format!("{name}.{key}"), inner, o)?,
            (Some(inner), Value::Array(items)) => {
                for o in items.iter().filter_map(Value::as_object) {
                    check_object(&format!("{name}.{key}[]"), inner, o)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(method: &str, path: &str, query: &[&str], body: Value) -> Option<String> {
        let segments: Vec<&str> = path.split('/').collect();
        let query: Vec<String> = query.iter().map(|q| (*q).to_owned()).collect();
        check_request(method, &segments, &query, &body)
            .err()
            .map(|r| r.error)
    }

    #[test]
    fn a_new_issue_needs_its_title_and_takes_labels_as_a_list() {
        assert_eq!(
            refusal("POST", "projects/7/issues", &[], json!({"description": "d"})).as_deref(),
            Some("title is missing")
        );
        assert_eq!(
            refusal(
                "POST",
                "projects/7/issues",
                &[],
                json!({"title": "t", "labels": "a,b"})
            ),
            None
        );
        assert_eq!(
            refusal(
                "POST",
                "projects/7/issues",
                &[],
                json!({"title": "t", "labels": 3})
            )
            .as_deref(),
            Some("labels is invalid")
        );
        assert!(refusal("GET", "projects/7/issues", &["author_username"], Value::Null).is_none());
    }

    #[test]
    fn bodies_gitlab_refuses_are_refused_in_its_words() {
        let mr = "projects/7/merge_requests";
        assert_eq!(
            refusal("POST", mr, &[], json!({"source_branch": "b", "description": "d"})).as_deref(),
            Some("target_branch is missing, title is missing")
        );
        assert_eq!(
            refusal(
                "POST",
                mr,
                &[],
                json!({"source_branch": "b", "target_branch": "main", "title": "t", "remove_source_branch": "yes"})
            )
            .as_deref(),
            Some("remove_source_branch is invalid")
        );
        let note = "projects/7/merge_requests/3/discussions/abc/notes";
        assert_eq!(
            refusal("POST", note, &[], json!({})).as_deref(),
            Some("body is missing")
        );
        assert_eq!(
            refusal("POST", note, &[], json!({"body": "b", "note_id": "x7"})).as_deref(),
            Some("note_id is invalid")
        );
        assert_eq!(
            refusal("POST", note, &[], json!({"body": "b", "created_at": "yesterday"})).as_deref(),
            Some("created_at is invalid")
        );
        assert_eq!(
            refusal("PUT", "projects/7/issues/3", &[], json!({"add_labels": [1]})).as_deref(),
            Some("add_labels is invalid")
        );
        assert_eq!(
            refusal(
                "POST",
                "projects/7/issues/3/award_emoji",
                &[],
                json!({"name": null})
            )
            .as_deref(),
            Some("name is invalid")
        );
    }

    #[test]
    fn bodies_gitlab_takes_pass() {
        let ok = |method: &str, path: &str, query: &[&str], body: Value| {
            assert_eq!(
                refusal(method, path, query, body.clone()),
                None,
                "{method} {path} {body}"
            );
        };
        ok(
            "POST",
            "projects/7/merge_requests",
            &[],
            json!({"source_branch": "b", "target_branch": "main", "title": "Draft: t", "remove_source_branch": true}),
        );
        ok(
            "PUT",
            "projects/7/issues/3",
            &[],
            json!({"add_labels": "a,b", "remove_labels": ["c"]}),
        );
        ok(
            "POST",
            "projects/7/merge_requests/3/discussions/abc/notes",
            &[],
            json!({"body": "b", "note_id": "12", "created_at": "2026-12-08T01:02:03Z"}),
        );
        ok(
            "PUT",
            "projects/7/merge_requests/3/discussions/abc",
            &["resolved"],
            json!({}),
        );
        ok(
            "PUT",
            "projects/7/merge_requests/3/discussions/abc",
            &[],
            json!({"resolved": "true"}),
        );
    }
}
