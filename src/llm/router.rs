//! Choosing the model for a request: the configured models in order, each
//! usable when its provider's key is set and the request fits its window
//! (input, counted with a margin for the provider's own tokenizer, plus the
//! answer's output room); retries on overload, then the next model on
//! persistent overload or a network failure.

use super::catalogue::{self, ModelSpec};
use super::retry::RetryPolicy;
use super::stream::{self, Quiet, StreamEvent, StreamLimits, StreamSink};
use super::tokens::count_request;
use super::usage::Price;
use super::{ChatRequest, ChatResponse, LlmError, Provider};
use crate::config::{Api, ProviderKind};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub struct Route {
    pub spec: ModelSpec,
    pub reasoning_effort: Option<String>,
    pub provider: Arc<dyn Provider>,
}

impl Route {
    pub fn model(&self) -> &str {
        &self.spec.name
    }

    /// Whether `input` tokens (as o200k counts them) and an answer of up to
    /// `output` tokens fit the model's window.
    fn fits(&self, input: u64, output: u32) -> bool {
        estimate(self.spec.provider, input) + u64::from(self.output_room(output)) <= self.spec.window
    }

    /// The output room a request asking for `output` tokens gets: the
    /// model's cap at most.
    fn output_room(&self, output: u32) -> u32 {
        output.min(self.spec.max_output)
    }

    /// The most input (as o200k counts it) that fits with `output` tokens of answer.
    fn input_room(&self, output: u32) -> u64 {
        let room = self
            .spec
            .window
            .saturating_sub(u64::from(self.output_room(output)));
        (room as f64 / margin(self.spec.provider)) as u64
    }
}

/// How many more tokens a provider's tokenizer makes of a text than o200k
/// does, at most, on code and prose: Claude's and Gemini's tokenizers cut
/// finer. Near a window's edge the router counts with this margin.
fn margin(provider: ProviderKind) -> f64 {
    match provider {
        ProviderKind::OpenAi => 1.05,
        ProviderKind::Anthropic => 1.25,
        ProviderKind::Gemini => 1.15,
    }
}

fn estimate(provider: ProviderKind, o200k_tokens: u64) -> u64 {
    (o200k_tokens as f64 * margin(provider)).ceil() as u64
}

pub struct Router {
    routes: Vec<Route>,
    retry: RetryPolicy,
    /// For the cost metric: the catalogue's prices and `llm.prices`.
    prices: BTreeMap<String, Price>,
    /// Models configured but left out for a missing key, for error messages.
    unavailable: Vec<String>,
    /// The output room a request is checked with when it asks for none
    /// (`llm.max_output_tokens`).
    output_room: u32,
    /// Where each request, its tokens and its cost are counted.
    metrics: std::sync::Arc<crate::metrics::Metrics>,
}

impl Router {
    pub fn new(routes: Vec<Route>, retry: RetryPolicy, unavailable: Vec<String>) -> Router {
        Router {
            routes,
            retry,
            prices: Default::default(),
            unavailable,
            output_room: 0,
            metrics: Default::default(),
        }
    }

    /// Counts requests, tokens and cost in `metrics` (the daemon's).
    pub fn with_metrics(mut self, metrics: std::sync::Arc<crate::metrics::Metrics>) -> Router {
        self.metrics = metrics;
        self
    }

    /// Prices the cost metric with `prices`.
    pub fn with_prices(mut self, prices: BTreeMap<String, Price>) -> Router {
        self.prices = prices;
        self
    }

    /// Checks what callers ask of [`Router::candidates`] with `output` tokens of answer.
    pub fn with_output_room(mut self, output: u32) -> Router {
        self.output_room = output;
        self
    }

    /// The routes a request of `tokens` input tokens and the configured
    /// output room may use, in order.
    pub fn candidates(&self, tokens: u64) -> Result<Vec<&Route>, LlmError> {
        self.fitting(tokens, self.output_room)
    }

    fn fitting(&self, tokens: u64, output: u32) -> Result<Vec<&Route>, LlmError> {
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
        let fitting: Vec<&Route> = self.routes.iter().filter(|r| r.fits(tokens, output)).collect();
        if fitting.is_empty() {
            return Err(LlmError::TooLarge {
                tokens,
                limits: limits(self.routes.iter(), output),
            });
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
        self.stream(None, request, &Quiet).await
    }

    /// Sends `request` to the model named `model` only, with retries.
    pub async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.stream(Some(model), request, &Quiet).await
    }

