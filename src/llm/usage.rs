//! Tokens used per model and what they cost, from the price table in config.

use super::TokenUsage;
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub use crate::config::Price;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageReport {
    per_model: BTreeMap<String, TokenUsage>,
    prices: BTreeMap<String, Price>,
}

impl UsageReport {
    pub fn new(prices: BTreeMap<String, Price>) -> UsageReport {
        UsageReport {
            per_model: BTreeMap::new(),
            prices,
        }
    }

    pub fn add(&mut self, model: &str, usage: TokenUsage) {
        self.per_model.entry(model.to_owned()).or_default().add(usage);
    }

    /// Adds everything `other` counted.
    pub fn merge(&mut self, other: &UsageReport) {
        for (model, usage) in &other.per_model {
            self.add(model, *usage);
        }
    }

    pub fn total(&self) -> TokenUsage {
        self.per_model.values().fold(TokenUsage::default(), |mut acc, u| {
            acc.add(*u);
            acc
        })
    }

    /// The estimated cost of one model's usage, `None` without a price:
    /// plain input, cache reads and cache writes each at their price, and
    /// every output token (thinking included) at the output price.
    pub fn cost_of(&self, model: &str, usage: TokenUsage) -> Option<f64> {
        Some(price(&self.price_of(model)?, usage))
    }

    pub fn per_model(&self) -> &BTreeMap<String, TokenUsage> {
        &self.per_model
    }

    /// The price of `model`: an exact entry, else the longest entry that
    /// prefixes it (a dated model name uses its family's price).
    pub fn price_of(&self, model: &str) -> Option<Price> {
        self.prices.get(model).copied().or_else(|| {
            self.prices
                .iter()
                .filter(|(name, _)| model.starts_with(name.as_str()))
                .max_by_key(|(name, _)| name.len())
                .map(|(_, p)| *p)
        })
    }

    /// Estimated cost in US dollars; models without a price count as 0 and
    /// are listed in the second value.
    pub fn estimated_cost(&self) -> (f64, Vec<String>) {
        let mut cost = 0.0;
        let mut unpriced = Vec::new();
        for (model, usage) in &self.per_model {
            match self.cost_of(model, *usage) {
                Some(c) => cost += c,
                None => unpriced.push(model.clone()),
            }
        }
        (cost, unpriced)
    }

    /// One line per model and a total, for logs and the progress comment.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for (model, u) in &self.per_model {
            let _ = writeln!(
                out,
                "{model}: {} input ({} cached, {} written to cache) + {} output tokens ({} thinking)",
                u.input_tokens,
                u.cached_input_tokens,
                u.cache_write_tokens,
                u.output_tokens,
                u.reasoning_tokens
            );
        }
        let (cost, unpriced) = self.estimated_cost();
        let total = self.total();
        let _ = write!(
            out,
            "total: {} input ({} cached) + {} output tokens, estimated ${cost:.4}",
            total.input_tokens, total.cached_input_tokens, total.output_tokens
        );
        if !unpriced.is_empty() {
            let _ = write!(out, " (no price configured for {})", unpriced.join(", "));
        }
        out
    }
}

/// What `usage` costs at `p`, in US dollars.
pub fn price(p: &Price, usage: TokenUsage) -> f64 {
    let cached = usage.cached_input_tokens.min(usage.input_tokens);
    let written = usage.cache_write_tokens.min(usage.input_tokens - cached);
    let plain = usage.input_tokens - cached - written;
    (plain as f64 * p.input_per_million
        + cached as f64 * p.cached_input_per_million
        + written as f64 * p.cache_write_per_million
        + usage.output_tokens as f64 * p.output_per_million)
        / 1e6
}

/// Token use of calls made outside a run that keeps its own report
/// (classification, idea options), gathered for the task's report.
pub type Meter = std::sync::Mutex<UsageReport>;

