//! The daemon's metrics, through the Prometheus project's own client
//! (`prometheus-client`), in OpenMetrics or the Prometheus text format
//! 0.0.4, as the scraper asks ([`Exposition`]): tasks, phases,
//! model requests, tokens and cost, tool calls, forge calls and rate
//! limits, sandboxes, poll cycles. One [`Metrics`] per daemon, made where
//! the daemon is assembled and handed to each part that records into it
//! (the forges, the model router, the sandbox backend, the agent, the
//! tasks); the HTTP listener encodes it on each scrape. A part given none
//! records into a registry of its own that nobody reads.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Label pairs, as `[("model", "o3")]`.
pub type Labels = Vec<(String, String)>;

/// Histogram buckets in seconds, from a second to about 4.5 hours.
#[derive(Clone, Copy)]
struct Buckets(&'static [f64]);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

const LONG: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 16200.0,
];
const SHORT: &[f64] = &[0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

pub struct Metrics {
    registry: Registry,
    tasks_started: Family<Labels, Counter>,
    tasks_ended: Family<Labels, Counter>,
    task_seconds: Family<Labels, Histogram, Buckets>,
    phase_seconds: Family<Labels, Histogram, Buckets>,
    model_requests: Family<Labels, Counter>,
    tokens: Family<Labels, Counter>,
    cost: Family<Labels, Counter<f64, AtomicU64>>,
    tool_calls: Family<Labels, Counter>,
    forge_calls: Family<Labels, Counter>,
    rate_limit_remaining: Family<Labels, Gauge>,
    sandboxes_running: Gauge,
    poll_seconds: Histogram,
    journal_bytes: Gauge,
    repository_steps: Family<Labels, Counter>,
    egress_connections: Family<Labels, Counter>,
    egress_bytes: Family<Labels, Counter>,
    webhook_deliveries: Family<Labels, Counter>,
    spend: Family<Labels, Counter<f64, AtomicU64>>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics { .. }")
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let m = Metrics {
            registry: Registry::with_prefix("forgehand"),
            tasks_started: Family::default(),
            tasks_ended: Family::default(),
            task_seconds: Family::new_with_constructor(Buckets(LONG)),
            phase_seconds: Family::new_with_constructor(Buckets(LONG)),
            model_requests: Family::default(),
            tokens: Family::default(),
            cost: Family::default(),
            tool_calls: Family::default(),
            forge_calls: Family::default(),
            rate_limit_remaining: Family::default(),
            sandboxes_running: Gauge::default(),
            poll_seconds: Histogram::new(SHORT.iter().copied()),
            journal_bytes: Gauge::default(),
            repository_steps: Family::default(),
            egress_connections: Family::default(),
            egress_bytes: Family::default(),
            webhook_deliveries: Family::default(),
            spend: Family::default(),
        };
        let mut m = m;
        m.register_task_metrics();
        m.register_daemon_metrics();
        m
    }

    /// What tasks do: their phases, models, tools and sandboxes.
    fn register_task_metrics(&mut self) {
        let m = self;
        let r = &mut m.registry;
        r.register(
            "tasks_started",
            "Tasks started (a resume counts), by forge",
            m.tasks_started.clone(),
        );
        r.register("tasks_ended", "Tasks ended, by outcome", m.tasks_ended.clone());
        r.register(
            "task_duration_seconds",
            "How long tasks took, by outcome",
            m.task_seconds.clone(),
        );
        r.register(
            "phase_duration_seconds",
            "How long each phase of a task took",
            m.phase_seconds.clone(),
        );
        r.register(
            "model_requests",
            "Model API requests, by model and outcome",
            m.model_requests.clone(),
        );
        r.register(
            "spend_usd",
            "What the models cost in US dollars at the catalogue's prices, by repository and model",
            m.spend.clone(),
        );
        r.register(
            "model_tokens",
            "Model tokens, by model and kind (input, cached_input, output)",
            m.tokens.clone(),
        );
        r.register(
            "model_cost_usd",
            "Estimated model cost in US dollars (llm.prices), by model",
            m.cost.clone(),
        );
        r.register(
            "tool_calls",
            "Tool calls of the agent, by tool and outcome",
            m.tool_calls.clone(),
        );
    }

    /// What the daemon does around tasks: forges, polls, the journal, webhooks.
    fn register_daemon_metrics(&mut self) {
        let m = self;
        let r = &mut m.registry;
        r.register(
            "forge_api_calls",
            "Forge API calls, by forge and HTTP status",
            m.forge_calls.clone(),
        );
        r.register(
            "forge_rate_limit_remaining",
            "Requests left in the forge's rate-limit window, as last reported",
            m.rate_limit_remaining.clone(),
        );
        r.register(
            "sandboxes_running",
            "Sandboxes (containers) of running tasks",
            m.sandboxes_running.clone(),
        );
        r.register(
            "poll_cycle_duration_seconds",
            "How long one poll of every forge took",
            m.poll_seconds.clone(),
        );
        r.register(
            "journal_bytes",
            "Size of the journal database and its write-ahead log",
            m.journal_bytes.clone(),
        );
        r.register(
            "repository_steps",
            "Runs of a repository's own setup and tests, by step (setup, test) and outcome (passed, failed, timed_out)",
            m.repository_steps.clone(),
        );
        r.register(
            "egress_connections",
            "Connections from sandboxes through the egress tunnel, by phase (setup, agent) and decision (allowed, denied)",
            m.egress_connections.clone(),
        );
        r.register(
            "egress_bytes",
            "Bytes carried by the egress tunnel, both ways, by phase",
            m.egress_bytes.clone(),
        );
        r.register(
            "webhook_deliveries",
            "Webhook deliveries, by forge and outcome (accepted, duplicate, ignored, malformed, refused, too_large)",
            m.webhook_deliveries.clone(),
        );
    }

    pub fn webhook_delivery(&self, forge: &str, outcome: &str) {
        self.webhook_deliveries
            .get_or_create(&labels(&[("forge", forge), ("outcome", outcome)]))
            .inc();
    }

    pub fn egress(&self, phase: &str, decision: &str, bytes: u64) {
        self.egress_connections
            .get_or_create(&labels(&[("phase", phase), ("decision", decision)]))
            .inc();
        self.egress_bytes
            .get_or_create(&labels(&[("phase", phase)]))
            .inc_by(bytes);
    }

    pub fn repository_step(&self, step: &str, outcome: &str) {
        self.repository_steps
            .get_or_create(&labels(&[("step", step), ("outcome", outcome)]))
            .inc();
    }

    pub fn task_started(&self, forge: &str) {
        self.tasks_started
            .get_or_create(&labels(&[("forge", forge)]))
            .inc();
    }

    pub fn task_ended(&self, outcome: &str, took: Duration) {
        let l = labels(&[("outcome", outcome)]);
        self.tasks_ended.get_or_create(&l).inc();
        self.task_seconds.get_or_create(&l).observe(took.as_secs_f64());
    }

    pub fn phase_took(&self, phase: &str, took: Duration) {
        self.phase_seconds
            .get_or_create(&labels(&[("phase", phase)]))
            .observe(took.as_secs_f64());
    }

    /// One model request (an attempt: retries count again).
    pub fn model_request(&self, model: &str, outcome: &str) {
        self.model_requests
            .get_or_create(&labels(&[("model", model), ("outcome", outcome)]))
            .inc();
    }

    /// Tokens of one model answer, by kind, and its estimated cost.
    pub fn model_usage(&self, model: &str, tokens: ModelTokens, cost: Option<f64>) {
        for (kind, n) in [
            ("input", tokens.input),
            ("cached_input", tokens.cached_input),
            ("output", tokens.output),
        ] {
            self.tokens
                .get_or_create(&labels(&[("model", model), ("kind", kind)]))
                .inc_by(n);
        }
        if let Some(cost) = cost {
            self.cost.get_or_create(&labels(&[("model", model)])).inc_by(cost);
        }
    }

    /// What one model answer for a task of `repo` cost.
    pub fn spend(&self, repo: &str, model: &str, usd: f64) {
        self.spend
            .get_or_create(&labels(&[("repository", repo), ("model", model)]))
            .inc_by(usd);
    }

    pub fn tool_call(&self, tool: &str, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.tool_calls
            .get_or_create(&labels(&[("tool", tool), ("outcome", outcome)]))
            .inc();
    }

    pub fn forge_call(&self, forge: &str, status: u16) {
        self.forge_calls
            .get_or_create(&labels(&[("forge", forge), ("status", &status.to_string())]))
            .inc();
    }

    pub fn rate_limit(&self, forge: &str, remaining: u64) {
        self.rate_limit_remaining
            .get_or_create(&labels(&[("forge", forge)]))
            .set(i64::try_from(remaining).unwrap_or(i64::MAX));
    }

    /// The last reported rate-limit headroom per forge.
    pub fn rate_limits(&self) -> Vec<(String, i64)> {
        ["github", "gitlab"]
            .into_iter()
            .filter_map(|forge| {
                let l = labels(&[("forge", forge)]);
                self.rate_limit_remaining
                    .get(&l)
                    .map(|g| (forge.to_owned(), g.get()))
            })
            .collect()
    }

    pub fn sandbox_started(&self) {
        self.sandboxes_running.inc();
    }

    pub fn sandbox_removed(&self) {
        self.sandboxes_running.dec();
    }

    pub fn poll_took(&self, took: Duration) {
        self.poll_seconds.observe(took.as_secs_f64());
    }

    pub fn set_journal_bytes(&self, bytes: u64) {
        self.journal_bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// Everything in OpenMetrics.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = encode(&mut out, &self.registry) {
            tracing::warn!("cannot encode the metrics: {e}");
        }
        out
    }

    /// Everything in `format`.
    pub fn encode_as(&self, format: Exposition) -> String {
        match format {
            Exposition::OpenMetrics => self.encode(),
            Exposition::Text => text_format(&self.encode()),
        }
    }
}