    /// Sends `request` as [`Router::chat_on`] does when `model` names one,
    /// else as [`Router::chat`] does, telling `sink` what streams in. Every
    /// attempt after the first (a retry, the next model) starts with
    /// [`StreamEvent::Restarted`]: only the answer that completes counts.
    pub async fn stream(
        &self,
        model: Option<&str>,
        request: &ChatRequest,
        sink: &dyn StreamSink,
    ) -> Result<ChatResponse, LlmError> {
        let attempts = Attempts::new(sink);
        match model {
            Some(model) => self.stream_on(model, request, &attempts).await,
            None => self.stream_any(request, &attempts).await,
        }
    }

    async fn stream_any(
        &self,
        request: &ChatRequest,
        attempts: &Attempts<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let tokens = count_request(request);
        let candidates = self.fitting(tokens, request.max_output_tokens)?;
        let mut last_error = None;
        for route in candidates {
            match self.send(route, request, attempts).await {
                Ok(response) => return Ok(response),
                Err(err) if err.falls_back() => {
                    tracing::warn!(model = %route.model(), "{err}; falling back to the next model");
                    last_error = Some(err);
                }
                Err(err) => return Err(err),
            }
        }
        Err(last_error.unwrap_or_else(|| LlmError::NoModel {
            detail: "no model answered".into(),
        }))
    }

