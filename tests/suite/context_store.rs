//! The context store (seed 003): every classifier label and its failure
//! path, the three tiers after a scripted conversation of 20 messages, a
//! restart in the middle that keeps the store (the real journal on disk),
//! constraints summarised past their budget and never dropped, and the
//! synthesised request still holding the problem and every constraint at
//! step 100 of a long run whose transcript is condensed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::conversation;
use forgehand_test_support::scripted_model;

use async_trait::async_trait;
use conversation::conversation;
use forgehand::agent::condense::CondenseSettings;
use forgehand::agent::tools::{LocalTool, ToolRegistry};
use forgehand::agent::{Agent, AgentLimits};
use forgehand::context_store::classify::{self, Intent};
use forgehand::context_store::{
    Classifier, ContextLog, ContextStore, Current, Followed, Incoming, MemoryLog, Reading, Retired,
    Synthesis, TierBudgets, Voice,
};
use forgehand::journal::Journal;
use forgehand::llm::{
    ChatModel, ChatRequest, ChatResponse, LlmError, Message, ModelInfo, TokenUsage, ToolCall, ToolSpec,
};
use forgehand::mcp::ToolOutput;
use forgehand::prompts::Prompts;
use scripted_model::{classified_message, classify_like_a_model};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

static PROMPTS: LazyLock<Arc<Prompts>> = LazyLock::new(Prompts::embedded);

fn synthesize(store: &ContextStore) -> String {
    store.synthesize(&Synthesis::new(&PROMPTS.context.synthesis, 3))
}

/// A light model: classifies like `classify_like_a_model`, or answers
/// `fixed` when set; summarises a constraint to its first words.
struct Light {
    fixed: Option<Result<String, ()>>,
    calls: AtomicUsize,
    requests: Mutex<Vec<ChatRequest>>,
}

impl Light {
    fn new() -> Light {
        Light {
            fixed: None,
            calls: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
        }
    }

    fn answering(answer: Result<&str, ()>) -> Light {
        Light {
            fixed: Some(answer.map(str::to_owned)),
            ..Light::new()
        }
    }
}

#[async_trait]
impl ChatModel for Light {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.requests.lock().unwrap().push(request.clone());
        let Message::User(prompt) = &request.messages[0] else {
            panic!("a user prompt")
        };
        let text = match &self.fixed {
            Some(Ok(text)) => text.clone(),
            Some(Err(())) => {
                return Err(LlmError::Network {
                    provider: "openai".into(),
                    detail: "connection refused".into(),
                })
            }
            None if prompt.contains("Restate it as one short line") => {
                let text = prompt.split("\"\"\"").nth(1).unwrap().trim();
                format!(
                    "Summary: {}",
                    text.split_whitespace().take(6).collect::<Vec<_>>().join(" ")
                )
            }
            None => classify_like_a_model(classified_message(prompt)).to_string(),
        };
        Ok(ChatResponse {
            text,
            tool_calls: vec![],
            usage: TokenUsage::default(),
            model: "gpt-4.1-mini".into(),
            ..Default::default()
        })
    }

    fn models(&self) -> Vec<ModelInfo> {
        vec![ModelInfo {
            name: "gpt-4.1-mini".into(),
            max_input_tokens: 1_000_000,
        }]
    }
}

fn classifier(model: &Light) -> Classifier<'_> {
    Classifier {
        model,
        name: None,
        usage: None,
        prompts: &PROMPTS.context,
    }
}

fn incoming(n: usize, text: &str) -> Incoming {
    Incoming {
        source: format!("comment:{n}"),
        author: if n == 1 { "alice".into() } else { "bob".into() },
        voice: Voice::Member,
        text: text.into(),
    }
}

