//! GitLab's deliveries: `X-Gitlab-Token` carries the webhook's secret
//! token as it was entered; `X-Gitlab-Event` names the hook and
//! `X-Gitlab-Event-UUID` (or, on older versions, `X-Gitlab-Webhook-UUID`)
//! the delivery. Every hook forgehand reads names its project by
//! `project.path_with_namespace`, but for the Job Hook of older GitLab
//! versions, which has only `project_id` (and a display `project_name`,
//! not a path): the project is then named by its id.

use super::{same_secret, text_at, Delivery, Doorbell, Received, RepoName, Topic};
use crate::config::Secret;
use crate::forge::ForgeKind;

/// The delivery's id and doorbell; `None` for a hook forgehand does not act on.
pub(super) fn check(
    secret: Option<&Secret>,
    delivery: &Delivery<'_>,
) -> Result<Option<(Option<String>, Doorbell)>, Received> {
    let Some(secret) = secret else {
        return Err(Received::Refused(
            "a GitLab delivery, but FORGEHAND_GITLAB_WEBHOOK_SECRET is not set".into(),
        ));
    };
    let header = delivery.header;
    let given = header("x-gitlab-token").unwrap_or_default();
    if !same_secret(given.as_bytes(), secret.expose().as_bytes()) {
        return Err(Received::Refused(
            "X-Gitlab-Token is missing or is not FORGEHAND_GITLAB_WEBHOOK_SECRET: set the webhook's secret token".into(),
        ));
    }
    let event = header("x-gitlab-event").unwrap_or_default();
    let Some(topic) = topic(&event) else {
        return Ok(None);
    };
    let payload: serde_json::Value = serde_json::from_slice(delivery.body)
        .map_err(|_| Received::Malformed(format!("a {event} whose body is not JSON")))?;
    let Some(repo) = project(&payload) else {
        return Err(Received::Malformed(format!(
            "a {event} that names no project (neither project.path_with_namespace nor project_id)"
        )));
    };
    let id = header("x-gitlab-event-uuid").or_else(|| header("x-gitlab-webhook-uuid"));
    let doorbell = Doorbell {
        forge: ForgeKind::GitLab,
        repo,
        topic,
    };
    Ok(Some((id, doorbell)))
}

/// The project a payload is about: by path where it has one, else by id.
fn project(payload: &serde_json::Value) -> Option<RepoName> {
    if let Some(path) = text_at(payload, &["project", "path_with_namespace"]) {
        return Some(RepoName::Path(path.to_owned()));
    }
    let id = payload.get("project_id").and_then(serde_json::Value::as_u64)?;
    Some(RepoName::ProjectId {
        id,
        display: text_at(payload, &["project_name"]).unwrap_or_default().to_owned(),
    })
}

