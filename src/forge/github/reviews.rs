//! A pull request's review threads over GraphQL (REST has no threads and
//! cannot resolve one), and replies in them over REST.

use super::{GitHub, FORGE};
use crate::forge::retry::Repeat;
use crate::forge::{Comment, CommentPlace, ForgeError, ItemRef, ReviewThread};
use http::Method;
use serde::Deserialize;
use serde_json::{json, Value};

/// The first 100 threads of a pull request and the first 100 comments of
/// each: more than a review carries; the rest waits for the next run.
const THREADS: &str = "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { reviewThreads(first: 100) { nodes { id isResolved path line comments(first: 100) { nodes { databaseId body createdAt author { login } } } } } } } }";

const RESOLVE: &str =
    "mutation($thread: ID!) { resolveReviewThread(input: {threadId: $thread}) { thread { id isResolved } } }";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Thread {
    id: String,
    is_resolved: bool,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    line: Option<u64>,
    comments: Nodes<ThreadComment>,
}

#[derive(Deserialize)]
struct Nodes<T> {
    nodes: Vec<T>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadComment {
    database_id: u64,
    body: String,
    #[serde(default)]
    created_at: Option<String>,
    /// `null` for a deleted account.
    #[serde(default)]
    author: Option<Login>,
}

#[derive(Deserialize)]
struct Login {
    login: String,
}

impl GitHub {
    /// One GraphQL request; an answer with `errors` is an error naming them.
    pub(super) async fn graphql(
        &self,
        query: &str,
        variables: Value,
        what: &str,
    ) -> Result<Value, ForgeError> {
        let answer: Value = self
            .write(
                Method::POST,
                &self.graphql_url(),
                &json!({ "query": query, "variables": variables }),
                what,
                Repeat::Safe,
            )
            .await?;
        match answer.get("errors").and_then(Value::as_array) {
            Some(errors) if !errors.is_empty() => Err(ForgeError::Api {
                forge: FORGE,
                status: 200,
                what: what.into(),
                message: errors
                    .iter()
                    .filter_map(|e| e.get("message").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("; "),
            }),
            _ => Ok(answer),
        }
    }

    pub(super) async fn list_review_threads(&self, item: &ItemRef) -> Result<Vec<ReviewThread>, ForgeError> {
        let what = "read the pull request's review threads";
        let (owner, name) = item.repo.split_once('/').unwrap_or((item.repo.as_str(), ""));
        let answer = self
            .graphql(
                THREADS,
                json!({"owner": owner, "name": name, "number": item.number}),
                what,
            )
            .await?;
        let nodes = answer
            .pointer("/data/repository/pullRequest/reviewThreads/nodes")
            .cloned()
            .ok_or_else(|| ForgeError::NotFound {
                forge: FORGE,
                what: format!("pull request {item}"),
            })?;
        let threads: Vec<Thread> = serde_json::from_value(nodes).map_err(|e| ForgeError::Decode {
            forge: FORGE,
            what: what.into(),
            message: e.to_string(),
        })?;
        Ok(threads.into_iter().map(into_thread).collect())
    }

    /// `POST …/pulls/N/comments/ID/replies`, to the thread's first comment.
    pub(super) async fn reply_to(
        &self,
        item: &ItemRef,
        thread: &ReviewThread,
        body: &str,
    ) -> Result<(), ForgeError> {
        let first = thread.comments.first().ok_or_else(|| ForgeError::Setup {
            forge: FORGE,
            message: format!("review thread {} has no comment to reply to", thread.id),
        })?;
        let path = format!(
            "{}/pulls/{}/comments/{}/replies",
            Self::repo_path(&item.repo)?,
            item.number,
            first.id
        );
        let _: Value = self
            .write(
                Method::POST,
                &path,
                &json!({ "body": body }),
                "reply in a review thread",
                Repeat::Once,
            )
            .await?;
        Ok(())
    }

    pub(super) async fn resolve(&self, thread: &ReviewThread) -> Result<bool, ForgeError> {
        match self
            .graphql(RESOLVE, json!({ "thread": thread.id }), "resolve a review thread")
            .await
        {
            Ok(_) => Ok(true),
            // A token without write access to the pull request gets an error
            // in the answer, not an HTTP status.
            Err(ForgeError::Api {
                status: 200, message, ..
            }) => {
                tracing::warn!(thread = %thread.id, "GitHub did not resolve the review thread: {message}");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

fn into_thread(thread: Thread) -> ReviewThread {
    let place = CommentPlace::Line {
        path: thread.path.unwrap_or_default(),
        line: thread.line,
    };
    ReviewThread {
        id: thread.id,
        resolved: thread.is_resolved,
        comments: thread
            .comments
            .nodes
            .into_iter()
            .map(|c| Comment {
                id: c.database_id,
                author: c.author.map(|a| a.login).unwrap_or_else(|| "ghost".into()),
                body: c.body,
                place: place.clone(),
                created_at: c.created_at.unwrap_or_default(),
            })
            .collect(),
    }
}
