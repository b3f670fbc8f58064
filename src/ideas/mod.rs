//! Idea options (`generate_idea_categories`): categories of
//! perspectives an expert would consider on a subject, then options for
//! each, to widen a plan. Two stages with the prompts under prompts/ideas/; markdown
//! fences stripped; a JSON-repair request when an answer does not parse;
//! three attempts per call; a minimum interval between model calls with
//! bounded parallelism; random sampling in memory; the tool's fixed error codes.

use crate::llm::{ChatModel, ChatRequest, LlmError, Message};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, Semaphore, SemaphorePermit};
// tokio's clock, so tests can pause it.
use tokio::time::Instant;

/// Attempts per model call: the first and up to 3 retries.
pub const ATTEMPTS: u32 = 3;

/// The tool's input, with its defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdeaRequest {
    /// The expert whose eyes the categories are seen through.
    pub expert_role: String,
    /// The subject to think about.
    pub target_subject: String,
    /// About how many categories (10-30, default 20).
    #[serde(default = "default_categories")]
    pub target_categories: u32,
    /// About how many options per category (10-200, default 20); fewer where the category's nature gives fewer.
    #[serde(default = "default_options")]
    pub target_options_per_category: u32,
    /// Return a random sample of each category's options.
    #[serde(default)]
    pub randomize_selection: bool,
    /// Most options per category when sampling (5-200, default 10); never padded.
    #[serde(default = "default_sample")]
    pub random_sample_size: u32,
    /// Extra context for the subject as a whole (the original request).
    #[serde(default)]
    pub domain_context: Option<String>,
}

fn default_categories() -> u32 {
    20
}
fn default_options() -> u32 {
    20
}
fn default_sample() -> u32 {
    10
}

impl IdeaRequest {
    pub fn new(expert_role: &str, target_subject: &str) -> IdeaRequest {
        IdeaRequest {
            expert_role: expert_role.to_owned(),
            target_subject: target_subject.to_owned(),
            target_categories: default_categories(),
            target_options_per_category: default_options(),
            randomize_selection: false,
            random_sample_size: default_sample(),
            domain_context: None,
        }
    }