/// The formats `/metrics` answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposition {
    /// OpenMetrics 1.0.0, for scrapers that ask for it.
    OpenMetrics,
    /// The Prometheus text format 0.0.4, for everyone else.
    Text,
}

impl Exposition {
    /// The format an `Accept` header asks for: OpenMetrics when it names
    /// `application/openmetrics-text` at least as high as the text format
    /// (as Prometheus does), the text format otherwise (no header, `*/*`,
    /// `text/plain`), as the Prometheus project's own clients negotiate.
    pub fn asked_for(accept: Option<&str>) -> Exposition {
        let (mut openmetrics, mut text) = (0.0_f32, 0.0_f32);
        for range in accept.unwrap_or_default().split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let quality = parts
                .filter_map(|p| p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(quality),
                "text/plain" | "text/*" | "*/*" => text = text.max(quality),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= text {
            Exposition::OpenMetrics
        } else {
            Exposition::Text
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// OpenMetrics (as `prometheus-client` writes it) in the text format
/// 0.0.4: a counter family is named with its samples' `_total` there,
/// types it lacks are `untyped`, and `# UNIT` and `# EOF` are not part of
/// it. Sample lines are the same in both.
fn text_format(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // `# HELP` comes before the `# TYPE` that says whether the name changes.
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if let Some(described) = line.strip_prefix("# TYPE ") {
            let (name, kind) = described.split_once(' ').unwrap_or((described, "unknown"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), kind),
                "gauge" | "histogram" | "summary" => (name.to_owned(), kind),
                _ => (name.to_owned(), "untyped"),
            };
            if let Some(text) = help.take() {
                let text = text.split_once(' ').map_or("", |(_, text)| text);
                let _ = writeln!(out, "# HELP {name} {text}");
            }
            let _ = writeln!(out, "# TYPE {name} {kind}");
            continue;
        }
        if let Some(unmatched) = help.take() {
            let _ = writeln!(out, "# HELP {unmatched}");
        }
        if let Some(described) = line.strip_prefix("# HELP ") {
            help = Some(described);
        } else if !(line.starts_with("# UNIT ") || line == "# EOF") {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The token counts `model_usage` records: plain numbers, so this module
/// depends on nothing it measures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelTokens {
    pub input: u64,
    pub cached_input: u64,
    pub output: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_values_are_in_the_text_format() {
        let m = Metrics::new();
        m.task_started("github");
        m.task_ended("delivered", Duration::from_secs(90));
        m.model_request("o3", "ok");
        m.model_usage(
            "o3",
            ModelTokens {
                input: 1000,
                cached_input: 800,
                output: 50,
            },
            Some(0.0042),
        );
        m.rate_limit("github", 4999);
        let text = m.encode();
        assert!(
            text.contains("forgehand_tasks_started_total{forge=\"github\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("forgehand_task_duration_seconds_bucket{le=\"120.0\",outcome=\"delivered\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("forgehand_model_tokens_total{model=\"o3\",kind=\"cached_input\"} 800"),
            "{text}"
        );
        assert!(
            text.contains("forgehand_model_cost_usd_total{model=\"o3\"} 0.0042"),
            "{text}"
        );
        assert!(
            text.contains("forgehand_forge_rate_limit_remaining{forge=\"github\"} 4999"),
            "{text}"
        );
        assert_eq!(m.rate_limits(), vec![("github".to_owned(), 4999)]);
    }

    #[test]
    fn the_format_follows_the_scrapers_accept_header() {
        use Exposition::{OpenMetrics, Text};
        for (accept, format) in [
            (None, Text),
            (Some("*/*"), Text),
            (Some("text/plain;version=0.0.4"), Text),
            (Some("application/openmetrics-text"), OpenMetrics),
            // Prometheus 2 and 3 ask like this.
            (
                Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                OpenMetrics,
            ),
            (
                Some("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
                OpenMetrics,
            ),
            (Some("text/plain;q=0.9, application/openmetrics-text;q=0.5"), Text),
            (Some("application/openmetrics-text;q=0"), Text),
        ] {
            assert_eq!(Exposition::asked_for(accept), format, "{accept:?}");
        }
        assert!(Text.content_type().starts_with("text/plain; version=0.0.4"));
        assert!(OpenMetrics
            .content_type()
            .starts_with("application/openmetrics-text; version=1.0.0"));
    }

    #[test]
    fn the_text_format_names_counter_families_with_total_and_has_no_openmetrics_lines() {
        let m = Metrics::new();
        m.task_started("github");
        m.webhook_delivery("gitlab", "too_large");
        m.poll_took(Duration::from_millis(40));
        let text = m.encode_as(Exposition::Text);
        for line in [
            "# HELP forgehand_tasks_started_total Tasks started (a resume counts), by forge.",
            "# TYPE forgehand_tasks_started_total counter",
            "forgehand_tasks_started_total{forge=\"github\"} 1",
            "# TYPE forgehand_webhook_deliveries_total counter",
            "forgehand_webhook_deliveries_total{forge=\"gitlab\",outcome=\"too_large\"} 1",
            "# TYPE forgehand_poll_cycle_duration_seconds histogram",
            "forgehand_poll_cycle_duration_seconds_count 1",
            "# TYPE forgehand_sandboxes_running gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
        // Every TYPE has its HELP just before it, under the same name.
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if let Some(typed) = line.strip_prefix("# TYPE ") {
                let name = typed.split(' ').next().unwrap_or_default();
                assert!(lines[i - 1].starts_with(&format!("# HELP {name} ")), "{text}");
            }
        }
        assert!(m.encode_as(Exposition::OpenMetrics).ends_with("# EOF\n"));
    }

    #[test]
    fn the_webhook_counters_help_names_every_outcome() {
        let m = Metrics::new();
        m.webhook_delivery("github", "accepted");
        let text = m.encode_as(Exposition::Text);
        let help = text
            .lines()
            .find(|l| l.starts_with("# HELP forgehand_webhook_deliveries_total "))
            .unwrap_or_default()
            .to_owned();
        for outcome in crate::webhooks::OUTCOMES {
            assert!(help.contains(outcome), "{outcome} in {help}");
        }
    }
}
