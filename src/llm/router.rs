//! Choosing the model for a request (seed 000): the configured models in
//! order, each usable when its provider's key is set and the request fits its
//! context; retries on overload, then the next model on persistent overload
//! or a network failure.

use super::retry::RetryPolicy;
use super::tokens::count_request;
use super::{ChatRequest, ChatResponse, LlmError, Provider};
use std::sync::Arc;

#[derive(Clone)]
pub struct Route {
    pub model: String,
    pub max_input_tokens: u64,
    pub reasoning_effort: Option<String>,
    pub provider: Arc<dyn Provider>,
}

pub struct Router {
    routes: Vec<Route>,
    retry: RetryPolicy,
    /// For the cost metric (`llm.prices`).
    prices: std::collections::BTreeMap<String, super::usage::Price>,
    /// Models configured but left out for a missing key, for error messages.
    unavailable: Vec<String>,
}

impl Router {
    pub fn new(routes: Vec<Route>, retry: RetryPolicy, unavailable: Vec<String>) -> Router {
        Router {
            routes,
            retry,
            prices: Default::default(),
            unavailable,
        }
    }

    /// Prices the cost metric with `prices`.
    pub fn with_prices(mut self, prices: std::collections::BTreeMap<String, super::usage::Price>) -> Router {
        self.prices = prices;
        self
    }

    /// The routes a request of `tokens` input tokens may use, in order.
    pub fn candidates(&self, tokens: u64) -> Result<Vec<&Route>, LlmError> {
        if self.routes.is_empty() {
            let detail = if self.unavailable.is_empty() {
                "llm.models is empty".to_owned()
            } else {
                format!(
                    "every configured model lacks its key ({}); set OPENAI_API_KEY, GEMINI_API_KEY or ANTHROPIC_API_KEY",
                    self.unavailable.join(", ")
                )
            };
            return Err(LlmError::NoModel { detail });
        }
        let fitting: Vec<&Route> = self
            .routes
            .iter()
            .filter(|r| tokens <= r.max_input_tokens)
            .collect();
        if fitting.is_empty() {
            let limits = self
                .routes
                .iter()
                .map(|r| format!("{} takes up to {}", r.model, r.max_input_tokens))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(LlmError::TooLarge { tokens, limits });
        }
        Ok(fitting)
    }

    /// The usable models, in order of preference.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// Sends `request` (its `model` is filled in per route) to the first
    /// model that fits, falling back along the list.
    pub async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let tokens = count_request(request);
        let candidates = self.candidates(tokens)?;
        let mut last_error = None;
        for route in candidates {
            match self.send(route, request).await {
                Ok(response) => return Ok(response),
                Err(err) if err.falls_back() => {
                    tracing::warn!(model = %route.model, "{err}; falling back to the next model");
                    last_error = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last_error.unwrap_or_else(|| LlmError::NoModel {
            detail: "no model answered".into(),
        }))
    }

    /// Sends `request` to the model named `model` only, with retries.
    pub async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let route = self.routes.iter().find(|r| r.model == model).ok_or_else(|| {
            let usable: Vec<&str> = self.routes.iter().map(|r| r.model.as_str()).collect();
            LlmError::NoModel {
                detail: format!(
                    "{model} is not usable (usable: {}); check llm.models and its provider's key",
                    if usable.is_empty() {
                        "none".to_owned()
                    } else {
                        usable.join(", ")
                    }
                ),
            }
        })?;
        let tokens = count_request(request);
        if tokens > route.max_input_tokens {
            return Err(LlmError::TooLarge {
                tokens,
                limits: format!("{} takes up to {}", route.model, route.max_input_tokens),
            });
        }
        self.send(route, request).await
    }

    async fn send(&self, route: &Route, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut routed = request.clone();
        routed.model = route.model.clone();
        // A request that asks for an effort (the classifier's "low") keeps
        // it; otherwise the model's configured one applies.
        routed.reasoning_effort = request
            .reasoning_effort
            .clone()
            .or_else(|| route.reasoning_effort.clone());
        let attempt = || {
            let routed = &routed;
            let provider = route.provider.clone();
            let prices = &self.prices;
            async move {
                let result = provider.chat(routed).await;
                let metrics = crate::metrics::global();
                match &result {
                    Ok(response) => {
                        metrics.model_request(&routed.model, "ok");
                        // Labelled and priced by the configured name: the name the
                        // provider answers with may carry a date and has no price.
                        let cost = super::usage::UsageReport::new(prices.clone())
                            .cost_of(&routed.model, response.usage);
                        metrics.model_usage(&routed.model, response.usage, cost);
                    }
                    Err(e) if e.is_retryable() => metrics.model_request(&routed.model, "retryable_error"),
                    Err(_) => metrics.model_request(&routed.model, "error"),
                }
                result
            }
        };
        self.retry.run(&route.model, attempt).await
    }
}