/// Adds a response's tokens to `meter`, when there is one.
pub fn record(meter: Option<&Meter>, response: &super::ChatResponse) {
    if let Some(meter) = meter {
        meter
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(&response.model, response.usage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_uses_exact_or_family_prices() {
        let prices = BTreeMap::from([
            (
                "o3".to_owned(),
                Price {
                    input_per_million: 2.0,
                    output_per_million: 8.0,
                    cached_input_per_million: 0.5,
                    cache_write_per_million: 2.0,
                },
            ),
            (
                "gemini-2.5-pro".to_owned(),
                Price {
                    input_per_million: 1.25,
                    output_per_million: 10.0,
                    cached_input_per_million: 1.25,
                    cache_write_per_million: 1.25,
                },
            ),
        ]);
        let mut report = UsageReport::new(prices);
        report.add(
            "o3-2025-04-16",
            TokenUsage {
                input_tokens: 1_000_000,
                cached_input_tokens: 400_000,
                output_tokens: 500_000,
                ..Default::default()
            },
        );
        report.add(
            "gemini-2.5-pro",
            TokenUsage {
                input_tokens: 200_000,
                cached_input_tokens: 0,
                output_tokens: 0,
                ..Default::default()
            },
        );
        report.add(
            "local-llama",
            TokenUsage {
                input_tokens: 10,
                cached_input_tokens: 0,
                output_tokens: 10,
                ..Default::default()
            },
        );
        let (cost, unpriced) = report.estimated_cost();
        // o3: 600K uncached at $2 + 400K cached at $0.5 + 500K output at $8.
        assert!((cost - (1.2 + 0.2 + 4.0 + 0.25)).abs() < 1e-9, "{cost}");
        assert_eq!(unpriced, vec!["local-llama"]);
        assert_eq!(
            report.total(),
            TokenUsage {
                input_tokens: 1_200_010,
                cached_input_tokens: 400_000,
                output_tokens: 500_010,
                ..Default::default()
            }
        );
        assert!(
            report.summary().contains("estimated $5.6500"),
            "{}",
            report.summary()
        );
    }
}

/// The usable model with the lowest input price (`llm.prices`; a model
/// without a price is never taken for the cheapest): the default light
/// model for small calls such as classification. `None` when no usable
/// model has a price.
pub fn cheapest(models: &[super::ModelInfo], prices: &BTreeMap<String, Price>) -> Option<String> {
    models
        .iter()
        .filter_map(|m| prices.get(&m.name).map(|p| (m, p.input_per_million)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(m, _)| m.name.clone())
}

/// The model for light work (classification, summaries) among the
/// usable: the cheapest of those marked light (`light`: `role: light`), or
/// the first of them when none is priced, else the cheapest usable one.
pub fn light_model(
    models: &[super::ModelInfo],
    light: &[String],
    prices: &BTreeMap<String, Price>,
) -> Option<String> {
    let marked: Vec<super::ModelInfo> = models
        .iter()
        .filter(|m| light.contains(&m.name))
        .cloned()
        .collect();
    cheapest(&marked, prices)
        .or_else(|| marked.first().map(|m| m.name.clone()))
        .or_else(|| cheapest(models, prices))
}

#[cfg(test)]
mod cheapest_tests {
    use super::*;

    #[test]
    fn the_cheapest_priced_usable_model_is_chosen() {
        let models = |names: &[&str]| -> Vec<super::super::ModelInfo> {
            names
                .iter()
                .map(|n| super::super::ModelInfo {
                    name: (*n).into(),
                    max_input_tokens: 100_000,
                })
                .collect()
        };
        let price = |input: f64, output: f64| Price {
            input_per_million: input,
            output_per_million: output,
            cached_input_per_million: input / 4.0,
            cache_write_per_million: input,
        };
        let prices: BTreeMap<String, Price> = [
            ("o3".to_owned(), price(2.0, 8.0)),
            ("gemini-2.5-pro".to_owned(), price(1.25, 10.0)),
            ("gpt-4.1-mini".to_owned(), price(0.4, 1.6)),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            cheapest(&models(&["o3", "gemini-2.5-pro", "gpt-4.1-mini"]), &prices).as_deref(),
            Some("gpt-4.1-mini")
        );
        assert_eq!(
            cheapest(&models(&["o3", "gemini-2.5-pro"]), &prices).as_deref(),
            Some("gemini-2.5-pro")
        );
        assert_eq!(cheapest(&models(&["o3"]), &prices).as_deref(), Some("o3"));
        assert_eq!(cheapest(&models(&["unpriced"]), &prices), None);
        // A model marked light wins over a cheaper unmarked one, priced or not.
        let usable = models(&["o3", "gpt-4.1-mini", "local-small"]);
        assert_eq!(
            light_model(&usable, &["local-small".to_owned()], &prices).as_deref(),
            Some("local-small")
        );
        assert_eq!(
            light_model(&usable, &["o3".to_owned(), "local-small".to_owned()], &prices).as_deref(),
            Some("o3")
        );
        assert_eq!(
            light_model(&usable, &[], &prices).as_deref(),
            Some("gpt-4.1-mini")
        );
    }
}
