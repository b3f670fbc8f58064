//! What forgehand knows of each model: its window, its output cap, the API
//! it is reached through, how it reasons and at which effort levels,
//! whether it accepts a temperature, and its prices. Requests are shaped
//! from this, never from a model's name.
//!
//! The knowledge comes from a snapshot of a public catalogue shipped with
//! forgehand (`catalogue/models.json`, written by `scripts/model-catalogue`
//! from LiteLLM's model list), and any field can be set per model under
//! `llm.models` (config wins). A model the snapshot does not know gets
//! plain defaults: no reasoning, a temperature, no price.

pub use crate::config::{Api, ReasoningKind};
use crate::config::{Price, ProviderKind};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Effort levels from least to most thought, across providers.
pub const EFFORT_LEVELS: [&str; 7] = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

fn effort_rank(level: &str) -> Option<usize> {
    EFFORT_LEVELS.iter().position(|l| *l == level)
}

/// Everything a request to one model is shaped by.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub name: String,
    pub provider: ProviderKind,
    pub api: Api,
    /// Most input tokens (the context window less nothing: output is
    /// checked apart).
    pub window: u64,
    /// Most output tokens one answer may have, thinking included.
    pub max_output: u32,
    pub reasoning: ReasoningKind,
    /// The effort levels the model accepts, least first.
    pub efforts: Vec<String>,
    /// Whether it accepts a `temperature`.
    pub temperature: bool,
    /// Whether it thinks when the request says nothing (so its thinking
    /// blocks come back even unasked).
    pub thinks_by_default: bool,
    /// Whether it takes images in its input.
    pub vision: bool,
    pub price: Option<Price>,
    /// Where the facts came from, for `doctor` and logs.
    pub origin: String,
}

impl ModelSpec {
    /// A model the catalogue does not know: plain chat, a temperature, no
    /// price; `window` and `max_output` are the caller's.
    pub fn plain(name: &str, provider: ProviderKind, api: Api, window: u64, max_output: u32) -> ModelSpec {
        ModelSpec {
            name: name.to_owned(),
            provider,
            api,
            window,
            max_output,
            reasoning: ReasoningKind::None,
            efforts: Vec::new(),
            temperature: true,
            thinks_by_default: false,
            vision: false,
            price: None,
            origin: "defaults (not in the catalogue)".to_owned(),
        }
    }

    /// Whether the model reasons at all.
    pub fn reasons(&self) -> bool {
        self.reasoning != ReasoningKind::None
    }

    /// The level to send for `wanted`: itself when the model has it, else
    /// the nearest the model has (the higher one on a tie).
    pub fn effort(&self, wanted: &str) -> Option<&str> {
        if self.efforts.iter().any(|e| e == wanted) {
            return self.efforts.iter().find(|e| *e == wanted).map(String::as_str);
        }
        let target = effort_rank(wanted)? as i64;
        self.efforts
            .iter()
            .filter_map(|e| effort_rank(e).map(|r| (e, r as i64)))
            .min_by_key(|(_, r)| ((r - target).abs(), -r))
            .map(|(e, _)| e.as_str())
    }

    /// The lowest level the model accepts, for calls that need little
    /// thought (classification, summaries).
    pub fn lowest_effort(&self) -> Option<&str> {
        self.efforts.first().map(String::as_str)
    }
}

#[derive(Deserialize)]
struct Snapshot {
    source: String,
    models: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    provider: String,
    api: Api,
    window: u64,
    max_output: u32,
    reasoning: ReasoningKind,
    #[serde(default)]
    efforts: Vec<String>,
    temperature: bool,
    #[serde(default)]
    thinks_by_default: bool,
    #[serde(default)]
    vision: bool,
    price: Option<EntryPrice>,
}

#[derive(Deserialize)]
struct EntryPrice {
    input: f64,
    output: f64,
    cache_read: Option<f64>,
    cache_write: Option<f64>,
}

const SNAPSHOT: &str = include_str!("../../catalogue/models.json");

fn snapshot() -> &'static Snapshot {
    static PARSED: OnceLock<Snapshot> = OnceLock::new();
    PARSED.get_or_init(|| match serde_json::from_str(SNAPSHOT) {
        Ok(snapshot) => snapshot,
        // The file is built into the binary and checked by a test; an
        // unreadable one leaves the catalogue empty rather than the daemon down.
        Err(e) => {
            tracing::error!(
                "the built-in model catalogue cannot be read ({e}); every model gets plain defaults"
            );
            Snapshot {
                source: String::new(),
                models: BTreeMap::new(),
            }
        }
    })
}

/// Where the shipped snapshot came from.
pub fn source() -> &'static str {
    &snapshot().source
}

