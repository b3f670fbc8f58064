use super::*;
use crate::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Message, ModelInfo};
use async_trait::async_trait;
use chrono::TimeZone;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A model priced at $1 per million input and $10 per million output
/// tokens, whose every answer reads 100,000 and writes 10,000 tokens
/// ($0.20 a call).
struct Pricey {
    calls: AtomicUsize,
}

#[async_trait]
impl ChatModel for Pricey {
    async fn chat(&self, _: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ChatResponse {
            text: "done".into(),
            tool_calls: Vec::new(),
            usage: TokenUsage {
                input_tokens: 100_000,
                output_tokens: 10_000,
                ..TokenUsage::default()
            },
            model: "pricey-1".into(),
            finish: Default::default(),
            native: None,
        })
    }

    fn models(&self) -> Vec<ModelInfo> {
        vec![ModelInfo {
            name: "pricey-1".into(),
            max_input_tokens: 200_000,
        }]
    }
}

fn prices() -> BTreeMap<String, Price> {
    BTreeMap::from([(
        "pricey-1".to_owned(),
        Price {
            input_per_million: 1.0,
            output_per_million: 10.0,
            cached_input_per_million: 0.1,
            cache_write_per_million: 1.0,
        },
    )])
}

fn request(max_output_tokens: u32) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "You are terse.".into(),
        messages: vec![Message::User("Say hello.".into())],
        tools: Vec::new(),
        max_output_tokens,
        temperature: None,
        reasoning_effort: None,
        cache_system: false,
        json_output: false,
    }
}

fn spend(dir: &std::path::Path, caps: Caps, repo: &str) -> Arc<Spend> {
    spend_into(dir, caps, repo, Arc::default())
}

fn spend_into(
    dir: &std::path::Path,
    caps: Caps,
    repo: &str,
    metrics: Arc<crate::metrics::Metrics>,
) -> Arc<Spend> {
    let journal = Arc::new(Journal::open(dir).unwrap());
    Arc::new(Spend::new(caps, journal, metrics, repo, prices()))
}

#[tokio::test]
async fn a_call_whose_worst_case_would_pass_the_task_cap_is_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let caps = Caps {
        task: Some(0.5),
        ..Caps::default()
    };
    let spend = spend(dir.path(), caps, "acme/app");
    let inner = Arc::new(Pricey {
        calls: AtomicUsize::new(0),
    });
    let model = Budgeted::new(inner.clone(), spend.clone());
    // Worst case of a call: a few input tokens and 10,000 output tokens, $0.10.
    model.chat(&request(10_000)).await.unwrap();
    model.chat(&request(10_000)).await.unwrap();
    assert!((spend.task_spent() - 0.4).abs() < 1e-9);
    let err = model.chat(&request(10_000)).await.unwrap_err();
    assert!(matches!(err, LlmError::Budget(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("budget.task_usd ($0.50) is spent: $0.4000 used"),
        "{text}"
    );
    assert_eq!(
        inner.calls.load(Ordering::SeqCst),
        2,
        "the third call was never sent"
    );
    // A smaller output room still fits.
    assert!(model.chat(&request(5_000)).await.is_ok());
}

#[tokio::test]
async fn the_ledger_holds_a_repositorys_day_and_the_repository_may_only_lower_caps() {
    let dir = tempfile::tempdir().unwrap();
    let caps = Caps {
        task: Some(5.0),
        repository_daily: Some(1.0),
        ..Caps::default()
    };
    let metrics = Arc::new(crate::metrics::Metrics::new());
    let spend = spend_into(dir.path(), caps, "acme/app", metrics.clone());
    spend.lower_to(Some(10.0), Some(0.3), None);
    let model = Budgeted::new(
        Arc::new(Pricey {
            calls: AtomicUsize::new(0),
        }),
        spend.clone(),
    );
    // $0.20 a call; the ledger holds what each cost.
    model.chat(&request(1_000)).await.unwrap();
    model.chat(&request(1_000)).await.unwrap();
    let err = model.chat(&request(1_000)).await.unwrap_err().to_string();
    assert!(
        err.contains("budget.repository_daily_usd ($0.30) is spent: $0.4000 used"),
        "{err}"
    );
    assert!(err.contains("it starts over at"), "{err}");
    let scraped = metrics.encode();
    assert!(
        scraped.contains("forgehand_spend_usd_total{repository=\"acme/app\",model=\"pricey-1\"} 0.4"),
        "{scraped}"
    );
    spend.lower_to(Some(0.1), None, None);
    let err = model.chat(&request(1_000)).await.unwrap_err().to_string();
    assert!(err.contains("budget.task_usd ($0.10)"), "{err}");
}

#[test]
fn a_new_item_waits_until_the_period_turns_when_a_cap_is_reached() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(dir.path()).unwrap();
    let now = Period(chrono::Utc.with_ymd_and_hms(2026, 11, 26, 15, 0, 0).unwrap());
    let config = BudgetConfig {
        daemon_daily_usd: Some(1.0),
        repository_monthly_usd: Some(3.0),
        ..BudgetConfig::default()
    };
    assert_eq!(waits(&config, &journal, "acme/app", now).unwrap(), None);
    journal
        .record_spend(&now.day(), "acme/api", "pricey-1", 1.0)
        .unwrap();
    let over = waits(&config, &journal, "acme/app", now).unwrap().unwrap();
    assert_eq!(over.key, "budget.daemon_daily_usd");
    assert_eq!(
        over.turns,
        Some(chrono::Utc.with_ymd_and_hms(2026, 11, 27, 0, 0, 0).unwrap())
    );
    // The next day the daemon's cap is new; the repository's month is not.
    let tomorrow = Period(now.next_day());
    assert_eq!(waits(&config, &journal, "acme/app", tomorrow).unwrap(), None);
    journal
        .record_spend("2026-11-02", "acme/app", "pricey-1", 2.5)
        .unwrap();
    // With a task cap of $1, another task could pass the month's $3.
    let with_task = BudgetConfig {
        task_usd: Some(1.0),
        ..config
    };
    let over = waits(&with_task, &journal, "acme/app", tomorrow)
        .unwrap()
        .unwrap();
    assert_eq!(over.key, "budget.repository_monthly_usd");
    assert_eq!(
        over.turns,
        Some(chrono::Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap())
    );
    assert_eq!(waits(&config, &journal, "acme/app", tomorrow).unwrap(), None);
}