#[tokio::test]
async fn every_label_is_read_and_a_failed_classification_keeps_the_message_as_unclear() {
    for intent in Intent::ALL {
        let answer = json!({"intent": [intent.as_str()], "reason": "because"}).to_string();
        let model = Light::answering(Ok(&answer));
        let c = classify::classify(&model, None, &PROMPTS.context, "some message").await;
        assert_eq!(c.intents, vec![intent]);
        assert_eq!(c.failure, None);
        // The request is the seed's: low temperature, JSON mode.
        let request = model.requests.lock().unwrap()[0].clone();
        assert!(request.temperature.unwrap() <= 0.1);
        assert!(request.json_output);
    }
    let log = MemoryLog::default();
    for (model, why) in [
        (
            Light::answering(Ok("The user wants a feature.")),
            "not a JSON object",
        ),
        (
            Light::answering(Ok(r#"{"intent": ["WISHFUL"], "reason": "x"}"#)),
            "no known label (WISHFUL)",
        ),
        (Light::answering(Err(())), "could not be asked"),
    ] {
        let mut store = ContextStore::load(&log, why);
        store
            .add_all(
                &log,
                classifier(&model),
                vec![incoming(1, "Add CSV export to the report page")],
            )
            .await;
        let m = &store.messages()[0];
        assert_eq!(m.classification.intents, vec![Intent::Unclear]);
        assert!(
            m.classification.failure.as_deref().unwrap().contains(why),
            "{:?}",
            m.classification
        );
        assert_eq!(
            m.text, "Add CSV export to the report page",
            "the message is kept whole"
        );
        // Still in the prompt: the only message stands as the problem.
        assert!(synthesize(&store).contains("Add CSV export to the report page"));
    }
}

#[tokio::test]
async fn twenty_messages_land_in_their_tiers() {
    let model = Light::new();
    let log = MemoryLog::default();
    let mut store = ContextStore::load(&log, "github:acme/app:issue:1");
    let messages: Vec<Incoming> = conversation()
        .into_iter()
        .enumerate()
        .map(|(i, t)| incoming(i + 1, t))
        .collect();
    assert_eq!(store.add_all(&log, classifier(&model), messages).await, 20);
    let core: Vec<&str> = store.core().iter().map(|m| m.text.as_str()).collect();
    assert!(core.contains(&"Add CSV export to the monthly report page"));
    let evolving: Vec<&str> = store.evolving().iter().map(|m| m.text.as_str()).collect();
    let constraints = [
        "It must use semicolons as separators",
        "Also add a header row with the column names",
        "The export must not load the whole table into memory",
        "Instead of a button, use a link in the toolbar",
        "Dates must be ISO 8601",
        "Keep the file name as report-YYYY-MM.csv",
        "Do not add new dependencies",
        "Also escape quotes in text fields",
        "Only maintainers may see the export link",
    ];
    assert_eq!(evolving, constraints);
    let prompt = synthesize(&store);
    let at = |h: &str| prompt.find(h).unwrap();
    let (mission, rules, recent, current) = (
        at("# Mission"),
        at("# Constraints"),
        at("# Recent Conversation"),
        at("# User's Current Message"),
    );
    assert!(prompt[mission..rules].contains("Add CSV export to the monthly report page"));
    for c in constraints {
        assert!(prompt[rules..recent].contains(c), "{c}");
    }
    // The last three messages before the current one, in order.
    let turn = &prompt[recent..current];
    let (a, b, c) = (
        turn.find("Also escape quotes").unwrap(),
        turn.find("Is there a test for the page?").unwrap(),
        turn.find("Only maintainers may see").unwrap(),
    );
    assert!(a < b && b < c);
    assert!(!turn.contains("Great"));
    assert!(prompt[current..].contains("Please go ahead"));
    assert!(!store.open_ended());
}

#[tokio::test]
async fn a_restart_in_the_middle_keeps_the_store_and_classifies_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<Incoming> = conversation()
        .into_iter()
        .enumerate()
        .map(|(i, t)| incoming(i + 1, t))
        .collect();
    let model = Light::new();
    {
        let journal = Journal::open(dir.path()).unwrap();
        let mut store = ContextStore::load(&journal, "github:acme/app:issue:1");
        store
            .add_all(&journal, classifier(&model), all[..10].to_vec())
            .await;
    }
    assert_eq!(model.calls.load(Ordering::SeqCst), 10);
    // The daemon comes back: the whole thread is read again.
    let journal = Journal::open(dir.path()).unwrap();
    let mut store = ContextStore::load(&journal, "github:acme/app:issue:1");
    assert_eq!(store.messages().len(), 10);
    assert_eq!(store.add_all(&journal, classifier(&model), all.clone()).await, 10);
    assert_eq!(
        model.calls.load(Ordering::SeqCst),
        20,
        "the first ten were not classified again"
    );
    let again = ContextStore::load(&journal, "github:acme/app:issue:1");
    assert_eq!(again, store);
    let seqs: Vec<u64> = again.messages().iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (1..=20).collect::<Vec<_>>());
    // Other conversations are apart.
    assert!(ContextStore::load(&journal, "github:acme/app:issue:2").is_empty());
}