    /// Checks every field against its range; the error names the field and the range.
    pub fn validate(&self) -> Result<(), IdeaError> {
        let mut problems = Vec::new();
        if self.expert_role.trim().is_empty() {
            problems.push("expert_role must not be empty".to_owned());
        }
        if self.target_subject.trim().is_empty() {
            problems.push("target_subject must not be empty".to_owned());
        }
        let ranges = [
            ("target_categories", self.target_categories, 10, 30, 20),
            (
                "target_options_per_category",
                self.target_options_per_category,
                10,
                200,
                20,
            ),
            ("random_sample_size", self.random_sample_size, 5, 200, 10),
        ];
        for (name, value, min, max, default) in ranges {
            if !(min..=max).contains(&value) {
                problems.push(format!(
                    "{name} is {value}; use {min} to {max} (default {default})"
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(IdeaError::new(ErrorCode::InvalidParameters, problems.join("; ")))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Category {
    pub name: String,
    pub description: String,
    pub options: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    pub total_categories: usize,
    pub total_options: usize,
    pub processing_time_ms: u64,
    /// Model calls made (repairs and retries included).
    pub model_calls: u32,
    /// Categories left out because their options could not be generated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_categories: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdeaOutput {
    pub expert_role: String,
    pub target_subject: String,
    pub categories: Vec<Category>,
    pub metadata: Metadata,
}

impl IdeaOutput {
    /// The options as perspectives for the plan debate, in Markdown.
    pub fn perspectives(&self) -> String {
        let mut out = String::new();
        for c in &self.categories {
            out.push_str(&format!(
                "- **{}** ({}): {}\n",
                c.name,
                c.description.trim(),
                c.options.join("; ")
            ));
        }
        out
    }
}

/// The tool's error codes, which callers match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    InvalidApiKey,
    ApiRateLimit,
    ApiServiceError,
    InvalidParameters,
    JsonParseError,
    GenerationFailed,
    InternalError,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidApiKey => "INVALID_API_KEY",
            ErrorCode::ApiRateLimit => "API_RATE_LIMIT",
            ErrorCode::ApiServiceError => "API_SERVICE_ERROR",
            ErrorCode::InvalidParameters => "INVALID_PARAMETERS",
            ErrorCode::JsonParseError => "JSON_PARSE_ERROR",
            ErrorCode::GenerationFailed => "GENERATION_FAILED",
            ErrorCode::InternalError => "INTERNAL_ERROR",
        }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[error("{}: {message}", code.as_str())]
pub struct IdeaError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl IdeaError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> IdeaError {
        IdeaError {
            code,
            message: message.into(),
            details: None,
        }
    }

    /// Whether another attempt can help.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.code,
            ErrorCode::ApiRateLimit | ErrorCode::ApiServiceError | ErrorCode::JsonParseError
        )
    }

    fn from_llm(err: &LlmError) -> IdeaError {
        let code = match err {
            LlmError::NoModel { .. } => ErrorCode::InvalidApiKey,
            LlmError::Rejected {
                status: 401 | 403, ..
            } => ErrorCode::InvalidApiKey,
            LlmError::Overloaded { .. } => ErrorCode::ApiRateLimit,
            LlmError::Server { .. }
            | LlmError::Network { .. }
            | LlmError::Decode { .. }
            | LlmError::StreamCut { .. }
            | LlmError::StreamIdle { .. } => ErrorCode::ApiServiceError,
            LlmError::Rejected { .. }
            | LlmError::Refused { .. }
            | LlmError::TooLarge { .. }
            | LlmError::Unsupported { .. }
            | LlmError::Budget(_) => ErrorCode::InternalError,
        };
        let mut message = err.to_string();
        if code == ErrorCode::InvalidApiKey {
            message.push_str(". Set GEMINI_API_KEY (or OPENAI_API_KEY / ANTHROPIC_API_KEY for a model under llm.models) to a valid key");
        }
        IdeaError::new(code, message)
    }
}

/// Spaces the starts of model calls by `min_interval`, with at most
/// `max_parallel` in flight.
pub struct Pacer {
    min_interval: Duration,
    slots: Semaphore,
    next_start: Mutex<Option<Instant>>,
}

impl Pacer {
    pub fn new(min_interval: Duration, max_parallel: usize) -> Pacer {
        Pacer {
            min_interval,
            slots: Semaphore::new(max_parallel.max(1)),
            next_start: Mutex::new(None),
        }
    }

    /// Waits for a slot and for the interval since the previous start.
    pub async fn start(&self) -> Option<SemaphorePermit<'_>> {
        let permit = self.slots.acquire().await.ok();
        let at = {
            let mut next = self.next_start.lock().await;
            let now = Instant::now();
            let at = next.map_or(now, |n| n.max(now));
            *next = Some(at + self.min_interval);
            at
        };
        tokio::time::sleep_until(at).await;
        permit
    }
}

/// Generates idea options with one model.
pub struct Generator<'a> {
    pub model: &'a dyn ChatModel,
    /// A model by name (`ideas.model`); `None`: the router's choice.
    pub model_name: Option<&'a str>,
    pub pacer: &'a Pacer,
    pub max_output_tokens: u32,
    /// Where the calls' tokens are added, if anywhere.
    pub usage: Option<&'a crate::llm::usage::Meter>,
    pub prompts: &'a crate::prompts::IdeaPrompts,
}

#[derive(Debug, Deserialize)]
struct RawCategory {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    example_choices: Vec<String>,
}

const CATEGORIES_SHAPE: &str =
    r#"[{"name": "...", "description": "...", "example_choices": ["...", "...", "..."]}]"#;
const OPTIONS_SHAPE: &str = r#"["...", "..."]"#;