/// What the shipped snapshot says of `name` (exact name: a dated model is
/// listed under its own name).
pub fn lookup(name: &str) -> Option<ModelSpec> {
    let snapshot = snapshot();
    let entry = snapshot.models.get(name)?;
    let provider = match entry.provider.as_str() {
        "openai" => ProviderKind::OpenAi,
        "anthropic" => ProviderKind::Anthropic,
        "gemini" => ProviderKind::Gemini,
        _ => return None,
    };
    Some(ModelSpec {
        name: name.to_owned(),
        provider,
        api: entry.api,
        window: entry.window,
        max_output: entry.max_output,
        reasoning: entry.reasoning,
        efforts: entry.efforts.clone(),
        temperature: entry.temperature,
        thinks_by_default: entry.thinks_by_default,
        vision: entry.vision,
        price: entry.price.as_ref().map(|p| Price {
            input_per_million: p.input,
            output_per_million: p.output,
            cached_input_per_million: p.cache_read.unwrap_or(p.input),
            cache_write_per_million: p.cache_write.unwrap_or(p.input),
        }),
        // "catalogue (litellm 1.110.2)": the source up to its first comma.
        origin: format!(
            "catalogue ({})",
            snapshot.source.split(',').next().unwrap_or_default()
        ),
    })
}

/// Every model the snapshot lists for `provider`, by name.
pub fn names(provider: ProviderKind) -> Vec<String> {
    snapshot()
        .models
        .iter()
        .filter(|(_, e)| lookup_provider(&e.provider) == Some(provider))
        .map(|(n, _)| n.clone())
        .collect()
}

fn lookup_provider(name: &str) -> Option<ProviderKind> {
    match name {
        "openai" => Some(ProviderKind::OpenAi),
        "anthropic" => Some(ProviderKind::Anthropic),
        "gemini" => Some(ProviderKind::Gemini),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_snapshot_reads_and_knows_each_providers_current_models() {
        assert!(source().starts_with("litellm "), "{}", source());
        for (name, provider, api, reasoning) in [
            (
                "gpt-5.6",
                ProviderKind::OpenAi,
                Api::Responses,
                ReasoningKind::Effort,
            ),
            ("o3", ProviderKind::OpenAi, Api::Responses, ReasoningKind::Effort),
            (
                "claude-opus-5-5",
                ProviderKind::Anthropic,
                Api::Messages,
                ReasoningKind::Adaptive,
            ),
            (
                "claude-sonnet-4-5",
                ProviderKind::Anthropic,
                Api::Messages,
                ReasoningKind::Budget,
            ),
            (
                "gemini-3.1-pro-preview",
                ProviderKind::Gemini,
                Api::GenerateContent,
                ReasoningKind::Level,
            ),
            (
                "gemini-2.5-pro",
                ProviderKind::Gemini,
                Api::GenerateContent,
                ReasoningKind::Budget,
            ),
        ] {
            let spec = lookup(name).unwrap_or_else(|| panic!("{name} is not in the catalogue"));
            assert_eq!(
                (spec.provider, spec.api, spec.reasoning),
                (provider, api, reasoning),
                "{name}"
            );
            assert!(
                spec.window >= 200_000 && spec.max_output >= 8192,
                "{name}: {spec:?}"
            );
            assert!(spec.price.is_some(), "{name} has no price");
        }
        assert!(!lookup("gpt-5.6").unwrap().temperature);
        assert!(lookup("gemini-2.5-pro").unwrap().temperature);
        assert!(lookup("gpt-5.6").unwrap().vision && lookup("claude-opus-5-5").unwrap().vision);
        assert!(!lookup("o3-mini").unwrap().vision);
        assert_eq!(lookup("no-such-model"), None);
        assert!(names(ProviderKind::Gemini).contains(&"gemini-2.5-pro".to_owned()));
        assert!(!names(ProviderKind::Gemini)
            .iter()
            .any(|n| n.starts_with("claude")));
    }

    #[test]
    fn the_nearest_effort_level_is_sent() {
        let mut spec = ModelSpec::plain("m", ProviderKind::Gemini, Api::GenerateContent, 1, 1);
        spec.efforts = vec!["low".into(), "high".into()];
        assert_eq!(spec.effort("low"), Some("low"));
        assert_eq!(spec.effort("medium"), Some("high"));
        assert_eq!(spec.effort("minimal"), Some("low"));
        assert_eq!(spec.effort("max"), Some("high"));
        assert_eq!(spec.effort("bogus"), None);
        assert_eq!(spec.lowest_effort(), Some("low"));
        spec.efforts.clear();
        assert_eq!(spec.effort("high"), None);
    }
}