#[tokio::test]
async fn an_issue_and_its_pr_adding_to_one_store_at_once_lose_no_message() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(dir.path()).unwrap();
    let model = Light::new();
    let key = "github:acme/app:issue:1";
    let mut first = ContextStore::load(&journal, key);
    first
        .add_all(
            &journal,
            classifier(&model),
            vec![incoming(1, "Build the exporter")],
        )
        .await;
    // Two runs load the store as it is, then each adds its own message.
    let mut issue_run = ContextStore::load(&journal, key);
    let mut pr_run = ContextStore::load(&journal, key);
    issue_run
        .add_all(
            &journal,
            classifier(&model),
            vec![incoming(2, "It must not need a network")],
        )
        .await;
    pr_run
        .add_all(
            &journal,
            classifier(&model),
            vec![incoming(3, "Also export JSON")],
        )
        .await;
    let stored = ContextStore::load(&journal, key);
    let texts: Vec<&str> = stored.messages().iter().map(|m| m.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "Build the exporter",
            "It must not need a network",
            "Also export JSON"
        ]
    );
    let seqs: Vec<u64> = stored.messages().iter().map(|m| m.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(pr_run.messages().last().unwrap().seq, 3, "numbered by the log");
    // The same in memory.
    let log = MemoryLog::default();
    let mut a = ContextStore::load(&log, key);
    let mut b = ContextStore::load(&log, key);
    a.add_all(&log, classifier(&model), vec![incoming(1, "one")])
        .await;
    b.add_all(&log, classifier(&model), vec![incoming(2, "two")])
        .await;
    assert_eq!(ContextStore::load(&log, key).messages().len(), 2);
}

#[tokio::test]
async fn constraints_past_their_budget_are_summarised_never_dropped() {
    let model = Light::new();
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(dir.path()).unwrap();
    let mut store = ContextStore::load(&journal, "k");
    let long = |topic: &str| {
        format!(
            "The {topic} must follow the rules in docs/{topic}.md. {}",
            "It must be checked by hand before release, with the notes kept in the changelog. ".repeat(10)
        )
    };
    let mut messages = vec![incoming(1, "Build the exporter")];
    for (i, topic) in ["naming", "logging", "errors", "paging"].iter().enumerate() {
        messages.push(incoming(i + 2, &long(topic)));
    }
    store.add_all(&journal, classifier(&model), messages).await;
    store.fit_evolving(&journal, classifier(&model), 400).await;
    let summarised: Vec<_> = store
        .evolving()
        .iter()
        .filter(|m| m.summary.is_some())
        .map(|m| m.seq)
        .collect();
    assert!(!summarised.is_empty());
    assert_eq!(summarised[0], 2, "the oldest first");
    assert_eq!(store.evolving().len(), 4, "nothing dropped");
    let prompt = synthesize(&store);
    for topic in ["naming", "logging", "errors", "paging"] {
        assert!(
            prompt.contains(&format!("docs/{topic}.md")) || prompt.contains(&format!("The {topic} must")),
            "{topic}: {prompt}"
        );
    }
    assert!(prompt.contains("- (summary) Summary: The naming must"));
    assert!(
        prompt.contains("An entry marked \"(summary)\" stands for a longer message"),
        "the prompt says what a summary is"
    );
    // The raw text stays in the journal with its summary.
    let stored = ContextLog::load(&journal, "k");
    let first = stored.iter().find(|m| m.seq == 2).unwrap();
    assert!(first.text.contains("checked by hand before release"));
    assert!(first
        .summary
        .as_deref()
        .unwrap()
        .starts_with("Summary: The naming must"));
}