impl Generator<'_> {
    /// Runs both stages for `request` (validated first).
    pub async fn generate(&self, request: &IdeaRequest) -> Result<IdeaOutput, IdeaError> {
        request.validate()?;
        let started = Instant::now();
        let calls = AtomicU32::new(0);
        let domain = request
            .domain_context
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .unwrap_or("(none)");
        let raw = self.categories(request, domain, &calls).await?;
        let answers = self.options(request, domain, &raw, &calls).await;
        let mut categories = Vec::new();
        let mut skipped = Vec::new();
        let mut last_error = None;
        for (c, answer) in raw.into_iter().zip(answers) {
            match answer {
                Ok(values) => categories.push(Category {
                    name: c.name.trim().to_owned(),
                    description: c.description.trim().to_owned(),
                    options: option_list(values, request),
                }),
                Err(e) => {
                    tracing::warn!(category = %c.name, "no options for the category: {e}");
                    skipped.push(format!("{}: {e}", c.name));
                    last_error = Some(e);
                }
            }
        }
        if categories.is_empty() {
            let e = last_error.unwrap_or_else(|| IdeaError::new(ErrorCode::InternalError, "no category"));
            return Err(stage_failed("the options of every category", e));
        }
        let total_options = categories.iter().map(|c| c.options.len()).sum();
        Ok(IdeaOutput {
            expert_role: request.expert_role.clone(),
            target_subject: request.target_subject.clone(),
            metadata: Metadata {
                total_categories: categories.len(),
                total_options,
                processing_time_ms: started.elapsed().as_millis() as u64,
                model_calls: calls.load(std::sync::atomic::Ordering::Relaxed),
                skipped_categories: skipped,
            },
            categories,
        })
    }

    /// Stage one: the categories, each with a name; none is a failure.
    async fn categories(
        &self,
        request: &IdeaRequest,
        domain: &str,
        calls: &AtomicU32,
    ) -> Result<Vec<RawCategory>, IdeaError> {
        let categories_prompt = fill(
            &self.prompts.categories,
            &[
                ("EXPERT_ROLE", &request.expert_role),
                ("TARGET_SUBJECT", &request.target_subject),
                ("TARGET_CATEGORIES", &request.target_categories.to_string()),
                ("DOMAIN_CONTEXT", domain),
            ],
        );
        let raw: Vec<RawCategory> = self
            .ask(&categories_prompt, CATEGORIES_SHAPE, calls)
            .await
            .map_err(|e| stage_failed("the categories", e))?;
        let raw: Vec<RawCategory> = raw.into_iter().filter(|c| !c.name.trim().is_empty()).collect();
        if raw.is_empty() {
            return Err(IdeaError::new(
                ErrorCode::GenerationFailed,
                "the model returned no categories",
            ));
        }
        Ok(raw)
    }

    /// Stage two: every category's options, asked at once; each answer
    /// stands alone, so one failed category leaves the others.
    async fn options(
        &self,
        request: &IdeaRequest,
        domain: &str,
        raw: &[RawCategory],
        calls: &AtomicU32,
    ) -> Vec<Result<Vec<Value>, IdeaError>> {
        let target_options = request.target_options_per_category.to_string();
        let asks = raw.iter().map(|c| {
            let examples = serde_json::to_string(&c.example_choices).unwrap_or_default();
            let prompt = fill(
                &self.prompts.options,
                &[
                    ("EXPERT_ROLE", &request.expert_role),
                    ("TARGET_SUBJECT", &request.target_subject),
                    ("CATEGORY_NAME", &c.name),
                    ("CATEGORY_DESCRIPTION", &c.description),
                    ("EXAMPLE_CHOICES", &examples),
                    ("TARGET_OPTIONS", &target_options),
                    ("DOMAIN_CONTEXT", domain),
                ],
            );
            async move { self.ask::<Vec<Value>>(&prompt, OPTIONS_SHAPE, calls).await }
        });
        futures_util::future::join_all(asks).await
    }

    /// One stage's call with up to [`ATTEMPTS`] attempts, each with a
    /// repair request when the answer does not parse.
    async fn ask<T: serde::de::DeserializeOwned>(
        &self,
        prompt: &str,
        shape: &str,
        calls: &std::sync::atomic::AtomicU32,
    ) -> Result<T, IdeaError> {
        let mut last = IdeaError::new(ErrorCode::InternalError, "no attempt was made");
        for attempt in 1..=ATTEMPTS {
            let answer = match self.call(prompt, calls).await {
                Ok(text) => text,
                Err(e) if e.is_retryable() => {
                    tracing::info!(attempt, "idea options: {e}; trying again");
                    last = e;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let parse_error = match parse_json::<T>(&answer) {
                Ok(value) => return Ok(value),
                Err(e) => e,
            };
            let repair = fill(
                &self.prompts.repair,
                &[("ERROR", &parse_error), ("SHAPE", shape), ("ANSWER", &answer)],
            );
            match self.call(&repair, calls).await {
                Ok(text) => match parse_json::<T>(&text) {
                    Ok(value) => return Ok(value),
                    Err(e) => {
                        last = IdeaError::new(
                            ErrorCode::JsonParseError,
                            format!("the answer is not the JSON asked for, even after a repair request: {e}"),
                        )
                    }
                },
                Err(e) if e.is_retryable() => last = e,
                Err(e) => return Err(e),
            }
            tracing::info!(attempt, "idea options: {last}; trying again");
        }
        Err(last)
    }

    async fn call(&self, prompt: &str, calls: &std::sync::atomic::AtomicU32) -> Result<String, IdeaError> {
        let _slot = self.pacer.start().await;
        calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let request = ChatRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![Message::User(prompt.to_owned())],
            tools: Vec::new(),
            max_output_tokens: self.max_output_tokens,
            temperature: Some(0.9),
            reasoning_effort: None,
            cache_system: false,
            json_output: false,
        };
        let answer = match self.model_name {
            Some(name) => self.model.chat_on(name, &request).await,
            None => self.model.chat(&request).await,
        };
        answer
            .map(|r| {
                crate::llm::usage::record(self.usage, &r);
                r.text
            })
            .map_err(|e| IdeaError::from_llm(&e))
    }
}