/// What a hook rings for.
fn topic(event: &str) -> Option<Topic> {
    match event {
        "Issue Hook"
        | "Confidential Issue Hook"
        | "Merge Request Hook"
        | "Note Hook"
        | "Confidential Note Hook" => Some(Topic::Items),
        "Pipeline Hook" | "Job Hook" => Some(Topic::Checks),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// The `project` object of GitLab's documented webhook payloads.
    fn project_object() -> Value {
        json!({
            "id": 1,
            "name": "Gitlab Test",
            "description": "Aut reprehenderit ut est.",
            "web_url": "http://example.com/gitlabhq/gitlab-test",
            "avatar_url": null,
            "git_ssh_url": "git@example.com:gitlabhq/gitlab-test.git",
            "git_http_url": "http://example.com/gitlabhq/gitlab-test.git",
            "namespace": "GitlabHQ",
            "visibility_level": 20,
            "path_with_namespace": "gitlabhq/gitlab-test",
            "default_branch": "master",
            "ci_config_path": null,
            "homepage": "http://example.com/gitlabhq/gitlab-test",
            "url": "http://example.com/gitlabhq/gitlab-test.git",
            "ssh_url": "git@example.com:gitlabhq/gitlab-test.git",
            "http_url": "http://example.com/gitlabhq/gitlab-test.git"
        })
    }

    fn user() -> Value {
        json!({"id": 1, "name": "Administrator", "username": "root", "avatar_url": null, "email": "admin@example.com"})
    }

    /// The Job Hook as GitLab versions before the `project` object send it
    /// (`project_name` is the display name, not a path).
    fn older_job_hook() -> Value {
        json!({
            "object_kind": "build",
            "ref": "main",
            "tag": false,
            "before_sha": "0000000000000000000000000000000000000000",
            "sha": "95d49d1efbd941908580e79d65e4b5ecaf4a8305",
            "build_id": 3580121225u64,
            "build_name": "test",
            "build_stage": "test",
            "build_status": "success",
            "build_created_at": "2023-01-10 13:50:02 UTC",
            "build_started_at": "2023-01-10 13:50:05 UTC",
            "build_finished_at": "2023-01-10 13:50:54 UTC",
            "build_duration": 49.503592,
            "build_allow_failure": false,
            "build_failure_reason": "unknown_failure",
            "pipeline_id": 743121198,
            "project_id": 31537070,
            "project_name": "John Smith / release-tools-fake",
            "user": user(),
            "commit": {"id": 743121198, "sha": "95d49d1efbd941908580e79d65e4b5ecaf4a8305", "status": "running"},
            "repository": {
                "name": "release-tools-fake",
                "homepage": "https://gitlab.example/jsmithy2/release-tools-fake",
                "git_http_url": "https://gitlab.example/jsmithy2/release-tools-fake.git",
                "visibility_level": 20
            },
            "environment": null
        })
    }

    /// Every hook forgehand reads, in the shapes GitLab documents.
    fn documented() -> Vec<(&'static str, Value, Topic)> {
        let attributes =
            json!({"id": 301, "iid": 23, "title": "New API", "state": "opened", "action": "open"});
        let mut job = older_job_hook();
        job["project"] = project_object();
        vec![
            (
                "Issue Hook",
                json!({"object_kind": "issue", "event_type": "issue", "user": user(), "project": project_object(), "object_attributes": attributes, "labels": [], "changes": {}}),
                Topic::Items,
            ),
            (
                "Confidential Issue Hook",
                json!({"object_kind": "issue", "event_type": "confidential_issue", "user": user(), "project": project_object(), "object_attributes": attributes}),
                Topic::Items,
            ),
            (
                "Merge Request Hook",
                json!({"object_kind": "merge_request", "event_type": "merge_request", "user": user(), "project": project_object(), "object_attributes": attributes, "labels": [], "changes": {}}),
                Topic::Items,
            ),
            (
                "Note Hook",
                json!({"object_kind": "note", "event_type": "note", "user": user(), "project_id": 1, "project": project_object(), "object_attributes": {"id": 1244, "note": "@forgehand-bot please", "noteable_type": "Issue"}, "issue": attributes}),
                Topic::Items,
            ),
            (
                "Pipeline Hook",
                json!({"object_kind": "pipeline", "object_attributes": {"id": 31, "status": "success"}, "user": user(), "project": project_object(), "builds": []}),
                Topic::Checks,
            ),
            ("Job Hook", job, Topic::Checks),
        ]
    }

    fn check_payload(event: &str, payload: &Value) -> Result<Option<(Option<String>, Doorbell)>, Received> {
        let body = payload.to_string();
        let header = |name: &str| match name {
            "x-gitlab-token" => Some("token".to_owned()),
            "x-gitlab-event" => Some(event.to_owned()),
            "x-gitlab-event-uuid" => Some("13792a34-cac6-4fda-95a8-c58e00a3954e".to_owned()),
            _ => None,
        };
        check(
            Some(&Secret::new("token")),
            &Delivery {
                header: &header,
                body: body.as_bytes(),
            },
        )
    }

    #[test]
    fn every_documented_hook_names_its_project_by_path() {
        for (event, payload, topic) in documented() {
            let (id, doorbell) = check_payload(event, &payload).unwrap().unwrap();
            assert_eq!(id.as_deref(), Some("13792a34-cac6-4fda-95a8-c58e00a3954e"));
            assert_eq!(
                doorbell,
                Doorbell {
                    forge: ForgeKind::GitLab,
                    repo: RepoName::Path("gitlabhq/gitlab-test".into()),
                    topic,
                },
                "{event}"
            );
        }
    }

    #[test]
    fn an_older_job_hook_without_a_project_names_it_by_id() {
        let (_, doorbell) = check_payload("Job Hook", &older_job_hook()).unwrap().unwrap();
        assert_eq!(
            doorbell.repo,
            RepoName::ProjectId {
                id: 31537070,
                display: "John Smith / release-tools-fake".into()
            }
        );
        assert_eq!(doorbell.topic, Topic::Checks);
        let mut nameless = older_job_hook();
        nameless.as_object_mut().unwrap().remove("project_id");
        assert!(matches!(
            check_payload("Job Hook", &nameless),
            Err(Received::Malformed(why)) if why.contains("project_id")
        ));
    }
}
