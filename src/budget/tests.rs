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

/// A model at the same prices whose every answer reads 1,000 and writes
/// 300 tokens ($0.004 a call), keeping the output room each call was given.
struct Metered {
    rooms: std::sync::Mutex<Vec<u32>>,
}

#[async_trait]
impl ChatModel for Metered {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.rooms.lock().unwrap().push(request.max_output_tokens);
        Ok(ChatResponse {
            text: "done".into(),
            tool_calls: Vec::new(),
            usage: TokenUsage {
                input_tokens: 1_000,
                output_tokens: 300,
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

#[tokio::test]
async fn a_small_cap_is_used_call_by_call_until_the_next_worst_case_would_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let caps = Caps {
        task: Some(0.05),
        ..Caps::default()
    };
    let spend = spend(dir.path(), caps, "acme/app");
    let inner = Arc::new(Metered {
        rooms: std::sync::Mutex::new(Vec::new()),
    });
    let model = Budgeted::new(inner.clone(), spend.clone());
    // 16,384 tokens of room would cost $0.16 alone: reserved whole, not
    // one call would fit under $0.05.
    let mut calls = 0;
    let err = loop {
        match model.chat(&request(16_384)).await {
            Ok(_) => calls += 1,
            Err(err) => break err,
        }
        assert!(calls < 100, "the cap never held");
    };
    // $0.004 a call: ten calls, and the eleventh's smallest room (1,024
    // tokens and the input, $0.0103) would pass what is left ($0.01).
    assert_eq!(calls, 10);
    assert!((spend.task_spent() - 0.04).abs() < 1e-9);
    let text = err.to_string();
    assert!(
        text.contains(
            "budget.task_usd: the next call's worst case ($0.0103) would pass the cap ($0.05, $0.0400 used)"
        ),
        "{text}"
    );
    assert!(!text.contains("is spent"), "{text}");
    // Each call's room was what the money left paid for, never more.
    let rooms = inner.rooms.lock().unwrap().clone();
    assert_eq!(rooms.len(), 10);
    assert!((4_990..=5_000).contains(&rooms[0]), "{rooms:?}");
    assert!(rooms.windows(2).all(|w| w[1] < w[0]), "{rooms:?}");
    assert!(rooms.iter().all(|r| *r >= MIN_OUTPUT_TOKENS), "{rooms:?}");
}

#[tokio::test]
async fn a_call_whose_worst_case_fits_goes_as_it_is_and_one_that_cannot_is_not_sent() {
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
    // $0.10 left: the room is cut just below 10,000 tokens, and it is sent.
    model.chat(&request(10_000)).await.unwrap();
    // This fake bills more than the room allows (no real model can):
    // nothing is left, so the next call is never sent.
    let err = model.chat(&request(10_000)).await.unwrap_err();
    assert!(matches!(err, LlmError::Budget(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(
            "budget.task_usd: the next call's worst case ($0.0103) would pass the cap ($0.50, $0.6000 used)"
        ),
        "{text}"
    );
    assert_eq!(
        inner.calls.load(Ordering::SeqCst),
        3,
        "the fourth call was never sent"
    );
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
        err.contains("budget.repository_daily_usd: the next call's worst case ($0.0100) would pass the cap ($0.30, $0.4000 used)"),
        "{err}"
    );
    let scraped = metrics.encode();
    assert!(
        scraped.contains("forgehand_spend_usd_total{repository=\"acme/app\",model=\"pricey-1\"} 0.4"),
        "{scraped}"
    );
    spend.lower_to(Some(0.1), None, None);
    let err = model.chat(&request(1_000)).await.unwrap_err().to_string();
    assert!(
        err.contains("budget.task_usd: the next call's worst case"),
        "{err}"
    );
    assert!(err.contains("the cap ($0.10, $0.4000 used)"), "{err}");
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