    async fn stream_on(
        &self,
        model: &str,
        request: &ChatRequest,
        attempts: &Attempts<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let route = self.routes.iter().find(|r| r.model() == model).ok_or_else(|| {
            let usable: Vec<&str> = self.routes.iter().map(Route::model).collect();
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
        if !route.fits(tokens, request.max_output_tokens) {
            return Err(LlmError::TooLarge {
                tokens,
                limits: limits(std::iter::once(route), request.max_output_tokens),
            });
        }
        self.send(route, request, attempts).await
    }

    async fn send(
        &self,
        route: &Route,
        request: &ChatRequest,
        attempts: &Attempts<'_>,
    ) -> Result<ChatResponse, LlmError> {
        let mut routed = super::history::for_model(request, &route.spec);
        routed.model = route.spec.name.clone();
        routed.max_output_tokens =
            route.output_room(with_thinking_room(&route.spec, request.max_output_tokens));
        // A request that asks for an effort (the classifier's "low") keeps
        // it; otherwise the model's configured one applies.
        routed.reasoning_effort = request
            .reasoning_effort
            .clone()
            .or_else(|| route.reasoning_effort.clone());
        let attempt = || {
            let routed = &routed;
            let provider = route.provider.clone();
            let (prices, metrics) = (&self.prices, &self.metrics);
            async move {
                attempts.begin();
                // Whole or not at all: a stream that breaks off is an error.
                let result = stream::forward(provider.stream(&route.spec, routed), attempts.sink).await;
                match &result {
                    Ok(response) => {
                        metrics.model_request(&routed.model, "ok");
                        // Labelled and priced by the configured name: the name the
                        // provider answers with may carry a date and has no price.
                        let cost = super::usage::UsageReport::new(prices.clone())
                            .cost_of(&routed.model, response.usage);
                        metrics.model_usage(&routed.model, response.usage.metric_counts(), cost);
                    }
                    Err(e) if e.is_retryable() => metrics.model_request(&routed.model, "retryable_error"),
                    Err(_) => metrics.model_request(&routed.model, "error"),
                }
                if let Err(e) = &result {
                    attempts.failed(e);
                }
                result
            }
        };
        let mut response = self.retry.run(route.model(), attempt).await?;
        // Reported under the configured name, so that prices and budgets
        // find it; the provider's own name stays in the native turn.
        response.model = route.spec.name.clone();
        Ok(response)
    }
}

/// The attempts of one call, for its watcher: each after the first voids
/// what the ones before it streamed.
struct Attempts<'a> {
    sink: &'a dyn StreamSink,
    made: AtomicUsize,
    last_error: Mutex<String>,
}

impl<'a> Attempts<'a> {
    fn new(sink: &'a dyn StreamSink) -> Attempts<'a> {
        Attempts {
            sink,
            made: AtomicUsize::new(0),
            last_error: Mutex::new(String::new()),
        }
    }

    fn begin(&self) {
        if self.made.fetch_add(1, Ordering::Relaxed) > 0 {
            let reason = self.last_error.lock().map(|e| e.clone()).unwrap_or_default();
            self.sink.event(&StreamEvent::Restarted { reason });
        }
    }

    fn failed(&self, err: &LlmError) {
        if let Ok(mut last) = self.last_error.lock() {
            *last = err.to_string();
        }
    }
}

/// Output room below which a thinking model gets more: classification and
/// summaries ask for a few hundred tokens, which thinking alone can eat.
const SMALL_OUTPUT: u32 = 8192;

/// `output` with room for thinking added when the model reasons and the
/// request asks for little (the answer's own size stays the caller's).
fn with_thinking_room(model: &ModelSpec, output: u32) -> u32 {
    if model.reasons() && output < SMALL_OUTPUT {
        output.saturating_add(SMALL_OUTPUT)
    } else {
        output
    }
}

/// "m takes up to N input tokens with M of output" for each route.
fn limits<'a>(routes: impl Iterator<Item = &'a Route>, output: u32) -> String {
    routes
        .map(|r| {
            format!(
                "{} takes up to {} (a window of {} with {} tokens of output room)",
                r.model(),
                r.input_room(output),
                r.spec.window,
                r.output_room(output)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[async_trait::async_trait]
impl super::ChatModel for Router {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        Router::chat(self, request).await
    }

    async fn stream(
        &self,
        model: Option<&str>,
        request: &ChatRequest,
        sink: &dyn StreamSink,
    ) -> Result<ChatResponse, LlmError> {
        Router::stream(self, model, request, sink).await
    }

    fn models(&self) -> Vec<super::ModelInfo> {
        self.routes
            .iter()
            .map(|r| super::ModelInfo {
                name: r.spec.name.clone(),
                max_input_tokens: r.input_room(self.output_room),
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

/// What forgehand knows of `llm.models[index]`: the catalogue's entry with
/// the config's replacements, or plain defaults for a model the catalogue
/// lacks (which must then name its window).
pub fn model_spec(config: &crate::config::LlmConfig, index: usize) -> Result<ModelSpec, LlmError> {
    let model = &config.models[index];
    let key = |field: &str| format!("llm.models[{index}].{field}");
    let mut spec = base_spec(config, model, &key)?;
    let replaced = apply_overrides(&mut spec, model, config.prices.get(&model.model));
    if !replaced.is_empty() {
        spec.origin = format!(
            "{}; {} from llm.models[{index}]",
            spec.origin,
            replaced.join(", ")
        );
    }
    if let (Some(effort), false) = (&model.reasoning_effort, spec.efforts.is_empty()) {
        if spec.effort(effort) != Some(effort.as_str()) {
            tracing::warn!(
                model = %model.model,
                "{} is {effort}, which the model does not have ({}); {} is sent instead",
                key("reasoning_effort"),
                spec.efforts.join(", "),
                spec.effort(effort).unwrap_or("nothing"),
            );
        }
    }
    Ok(spec)
}

/// The catalogue's entry for `model`, or plain defaults when the
/// catalogue lacks it (then the config must name its window).
fn base_spec(
    config: &crate::config::LlmConfig,
    model: &crate::config::ModelConfig,
    key: &dyn Fn(&str) -> String,
) -> Result<ModelSpec, LlmError> {
    if let Some(spec) = catalogue::lookup(&model.model).filter(|s| s.provider == model.provider) {
        return Ok(spec);
    }
    // A model the catalogue knows keeps its API on any base URL (a gateway
    // serves OpenAI's Responses API too; see `gateway`); one it does not
    // know is a local model on a compatible server, unless at OpenAI's own.
    let unknown_api = match model.provider {
        ProviderKind::OpenAi if config.openai_base_url != OPENAI_DEFAULT => Api::ChatCompletions,
        ProviderKind::OpenAi => Api::Responses,
        ProviderKind::Anthropic => Api::Messages,
        ProviderKind::Gemini => Api::GenerateContent,
    };
    let window = model.max_input_tokens.ok_or_else(|| LlmError::NoModel {
        detail: format!(
            "{} ({}) is not in the model catalogue ({}): set {} to its context size in tokens, and {} where it reasons or refuses a temperature",
            model.model,
            key("model"),
            catalogue::source(),
            key("max_input_tokens"),
            key("reasoning / efforts / temperature"),
        ),
    })?;
    Ok(ModelSpec::plain(
        &model.model,
        model.provider,
        unknown_api,
        window,
        config.max_output_tokens,
    ))
}

/// Replaces what `llm.models[i]` (and its `llm.prices` entry) gives;
/// returns the names of what was replaced, for the spec's origin.
fn apply_overrides(
    spec: &mut ModelSpec,
    model: &crate::config::ModelConfig,
    price: Option<&Price>,
) -> Vec<&'static str> {
    let o = &model.overrides;
    let mut replaced = Vec::new();
    if let Some(window) = model.max_input_tokens {
        spec.window = window;
        replaced.push("max_input_tokens");
    }
    if let Some(api) = o.api {
        spec.api = api;
        replaced.push("api");
    }
    if let Some(max) = o.max_output_tokens {
        spec.max_output = max;
        replaced.push("max_output_tokens");
    }
    if let Some(kind) = o.reasoning {
        spec.reasoning = kind;
        replaced.push("reasoning");
    }
    if let Some(efforts) = &o.efforts {
        spec.efforts = efforts.clone();
        replaced.push("efforts");
    }
    if let Some(temperature) = o.temperature {
        spec.temperature = temperature;
        replaced.push("temperature");
    }
    if let Some(vision) = o.vision {
        spec.vision = vision;
        replaced.push("vision");
    }
    if let Some(price) = price {
        spec.price = Some(*price);
        replaced.push("price (llm.prices)");
    }
    replaced
}

/// Every price forgehand knows for the configured models: the catalogue's,
/// replaced by `llm.prices`, whose other entries price models by prefix.
pub fn price_table(config: &crate::config::LlmConfig) -> BTreeMap<String, Price> {
    let mut prices = config.prices.clone();
    for model in &config.models {
        if prices.contains_key(&model.model) {
            continue;
        }
        if let Some(price) = catalogue::lookup(&model.model)
            .filter(|s| s.provider == model.provider)
            .and_then(|s| s.price)
        {
            prices.insert(model.model.clone(), price);
        }
    }
    prices
}

/// The client a model's requests go through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    Api(Api),
    /// The Responses API of a server that is not OpenAI's own, falling back
    /// to its Chat Completions where it has none.
    ResponsesOrChat,
}

impl Client {
    /// A Responses model on another base URL may fall back, unless the
    /// config chose the API (`api:` on the model).
    fn of(config: &crate::config::LlmConfig, spec: &ModelSpec, api_chosen: bool) -> Client {
        if spec.api == Api::Responses && !api_chosen && config.openai_base_url != OPENAI_DEFAULT {
            Client::ResponsesOrChat
        } else {
            Client::Api(spec.api)
        }
    }

    /// The provider, `None` when its key is missing.
    fn make(
        self,
        config: &crate::config::LlmConfig,
        secrets: &crate::config::Secrets,
    ) -> Result<Option<Arc<dyn Provider>>, LlmError> {
        use super::{
            anthropic::Anthropic, chat_completions::ChatCompletions, gateway::ResponsesOrChat,
            gemini::Gemini, responses::Responses,
        };
        let timeout = config.request_timeout;
        let limits = StreamLimits {
            idle: config.stream_idle_timeout,
            total: config.stream_total_timeout,
        };
        let base = &config.openai_base_url;
        // Any base URL but OpenAI's own may be a server that needs no key.
        let openai_key = secrets.openai_api_key.clone();
        let openai_usable = openai_key.is_some() || *base != OPENAI_DEFAULT;
        Ok(match self {
            Client::Api(Api::Responses | Api::ChatCompletions) | Client::ResponsesOrChat
                if !openai_usable =>
            {
                None
            }
            Client::Api(Api::Responses) => Some(Arc::new(
                Responses::new(base, openai_key, timeout)?.with_stream_limits(limits),
            )),
            Client::Api(Api::ChatCompletions) => Some(Arc::new(
                ChatCompletions::new(base, openai_key, timeout)?.with_stream_limits(limits),
            )),
            Client::ResponsesOrChat => Some(Arc::new(ResponsesOrChat::new(
                base,
                Responses::new(base, openai_key.clone(), timeout)?.with_stream_limits(limits),
                ChatCompletions::new(base, openai_key, timeout)?.with_stream_limits(limits),
            ))),
            Client::Api(Api::GenerateContent) => match &secrets.gemini_api_key {
                Some(key) => Some(Arc::new(
                    Gemini::new(&config.gemini_base_url, key.clone(), timeout)?.with_stream_limits(limits),
                )),
                None => None,
            },
            Client::Api(Api::Messages) => match &secrets.anthropic_api_key {
                Some(key) => Some(Arc::new(
                    Anthropic::new(&config.anthropic_base_url, key.clone(), timeout)?
                        .with_stream_limits(limits),
                )),
                None => None,
            },
        })
    }
}

/// Builds the router from config and the keys that are set. A model whose
/// provider has no key is left out (and named in errors).
pub fn from_config(
    config: &crate::config::LlmConfig,
    secrets: &crate::config::Secrets,
) -> Result<Router, LlmError> {
    let mut made: Vec<(Client, Option<Arc<dyn Provider>>)> = Vec::new();
    let mut routes = Vec::new();
    let mut unavailable = Vec::new();
    for (index, model) in config.models.iter().enumerate() {
        let spec = model_spec(config, index)?;
        let client = Client::of(config, &spec, model.overrides.api.is_some());
        // One client per kind, made the first time a model needs it.
        let provider = match made.iter().find(|(kind, _)| *kind == client) {
            Some((_, provider)) => provider.clone(),
            None => {
                let provider = client.make(config, secrets)?;
                made.push((client, provider.clone()));
                provider
            }
        };
        match provider {
            Some(provider) => routes.push(Route {
                spec,
                reasoning_effort: model.reasoning_effort.clone(),
                provider,
            }),
            None => unavailable.push(format!("{} ({} not set)", model.model, model.provider.key_var())),
        }
    }
    Ok(Router::new(routes, config.retry, unavailable)
        .with_prices(price_table(config))
        .with_output_room(config.max_output_tokens))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ChatRequest, Provider};
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
        async fn chat(&self, _: &ModelSpec, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
            self.efforts
                .lock()
                .unwrap()
                .push(request.reasoning_effort.clone());
            Ok(ChatResponse {
                text: "ok".into(),
                model: request.model.clone(),
                ..Default::default()
            })
        }
    }

    #[test]
    fn a_thinking_model_gets_room_to_think_before_a_short_answer() {
        let thinking = catalogue::lookup("claude-opus-5-5").unwrap();
        let plain = ModelSpec::plain("m", ProviderKind::OpenAi, Api::ChatCompletions, 1000, 1000);
        assert_eq!(with_thinking_room(&thinking, 300), 300 + SMALL_OUTPUT);
        assert_eq!(with_thinking_room(&thinking, 16_384), 16_384);
        assert_eq!(with_thinking_room(&plain, 300), 300);
    }

    #[tokio::test]
    async fn a_requests_own_reasoning_effort_wins_over_the_models() {
        let echo = Arc::new(Echo::default());
        let router = Router::new(
            vec![Route {
                spec: catalogue::lookup("o3").unwrap(),
                reasoning_effort: Some("medium".into()),
                provider: echo.clone(),
            }],
            RetryPolicy::default(),
            Vec::new(),
        );
        let mut request = crate::context_store::classify::request(
            &crate::prompts::Prompts::embedded().context,
            "It must stay on one line.",
        );
        router.chat_on("o3", &request).await.unwrap();
        request.reasoning_effort = None;
        router.chat_on("o3", &request).await.unwrap();
        assert_eq!(
            *echo.efforts.lock().unwrap(),
            vec![Some("none".to_owned()), Some("medium".to_owned())]
        );
    }
}