/// The agent's model for a long run: one tool call a step, the answer at
/// step `steps`; records the token count of every request.
struct LongRun {
    steps: usize,
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for LongRun {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let n = {
            let mut r = self.requests.lock().unwrap();
            r.push(request.clone());
            r.len()
        };
        let (text, tool_calls) = if n >= self.steps {
            ("Done.".to_owned(), vec![])
        } else {
            (
                String::new(),
                vec![ToolCall {
                    id: format!("call_{n}"),
                    name: "read_file".into(),
                    arguments: json!({"path": format!("src/module_{n}.rs")}).to_string(),
                }],
            )
        };
        Ok(ChatResponse {
            text,
            tool_calls,
            usage: TokenUsage::default(),
            model: "o3".into(),
            ..Default::default()
        })
    }
}

/// A realistic file view: 120 numbered lines of Rust.
struct ReadFile;

#[async_trait]
impl LocalTool for ReadFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters:
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
                    .as_object()
                    .unwrap()
                    .clone(),
        }
    }
    async fn call(&self, arguments: Map<String, Value>) -> ToolOutput {
        let path = arguments["path"].as_str().unwrap_or_default();
        let text: String = (1..=120)
            .map(|i| format!("{i:>6}\tpub fn handler_{i}(request: &Request) -> Result<Response, Error> {{ route(\"{path}\", request) }}\n"))
            .collect();
        ToolOutput {
            text,
            is_error: false,
        }
    }
}

#[tokio::test]
async fn at_step_100_the_request_still_holds_the_problem_and_every_constraint() {
    let model = Light::new();
    let log = MemoryLog::default();
    let mut store = ContextStore::load(&log, "k");
    let messages: Vec<Incoming> = conversation()
        .into_iter()
        .enumerate()
        .map(|(i, t)| incoming(i + 1, t))
        .collect();
    store.add_all(&log, classifier(&model), messages).await;
    let first = synthesize(&store);

    let run = Arc::new(LongRun {
        steps: 100,
        requests: Mutex::new(Vec::new()),
    });
    let mut tools = ToolRegistry::build(None, None, vec![]).await.unwrap();
    tools.add_local(Arc::new(ReadFile));
    let limits = AgentLimits {
        max_steps: 200,
        token_budget: u64::MAX,
        ..AgentLimits::default()
    };
    let agent =
        Agent::new(run.clone(), tools, limits, Default::default()).with_condensing(CondenseSettings {
            at_tokens: 30_000,
            keep_recent_steps: 4,
        });
    let outcome = agent
        .run("You change code.", vec![Message::User(first.clone())])
        .await;
    assert_eq!(outcome.steps, 100);
    let requests = run.requests.lock().unwrap();
    let last = &requests[99];
    let Message::User(text) = &last.messages[0] else {
        panic!("the synthesised request comes first")
    };
    assert_eq!(text, &first, "byte for byte, at step 100");
    assert!(text.contains("Add CSV export to the monthly report page"));
    for c in store.evolving() {
        assert!(text.contains(&c.text), "{}", c.text);
    }
    // Condensed: far below the full history, the recent steps whole.
    let tokens = forgehand::llm::tokens::count_request(last);
    assert!(tokens <= 30_000 + 12_000, "{tokens}");
    let Message::ToolResults(recent) = &last.messages[last.messages.len() - 1] else {
        panic!()
    };
    assert!(recent[0].content.contains("handler_120"));
    let Message::ToolResults(old) = &last.messages[2] else {
        panic!()
    };
    assert!(
        old[0].content.starts_with("[condensed by forgehand: read_file"),
        "{}",
        old[0].content
    );
}

fn body(key: &str, author: &str, voice: Voice, text: &str) -> Incoming {
    Incoming {
        source: format!("body:{key}"),
        author: author.into(),
        voice,
        text: text.into(),
    }
}