/// A stage that failed after its retries: `GENERATION_FAILED` with the
/// cause's code in the details when the answers never parsed; key, rate
/// limit and service errors keep their own codes.
fn stage_failed(stage: &str, cause: IdeaError) -> IdeaError {
    match cause.code {
        // These say what to do about it better than a generic failure.
        ErrorCode::InvalidApiKey
        | ErrorCode::InvalidParameters
        | ErrorCode::ApiRateLimit
        | ErrorCode::ApiServiceError => cause,
        _ => IdeaError {
            code: ErrorCode::GenerationFailed,
            message: format!(
                "{stage} could not be generated after {ATTEMPTS} attempts: {}",
                cause.message
            ),
            details: Some(json!({"cause": cause.code.as_str()})),
        },
    }
}

/// Strips markdown fences around the model's JSON and parses it.
pub fn parse_json<T: serde::de::DeserializeOwned>(answer: &str) -> Result<T, String> {
    let text = answer.replace("```json", "").replace("```", "");
    serde_json::from_str(text.trim()).map_err(|e| e.to_string())
}

/// Keeps a random `max` of `options` (all of them when there are fewer).
pub fn sample(options: &mut Vec<String>, max: usize) {
    fastrand::shuffle(options);
    options.truncate(max);
}

/// Fills the prompts' `{{NAME}}` places in one pass.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match after.find("}}").and_then(|close| {
            let name = &after[..close];
            values.iter().find(|(k, _)| *k == name).map(|(_, v)| (close, *v))
        }) {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A pacer shared by every generation of a process (the key's limit is one).
pub fn shared_pacer(config: &crate::config::IdeasConfig) -> Arc<Pacer> {
    Arc::new(Pacer::new(config.min_interval, config.max_parallel))
}

/// A category's options as text, trimmed, without blanks or repeats, and
/// sampled when the request asks for a random selection.
fn option_list(values: Vec<Value>, request: &IdeaRequest) -> Vec<String> {
    let mut options: Vec<String> = Vec::new();
    for v in values {
        let text = match v {
            Value::String(s) => s,
            other => other.to_string(),
        };
        let text = text.trim().to_owned();
        if !text.is_empty() && !options.contains(&text) {
            options.push(text);
        }
    }
    if request.randomize_selection {
        sample(&mut options, request.random_sample_size as usize);
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_filled_once() {
        let text = fill("「{{A}}」 {{B}} {{A}} {{C}}", &[("A", "x{{B}}"), ("B", "y")]);
        assert_eq!(text, "「x{{B}}」 y x{{B}} {{C}}");
    }

    #[test]
    fn fences_are_stripped() {
        let v: Vec<String> = parse_json("```json\n[\"a\", \"b\"]\n```").unwrap();
        assert_eq!(v, vec!["a", "b"]);
        assert!(parse_json::<Vec<String>>("[\"a\",").is_err());
    }
}