#[async_trait::async_trait]
impl super::ChatModel for Router {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        Router::chat(self, request).await
    }

    fn models(&self) -> Vec<super::ModelInfo> {
        self.routes
            .iter()
            .map(|r| super::ModelInfo {
                name: r.model.clone(),
                max_input_tokens: r.max_input_tokens,
            })
            .collect()
    }

    async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        Router::chat_on(self, model, request).await
    }
}

/// The default OpenAI endpoint; any other base URL is an OpenAI-compatible
/// server (Ollama, vLLM, ...) that may need no key.
pub const OPENAI_DEFAULT: &str = "https://api.openai.com/v1";

/// Builds the router from config and the keys that are set. A model whose
/// provider has no key is left out (and named in errors), as seed 000 asks.
pub fn from_config(
    config: &crate::config::LlmConfig,
    secrets: &crate::config::Secrets,
) -> Result<Router, LlmError> {
    use super::{anthropic::Anthropic, gemini::Gemini, openai::OpenAi};
    use crate::config::ProviderKind;
    let timeout = config.request_timeout;
    // One client per provider kind, made the first time a model needs it.
    let make = |kind: ProviderKind| -> Result<Option<Arc<dyn Provider>>, LlmError> {
        Ok(match kind {
            ProviderKind::OpenAi => {
                let keyless_ok = config.openai_base_url != OPENAI_DEFAULT;
                match &secrets.openai_api_key {
                    key if key.is_some() || keyless_ok => Some(Arc::new(OpenAi::new(
                        &config.openai_base_url,
                        key.clone(),
                        timeout,
                    )?)),
                    _ => None,
                }
            }
            ProviderKind::Gemini => match &secrets.gemini_api_key {
                Some(key) => Some(Arc::new(Gemini::new(
                    &config.gemini_base_url,
                    key.clone(),
                    timeout,
                )?)),
                None => None,
            },
            ProviderKind::Anthropic => match &secrets.anthropic_api_key {
                Some(key) => Some(Arc::new(Anthropic::new(
                    &config.anthropic_base_url,
                    key.clone(),
                    timeout,
                )?)),
                None => None,
            },
        })
    };
    let mut made: Vec<(ProviderKind, Option<Arc<dyn Provider>>)> = Vec::new();
    let mut routes = Vec::new();
    let mut unavailable = Vec::new();
    for model in &config.models {
        let provider = match made.iter().find(|(kind, _)| *kind == model.provider) {
            Some((_, provider)) => provider.clone(),
            None => {
                let provider = make(model.provider)?;
                made.push((model.provider, provider.clone()));
                provider
            }
        };
        match provider {
            Some(provider) => routes.push(Route {
                model: model.model.clone(),
                max_input_tokens: model.max_input_tokens,
                reasoning_effort: model.reasoning_effort.clone(),
                provider,
            }),
            None => unavailable.push(format!("{} ({} not set)", model.model, model.provider.key_var())),
        }
    }
    Ok(Router::new(routes, config.retry, unavailable).with_prices(config.prices.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ChatRequest, Provider, TokenUsage};
    use std::sync::Mutex;

    /// Answers every request, keeping the reasoning effort it was sent.
    #[derive(Default)]
    struct Echo {
        efforts: Mutex<Vec<Option<String>>>,
    }

    #[async_trait::async_trait]
    impl Provider for Echo {
        fn name(&self) -> &str {
            "openai"
        }
        async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            self.efforts
                .lock()
                .unwrap()
                .push(request.reasoning_effort.clone());
            Ok(ChatResponse {
                text: "ok".into(),
                tool_calls: Vec::new(),
                usage: TokenUsage::default(),
                model: request.model.clone(),
            })
        }
    }

    #[tokio::test]
    async fn a_requests_own_reasoning_effort_wins_over_the_models() {
        let echo = Arc::new(Echo::default());
        let router = Router::new(
            vec![Route {
                model: "o3".into(),
                max_input_tokens: 200_000,
                reasoning_effort: Some("medium".into()),
                provider: echo.clone(),
            }],
            RetryPolicy::default(),
            Vec::new(),
        );
        let mut request = crate::planning::classify::request(
            &crate::prompts::Prompts::embedded().context,
            "It must stay on one line.",
        );
        router.chat_on("o3", &request).await.unwrap();
        request.reasoning_effort = None;
        router.chat_on("o3", &request).await.unwrap();
        assert_eq!(
            *echo.efforts.lock().unwrap(),
            vec![Some("low".to_owned()), Some("medium".to_owned())]
        );
    }
}