fn comment(key: &str, id: u64, author: &str, text: &str) -> Incoming {
    Incoming {
        source: format!("comment:{key}:{id}"),
        author: author.into(),
        voice: Voice::Member,
        text: text.into(),
    }
}

fn reading(key: &str, incoming: Vec<Incoming>) -> Reading {
    Reading {
        incoming,
        covers: vec![format!("comment:{key}"), format!("body:{key}")],
    }
}

#[tokio::test]
async fn the_store_follows_edits_and_deletions_and_the_journal_keeps_the_old_texts() {
    const KEY: &str = "github:acme/app:issue:7";
    let model = Light::new();
    let dir = tempfile::tempdir().unwrap();
    let journal = Journal::open(dir.path()).unwrap();
    let mut store = ContextStore::load(&journal, KEY);
    let first = vec![
        body(KEY, "alice", Voice::Member, "Add CSV export to the report page"),
        comment(KEY, 1, "bob", "It must use semicolons as separators"),
        comment(KEY, 2, "carol", "Also add a header row"),
    ];
    let followed = store
        .follow(&journal, classifier(&model), reading(KEY, first))
        .await;
    assert_eq!(followed.added, 3);
    let seqs: Vec<u64> = store.messages().iter().map(|m| m.seq).collect();

    // The body and the first comment edited, the second comment deleted.
    let second = vec![
        body(
            KEY,
            "alice",
            Voice::Member,
            "Add CSV and JSON export to the report page",
        ),
        comment(KEY, 1, "bob", "It must use tabs as separators"),
    ];
    let calls = model.calls.load(Ordering::SeqCst);
    let followed = store
        .follow(&journal, classifier(&model), reading(KEY, second.clone()))
        .await;
    assert_eq!((followed.added, followed.edited, followed.deleted), (0, 2, 1));
    assert_eq!(
        model.calls.load(Ordering::SeqCst),
        calls + 2,
        "the edited texts are classified again"
    );
    let now: Vec<u64> = store.messages().iter().map(|m| m.seq).collect();
    assert_eq!(now, seqs[..2], "an edit keeps its place in the thread");
    let prompt = synthesize(&store);
    assert!(prompt.contains("Add CSV and JSON export") && prompt.contains("use tabs"));
    for old in ["Add CSV export to", "semicolons", "header row"] {
        assert!(!prompt.contains(old), "{old} is gone from the thread: {prompt}");
    }
    // The journal: the store as the thread is now, the old texts for audit.
    let reloaded = ContextStore::load(&journal, KEY);
    assert_eq!(reloaded.messages(), store.messages());
    let history = journal.context_history(KEY).unwrap();
    let old: Vec<(Retired, &str)> = history.iter().map(|(why, m)| (*why, m.text.as_str())).collect();
    assert!(
        old.contains(&(Retired::Edited, "Add CSV export to the report page")),
        "{old:?}"
    );
    assert!(old.contains(&(Retired::Edited, "It must use semicolons as separators")));
    assert!(old.contains(&(Retired::Deleted, "Also add a header row")));

    // Read again unchanged: nothing to do, no model call.
    let calls = model.calls.load(Ordering::SeqCst);
    let followed = store
        .follow(&journal, classifier(&model), reading(KEY, second))
        .await;
    assert_eq!(followed, Followed::default());
    assert_eq!(model.calls.load(Ordering::SeqCst), calls);
}

#[tokio::test]
async fn a_body_stored_under_an_older_digest_source_is_taken_over_without_a_call() {
    const KEY: &str = "github:acme/app:issue:8";
    let model = Light::new();
    let log = MemoryLog::default();
    let mut store = ContextStore::load(&log, KEY);
    let mut legacy = body(KEY, "alice", Voice::Member, "Add CSV export");
    legacy.source = format!("body:{KEY}:0a1b2c3d4e5f");
    store.add_all(&log, classifier(&model), vec![legacy]).await;
    let calls = model.calls.load(Ordering::SeqCst);
    let followed = store
        .follow(
            &log,
            classifier(&model),
            reading(KEY, vec![body(KEY, "alice", Voice::Member, "Add CSV export")]),
        )
        .await;
    assert_eq!(followed, Followed::default());
    assert_eq!(model.calls.load(Ordering::SeqCst), calls);
    assert_eq!(store.messages().len(), 1);
    assert_eq!(store.messages()[0].source, format!("body:{KEY}"));
}

