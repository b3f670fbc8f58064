//! The models: which ones, in which order, what forgehand is told of them
//! beyond the model catalogue, their prices, timeouts and retries.

use super::raw;
use super::{non_empty, positive_duration, Api, ConfigError, Price, ReasoningKind, RetryPolicy};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Gemini,
    Anthropic,
}

impl ProviderKind {
    pub fn key_var(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::Gemini => "GEMINI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub provider: ProviderKind,
    pub model: String,
    /// `None`: the model catalogue's window.
    pub max_input_tokens: Option<u64>,
    pub reasoning_effort: Option<String>,
    /// A light model (`role: light`) classifies and summarises for the
    /// context store, and debates only when `planning.debaters` names it.
    pub light: bool,
    /// Facts that replace the model catalogue's.
    pub overrides: ModelOverrides,
}

/// What an operator may say of a model instead of the catalogue (each
/// `None`: the catalogue's value, or a plain default for a model it lacks).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelOverrides {
    /// None for an OpenAI model: the Responses API on OpenAI's own base URL,
    /// Chat Completions on any other (an OpenAI-compatible server).
    pub api: Option<Api>,
    pub max_output_tokens: Option<u32>,
    pub reasoning: Option<ReasoningKind>,
    pub efforts: Option<Vec<String>>,
    pub temperature: Option<bool>,
    /// Whether the model takes images (`vision`).
    pub vision: Option<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LlmConfig {
    /// A model request that is not streamed (none of forgehand's are; it
    /// still caps the time to connect, at 30 s).
    pub request_timeout: Duration,
    /// A streamed answer ends when no byte comes for this long, and is
    /// asked again.
    pub stream_idle_timeout: Duration,
    /// The longest a streamed answer may take in all.
    pub stream_total_timeout: Duration,
    pub max_output_tokens: u32,
    pub retry: RetryPolicy,
    pub openai_base_url: String,
    pub gemini_base_url: String,
    pub anthropic_base_url: String,
    /// In order of preference.
    pub models: Vec<ModelConfig>,
    pub prices: BTreeMap<String, Price>,
}

pub(super) fn resolve_llm(raw: raw::RawLlm) -> Result<LlmConfig, ConfigError> {
    let models = raw
        .models
        .into_iter()
        .enumerate()
        .map(|(i, m)| resolve_model(i, m))
        .collect::<Result<Vec<_>, _>>()?;
    let prices = resolve_prices(raw.prices)?;
    if raw.max_output_tokens == 0 {
        return Err(ConfigError::invalid("llm.max_output_tokens", "must be above 0"));
    }
    let stream_idle_timeout = positive_duration("llm.stream_idle_timeout", raw.stream_idle_timeout)?;
    let stream_total_timeout = positive_duration("llm.stream_total_timeout", raw.stream_total_timeout)?;
    if stream_total_timeout < stream_idle_timeout {
        return Err(ConfigError::invalid(
            "llm.stream_total_timeout",
            "must be at least llm.stream_idle_timeout (the cap on a whole answer, which keeps streaming)",
        ));
    }
    Ok(LlmConfig {
        request_timeout: positive_duration("llm.request_timeout", raw.request_timeout)?,
        stream_idle_timeout,
        stream_total_timeout,
        max_output_tokens: raw.max_output_tokens,
        retry: RetryPolicy {
            initial_backoff: positive_duration("llm.retry.initial_backoff", raw.retry.initial_backoff)?,
            max_backoff: positive_duration("llm.retry.max_backoff", raw.retry.max_backoff)?,
            max_retries: raw.retry.max_retries,
        },
        openai_base_url: base_url("llm.providers.openai.base_url", &raw.providers.openai.base_url)?,
        gemini_base_url: base_url("llm.providers.gemini.base_url", &raw.providers.gemini.base_url)?,
        anthropic_base_url: base_url(
            "llm.providers.anthropic.base_url",
            &raw.providers.anthropic.base_url,
        )?,
        models,
        prices,
    })
}

/// `llm.models[i]`, checked against what its provider serves.
fn resolve_model(i: usize, m: raw::RawModel) -> Result<ModelConfig, ConfigError> {
    let key = |field: &str| format!("llm.models[{i}].{field}");
    let provider = provider(&key("provider"), &m.provider)?;
    if m.max_input_tokens == Some(0) {
        return Err(ConfigError::invalid(
            &key("max_input_tokens"),
            "must be above 0 (the model's context size in tokens)",
        ));
    }
    let overrides = model_overrides(&m, provider, &key)?;
    if let Some(effort) = &m.reasoning_effort {
        let allowed = overrides
            .efforts
            .clone()
            .unwrap_or_else(|| EFFORT_LEVELS.iter().map(|l| l.to_string()).collect());
        if !allowed.contains(effort) {
            return Err(ConfigError::invalid(
                &key("reasoning_effort"),
                format!(r#""{effort}" is not one of {}"#, allowed.join(", ")),
            ));
        }
    }
    let light = is_light(&key("role"), m.role.as_deref())?;
    Ok(ModelConfig {
        provider,
        model: non_empty(&key("model"), &m.model)?,
        max_input_tokens: m.max_input_tokens,
        reasoning_effort: m.reasoning_effort,
        light,
        overrides,
    })
}

fn provider(key: &str, text: &str) -> Result<ProviderKind, ConfigError> {
    match text.trim() {
        "openai" => Ok(ProviderKind::OpenAi),
        "gemini" => Ok(ProviderKind::Gemini),
        "anthropic" => Ok(ProviderKind::Anthropic),
        other => Err(ConfigError::invalid(
            key,
            format!(
                r#""{other}" is not a provider; use "openai" (also for OpenAI-compatible servers), "gemini" or "anthropic""#
            ),
        )),
    }
}

/// `role`: whether the model is a light one (classifies and summarises).
fn is_light(key: &str, role: Option<&str>) -> Result<bool, ConfigError> {
    match role.map(str::trim) {
        None | Some("main") => Ok(false),
        Some("light") => Ok(true),
        Some(other) => Err(ConfigError::invalid(
            key,
            format!(
                r#""{other}" is not one of "main" (plans and works; the default), "light" (classifies and summarises)"#
            ),
        )),
    }
}

/// `llm.prices`: US dollars per million tokens; cached input and cache
/// writes cost as much as input unless given.
fn resolve_prices(raw: BTreeMap<String, raw::RawPrice>) -> Result<BTreeMap<String, Price>, ConfigError> {
    let mut prices = BTreeMap::new();
    for (model, price) in raw {
        let cached = price.cached_input.unwrap_or(0.0);
        let write = price.cache_write.unwrap_or(0.0);
        if ![price.input, price.output, cached, write]
            .iter()
            .all(|p| *p >= 0.0 && p.is_finite())
        {
            return Err(ConfigError::invalid(
                &format!("llm.prices.{model}"),
                "prices must be numbers of US dollars per million tokens, 0 or more",
            ));
        }
        prices.insert(
            model,
            Price {
                input_per_million: price.input,
                output_per_million: price.output,
                cached_input_per_million: price.cached_input.unwrap_or(price.input),
                cache_write_per_million: price.cache_write.unwrap_or(price.input),
            },
        );
    }
    Ok(prices)
}

/// A provider's base URL, without the trailing slash.
fn base_url(key: &str, value: &str) -> Result<String, ConfigError> {
    let value = non_empty(key, value)?;
    if !(value.starts_with("http://") || value.starts_with("https://")) {
        return Err(ConfigError::invalid(
            key,
            format!(r#""{value}" is not an http:// or https:// URL"#),
        ));
    }
    Ok(value.trim_end_matches('/').to_owned())
}

/// Effort levels any provider documents, least thought first.
const EFFORT_LEVELS: [&str; 7] = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// The catalogue facts `llm.models[i]` replaces, checked.
fn model_overrides(
    m: &raw::RawModel,
    provider: ProviderKind,
    key: &dyn Fn(&str) -> String,
) -> Result<ModelOverrides, ConfigError> {
    let api = match m.api.as_deref().map(str::trim) {
        None => None,
        Some(value) => {
            let api = Api::parse(value).ok_or_else(|| {
                ConfigError::invalid(
                    &key("api"),
                    format!(r#""{value}" is not one of "responses", "chat_completions", "messages", "generate_content""#),
                )
            })?;
            if !api.serves(provider) {
                return Err(ConfigError::invalid(
                    &key("api"),
                    format!(
                        r#""{value}" is not an API of this provider; {} models use {}"#,
                        m.provider.trim(),
                        match provider {
                            ProviderKind::OpenAi =>
                                r#""responses" (OpenAI's own) or "chat_completions" (OpenAI-compatible servers)"#,
                            ProviderKind::Anthropic => r#""messages""#,
                            ProviderKind::Gemini => r#""generate_content""#,
                        }
                    ),
                ));
            }
            Some(api)
        }
    };
    let reasoning = match m.reasoning.as_deref().map(str::trim) {
        None => None,
        Some(value) => Some(ReasoningKind::parse(value).ok_or_else(|| {
            ConfigError::invalid(
                &key("reasoning"),
                format!(r#""{value}" is not one of "none", "effort", "adaptive", "budget", "level""#),
            )
        })?),
    };
    if let Some(efforts) = &m.efforts {
        if let Some(bad) = efforts.iter().find(|e| !EFFORT_LEVELS.contains(&e.as_str())) {
            return Err(ConfigError::invalid(
                &key("efforts"),
                format!(r#""{bad}" is not one of {}"#, EFFORT_LEVELS.join(", ")),
            ));
        }
    }
    if m.max_output_tokens == Some(0) {
        return Err(ConfigError::invalid(&key("max_output_tokens"), "must be above 0"));
    }
    Ok(ModelOverrides {
        api,
        max_output_tokens: m.max_output_tokens,
        reasoning,
        efforts: m.efforts.clone(),
        temperature: m.temperature,
        vision: m.vision,
    })
}
