//! Best of N on a scripted model: on a [`TurnModel`]'s server, the agent's
//! requests of each attempt are answered by that attempt's own script (by
//! turn, as the turn model does; the attempt is named in the first user
//! message), and a judgement by the judge's answer. Everything else
//! (classification, planning) stays with the turn model.

use super::provider_rules::Issued;
use super::{endpoint, model_and_rules, reply_for, success, view, Format, Reply, TurnModel};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use wiremock::{Request, ResponseTemplate};

/// How forgehand's judge of best of N begins its instructions.
pub const JUDGE_SYSTEM: &str = "You judge candidate changes to a code base.";

/// What an attempt's first message says of it: `This is attempt 2 of 3`.
const ATTEMPT_MARK: &str = "This is attempt ";

/// The attempt a request belongs to (1-based), from its first user message.
pub fn attempt_of(format: Format, body: &Value) -> Option<usize> {
    let v = view(format, body);
    let first = v.users.first()?;
    let rest = &first[first.find(ATTEMPT_MARK)? + ATTEMPT_MARK.len()..];
    rest.split(' ').next()?.parse().ok()
}

/// Whether `body` is a judgement of best of N.
pub fn is_judgement(format: Format, body: &Value) -> bool {
    view(format, body).system.starts_with(JUDGE_SYSTEM)
}

struct ForAttempts {
    format: Format,
}

impl wiremock::Match for ForAttempts {
    fn matches(&self, request: &Request) -> bool {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return false;
        };
        is_judgement(self.format, &body) || attempt_of(self.format, &body).is_some()
    }
}

struct ByAttempt {
    format: Format,
    scripts: Vec<Vec<Reply>>,
    judge: String,
    billed: Option<(u64, u64)>,
    issued: Mutex<Issued>,
    answered: AtomicUsize,
}

impl wiremock::Respond for ByAttempt {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let mut issued = self.issued.lock().unwrap();
        let (model, checked) = model_and_rules(self.format, request.url.path(), &body, &issued);
        if let Err(error) = checked {
            return ResponseTemplate::new(400).set_body_json(error);
        }
        let reply = if is_judgement(self.format, &body) {
            Reply::Text(self.judge.clone())
        } else {
            let script = &self.scripts[attempt_of(self.format, &body)
                .unwrap_or(1)
                .clamp(1, self.scripts.len())
                - 1];
            let turn = view(self.format, &body).turns;
            script[turn.min(script.len() - 1)].clone()
        };
        let n = self.answered.fetch_add(1, Ordering::SeqCst);
        let mut answer = match reply_for(self.format, &model, &body, reply, n, &mut issued) {
            Ok(answer) => answer,
            Err(error) => return ResponseTemplate::new(400).set_body_json(error),
        };
        if let (Some((prompt, completion)), Format::OpenAi) = (self.billed, self.format) {
            answer["model"] = json!(model);
            answer["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
        }
        success(self.format, request, &body, answer)
    }
}

/// From now on `model` answers each attempt's agent by `scripts[n - 1]`
/// (the last reply repeats), and a judgement with `judge`; each answer
/// reports `billed` usage (prompt, completion tokens) when given.
pub async fn answer_attempts(
    model: &TurnModel,
    scripts: Vec<Vec<Reply>>,
    judge: &str,
    billed: Option<(u64, u64)>,
) {
    assert!(scripts.iter().all(|s| !s.is_empty()));
    endpoint(model.format)
        .and(ForAttempts { format: model.format })
        .respond_with(ByAttempt {
            format: model.format,
            scripts,
            judge: judge.to_owned(),
            billed,
            issued: Mutex::default(),
            answered: AtomicUsize::new(0),
        })
        .with_priority(1)
        .mount(&model.server)
        .await;
}

/// The requests of `model` that belong to attempt `n`.
pub async fn requests_of_attempt(model: &TurnModel, n: usize) -> Vec<Value> {
    model
        .all_requests()
        .await
        .into_iter()
        .filter(|r| attempt_of(model.format, r) == Some(n))
        .collect()
}

/// The judgements `model` was asked for.
pub async fn judgements(model: &TurnModel) -> Vec<Value> {
    model
        .all_requests()
        .await
        .into_iter()
        .filter(|r| is_judgement(model.format, r))
        .collect()
}