#[tokio::test]
async fn constraints_say_who_said_them_and_chatter_is_no_request_on_an_issue() {
    const KEY: &str = "github:acme/app:issue:9";
    let model = Light::new();
    let log = MemoryLog::default();
    let mut store = ContextStore::load(&log, KEY);
    let reporter = Voice::Reporter {
        vouched_by: "maint".into(),
    };
    let thread = vec![
        body(
            KEY,
            "outsider",
            reporter.clone(),
            "Add CSV export to the report page",
        ),
        Incoming {
            source: "comment:x:1".into(),
            author: "outsider".into(),
            voice: reporter,
            text: "It must never touch the billing tables".into(),
        },
        comment(KEY, 2, "carol", "Dates must be ISO 8601"),
        comment(KEY, 3, "dave", "Any update on this?"),
    ];
    store.add_all(&log, classifier(&model), thread).await;
    let issue = Synthesis {
        current: Current::NewestRequest,
        ..Synthesis::new(&PROMPTS.context.synthesis, 3)
    };
    let text = store.synthesize(&issue);
    let section = |name: &str, next: Option<&str>| {
        let start = text.find(name).unwrap();
        let end = next.map(|n| text.find(n).unwrap()).unwrap_or(text.len());
        text[start..end].to_owned()
    };
    let constraints = section("# Constraints", Some("# Recent Conversation"));
    assert!(
        constraints
            .contains("- It must never touch the billing tables (@outsider, the reporter: not a maintainer"),
        "{constraints}"
    );
    assert!(constraints.contains("- Dates must be ISO 8601 (@carol)"));
    let current = section("# User's Current Message", None);
    assert!(current.contains("asks for nothing new"), "{current}");
    assert!(
        section("# Recent Conversation", Some("# User's Current Message")).contains("Any update on this?")
    );
    // A chat (or a PR/MR): the newest message is the current one, whatever it says.
    let chat = store.synthesize(&Synthesis::new(&PROMPTS.context.synthesis, 3));
    assert!(chat[chat.find("# User's Current Message").unwrap()..].contains("Any update on this?"));
}

#[tokio::test]
async fn every_tier_keeps_to_its_budget_and_says_what_it_left_out() {
    const KEY: &str = "github:acme/app:issue:10";
    let model = Light::new();
    let log = MemoryLog::default();
    let mut store = ContextStore::load(&log, KEY);
    let log_dump = format!(
        "Fix the crash below.\n{}",
        "at frame 0x7f3a in parse_row (src/report.rs:12)\n".repeat(4_000)
    );
    let mut thread = vec![body(KEY, "alice", Voice::Member, &log_dump)];
    for i in 1..=6 {
        thread.push(comment(
            KEY,
            i,
            "bob",
            &format!("Note {i}: {}", "a long remark ".repeat(1_500)),
        ));
    }
    thread.push(comment(
        KEY,
        7,
        "carol",
        &format!("Fix the import too: {}", "details ".repeat(20_000)),
    ));
    store.add_all(&log, classifier(&model), thread).await;
    let budgets = TierBudgets {
        mission: 3_000,
        recent: 2_000,
        current: 1_000,
    };
    let how = Synthesis {
        budgets,
        ..Synthesis::new(&PROMPTS.context.synthesis, 3)
    };
    let text = store.synthesize(&how);
    let tokens = forgehand::llm::tokens::count_text(&text);
    assert!(tokens < 3_000 + 2_000 + 1_000 + 500, "{tokens} tokens");
    assert!(
        text.contains("Fix the crash below."),
        "the opening post's beginning stays"
    );
    assert!(text.contains("Fix the import too:"));
    assert!(
        text.matches("is left out for length; it is on the thread]")
            .count()
            >= 2
    );
}
