//! `sage-opinion` and `sage-review`: pack the paths, let the size
//! choose the model through the router (o3 up to 200K tokens, Gemini 2.5
//! Pro up to 1M, falling back on a missing key or an unreachable OpenAI),
//! and ask it. A review's SEARCH/REPLACE blocks are checked against the files.

use super::pack::{self, PackOptions, Packed};
use super::prompts::{self, Context};
use super::review::{self, CheckedBlock};
use crate::llm::usage::{Price, UsageReport};
use crate::llm::{ChatModel, LlmError, ModelInfo};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum SageError {
    #[error(transparent)]
    Pack(#[from] pack::PackError),
    #[error(transparent)]
    Model(#[from] LlmError),
    #[error(transparent)]
    Plan(#[from] super::debate::PlanError),
}

#[derive(Debug, Clone)]
pub struct SageAnswer {
    pub text: String,
    /// The model that answered.
    pub model: String,
    pub usage: UsageReport,
    pub packed_tokens: u64,
    pub files: usize,
    pub skipped: Vec<pack::Skipped>,
}

#[derive(Debug, Clone)]
pub struct ReviewAnswer {
    pub answer: SageAnswer,
    pub blocks: Vec<CheckedBlock>,
    /// Blocks that cannot be applied, and malformed ones, in words.
    pub problems: Vec<String>,
}

/// The model the router will choose for `tokens` of input: the first usable
/// one that fits (for logs and progress messages; the router decides).
pub fn expected_model(models: &[ModelInfo], tokens: u64) -> Option<&str> {
    models
        .iter()
        .find(|m| m.max_input_tokens >= tokens)
        .map(|m| m.name.as_str())
}

pub struct Sage<'a> {
    pub model: &'a dyn ChatModel,
    pub prices: &'a BTreeMap<String, Price>,
    pub max_output_tokens: u32,
    pub pack: PackOptions,
    pub prompts: std::sync::Arc<crate::prompts::Prompts>,
}

impl Sage<'_> {
    /// Packs `paths` under `root` (off the async threads).
    pub async fn pack(&self, root: &Path, paths: &[String]) -> Result<Packed, SageError> {
        let (root, paths, options) = (root.to_owned(), paths.to_vec(), self.pack);
        tokio::task::spawn_blocking(move || pack::pack(&root, &paths, options))
            .await
            .map_err(|e| LlmError::NoModel {
                detail: format!("packing stopped unexpectedly: {e}"),
            })?
            .map_err(SageError::from)
    }

    /// A second opinion on `prompt` with the packed files as context.
    pub async fn opinion(&self, packed: &Packed, prompt: &str) -> Result<SageAnswer, SageError> {
        self.ask(packed, prompt, &self.prompts.sage.opinion).await
    }

    /// Edits for `instruction` as SEARCH/REPLACE blocks, checked under `root`.
    pub async fn review(
        &self,
        root: &Path,
        packed: &Packed,
        instruction: &str,
    ) -> Result<ReviewAnswer, SageError> {
        let answer = self.ask(packed, instruction, &self.prompts.sage.review).await?;
        let (blocks, mut problems) = review::parse(&answer.text);
        let checked = review::check(root, blocks);
        problems.extend(review::problems(&checked));
        Ok(ReviewAnswer {
            answer,
            blocks: checked,
            problems,
        })
    }

    async fn ask(&self, packed: &Packed, request: &str, phase: &str) -> Result<SageAnswer, SageError> {
        let context = Context::new(self.prompts.clone(), &packed.xml, packed.tokens);
        let call = prompts::call(&context, request, phase, self.max_output_tokens);
        tracing::info!(
            tokens = context.tokens,
            files = packed.files.len(),
            model = expected_model(&self.model.models(), context.tokens).unwrap_or("none"),
            "asking sage"
        );
        let response = self.model.chat(&call).await?;
        let mut usage = UsageReport::new(self.prices.clone());
        usage.add(&response.model, response.usage);
        Ok(SageAnswer {
            text: response.text,
            model: response.model,
            usage,
            packed_tokens: packed.tokens,
            files: packed.files.len(),
            skipped: packed.skipped.clone(),
        })
    }
}
