//! The context store and condensation on a long run: the prompt tokens a
//! task sends at steps 10, 50 and 100 (a transcript of real file views and
//! command outputs), with the store's synthesised request and condensation
//! against plain full history; whether every constraint is still in the
//! step-100 request; and the share of each run's input tokens that lies in
//! the prefix the previous request already sent (what prompt caches serve).
//!
//! Run: `cargo bench --bench context`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support/targets.rs"]
mod targets;

use async_trait::async_trait;
use forgehand::agent::condense::CondenseSettings;
use forgehand::agent::tools::{LocalTool, ToolRegistry};
use forgehand::agent::{Agent, AgentLimits};
use forgehand::context_store::classify::{Classification, Intent};
use forgehand::context_store::{ContextStore, Incoming, MemoryLog, Voice};
use forgehand::llm::tokens::{count_message, count_request, count_text, count_tools};
use forgehand::llm::{
    ChatModel, ChatRequest, ChatResponse, LlmError, Message, TokenUsage, ToolCall, ToolSpec,
};
use forgehand::mcp::ToolOutput;
use serde_json::{json, Map, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const STEPS: usize = 100;

/// The thread: the problem, seven constraints and refinements, chatter.
const THREAD: &[(&str, &[Intent])] = &[
    (
        "Add CSV export to the monthly report page. Users need the numbers in a spreadsheet.",
        &[Intent::ProblemDefinition],
    ),
    (
        "It must use semicolons as separators.",
        &[Intent::ConstraintAddition],
    ),
    ("Can it handle 10,000 rows?", &[Intent::Question]),
    (
        "Also add a header row with the column names.",
        &[Intent::Refinement],
    ),
    (
        "The export must stream rows and never load the whole table into memory.",
        &[Intent::ConstraintAddition],
    ),
    ("Thanks!", &[Intent::Unclear]),
    ("Dates must be ISO 8601, in UTC.", &[Intent::ConstraintAddition]),
    (
        "Keep the file name as report-YYYY-MM.csv.",
        &[Intent::ConstraintAddition],
    ),
    ("Do not add new dependencies.", &[Intent::ConstraintAddition]),
    (
        "Only maintainers may see the export link.",
        &[Intent::ConstraintAddition],
    ),
    ("Please go ahead.", &[Intent::Unclear]),
];

/// Real files of this repository, viewed as the editor shows them.
fn views() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<PathBuf> = ignore::Walk::new(&root)
        .filter_map(|e| e.ok())
        .map(|e| e.into_path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            let numbered: String = text
                .lines()
                .enumerate()
                .map(|(i, l)| format!("{:>6}\t{l}\n", i + 1))
                .collect();
            // The editor clips a view at 16 KiB.
            numbered.chars().take(16 * 1024).collect()
        })
        .collect()
}

/// A command's output: a build and test log of about 2 KB.
fn command_output(step: usize) -> String {
    let mut out = format!("$ cargo test report::export\n   Compiling app v0.1.0 (/workspace/project)\n    Finished `test` profile in {}.{}s\n     Running unittests src/lib.rs\n\nrunning 24 tests\n", 10 + step % 7, step % 10);
    for i in 0..24 {
        out.push_str(&format!(
            "test report::export::tests::case_{i:02}_rows_{} ... ok\n",
            i * 417 + step
        ));
    }
    out.push_str("\ntest result: ok. 24 passed; 0 failed; 0 ignored; 0 measured; 180 filtered out\n");
    out
}

struct Outputs {
    views: Vec<String>,
}

#[async_trait]
impl LocalTool for Outputs {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "work".into(),
            description: "View a file or run a command".into(),
            parameters: json!({"type": "object", "properties": {"step": {"type": "integer"}}})
                .as_object()
                .unwrap()
                .clone(),
        }
    }

    async fn call(&self, arguments: Map<String, Value>) -> ToolOutput {
        let step = arguments["step"].as_u64().unwrap_or(0) as usize;
        let text = if step % 3 == 2 {
            command_output(step)
        } else {
            self.views[step % self.views.len()].clone()
        };
        ToolOutput {
            text,
            is_error: false,
        }
    }
}

/// One tool call a step, the answer at `STEPS`; keeps every request.
struct Recorder {
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for Recorder {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let n = {
            let mut r = self.requests.lock().unwrap();
            r.push(request.clone());
            r.len()
        };
        let tool_calls = if n >= STEPS {
            vec![]
        } else {
            vec![ToolCall {
                id: format!("call_{n}"),
                name: "work".into(),
                arguments: json!({"step": n}).to_string(),
            }]
        };
        Ok(ChatResponse {
            text: if n >= STEPS {
                "Done.".into()
            } else {
                format!("Step {n}: looking at the next part.")
            },
            tool_calls,
            usage: TokenUsage::default(),
            model: "o3".into(),
            ..Default::default()
        })
    }
}

/// Tokens of each request and of the part it shares with the request
/// before it (system, tools, then whole identical messages).
fn measure(requests: &[ChatRequest]) -> (Vec<u64>, u64, u64) {
    let mut totals = Vec::new();
    let (mut input, mut cached) = (0, 0);
    for (i, r) in requests.iter().enumerate() {
        let total = count_request(r);
        totals.push(total);
        input += total;
        if i > 0 {
            let prev = &requests[i - 1];
            let mut shared = count_text(&r.system) + count_tools(&r.tools);
            for (a, b) in r.messages.iter().zip(&prev.messages) {
                if a != b {
                    break;
                }
                shared += count_message(a);
            }
            cached += shared;
        }
    }
    (totals, input, cached)
}

async fn run(first: String, condense: Option<CondenseSettings>) -> Vec<ChatRequest> {
    let model = Arc::new(Recorder {
        requests: Mutex::new(Vec::new()),
    });
    let mut tools = ToolRegistry::build(None, None, vec![]).await.unwrap();
    tools.add_local(Arc::new(Outputs { views: views() }));
    let limits = AgentLimits {
        max_steps: STEPS as u32 + 5,
        token_budget: u64::MAX,
        max_tool_result_bytes: 32 * 1024,
        ..AgentLimits::default()
    };
    let mut agent = Agent::new(model.clone(), tools, limits, Default::default());
    if let Some(settings) = condense {
        agent = agent.with_condensing(settings);
    }
    let system = forgehand::prompts::Prompts::embedded().agent.system_prompt(true);
    let outcome = agent.run(&system, vec![Message::User(first)]).await;
    assert_eq!(outcome.steps as usize, STEPS);
    let requests = model.requests.lock().unwrap().clone();
    requests
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let log = MemoryLog::default();
    let mut store = ContextStore::load(&log, "bench");
    for (i, (text, intents)) in THREAD.iter().enumerate() {
        store.push(
            &log,
            Incoming {
                source: format!("comment:{i}"),
                author: "maya".into(),
                voice: Voice::Member,
                text: (*text).into(),
            },
            Classification {
                intents: intents.to_vec(),
                reason: String::new(),
                failure: None,
            },
        );
    }
    let prompts = forgehand::prompts::Prompts::embedded();
    let synthesised = store.synthesize(&forgehand::context_store::Synthesis::new(
        &prompts.context.synthesis,
        3,
    ));
    // Plain history: the thread as it was sent before the store, every comment whole.
    let plain: String = THREAD.iter().map(|(t, _)| format!("- @maya:\n  {t}\n")).collect();
    let plain = format!("# Task: issue acme/app#1\n\n## Comments (oldest first)\n{plain}");

    let settings = forgehand::config::Config::defaults().context;
    let full = run(plain, None).await;
    let ours = run(
        synthesised.clone(),
        Some(CondenseSettings {
            at_tokens: settings.transcript_tokens,
            keep_recent_steps: settings.keep_recent_steps,
        }),
    )
    .await;
    let (full_tokens, full_input, full_cached) = measure(&full);
    let (our_tokens, our_input, our_cached) = measure(&ours);
    println!(
        "long run: {STEPS} steps of file views (real files, up to 16 KiB) and command outputs; condensing at {} tokens, last {} steps whole",
        settings.transcript_tokens, settings.keep_recent_steps
    );
    for step in [10, 50, 100] {
        let (f, o) = (full_tokens[step - 1], our_tokens[step - 1]);
        println!(
            "  step {step:>3}: full history {f:>7} tokens, store + condensation {o:>7} tokens ({:.0} %)",
            o as f64 * 100.0 / f as f64
        );
    }
    let last = &ours[STEPS - 1];
    let Message::User(first) = &last.messages[0] else {
        panic!()
    };
    let constraints: Vec<&str> = THREAD
        .iter()
        .filter(|(_, i)| i.contains(&Intent::ConstraintAddition) || i.contains(&Intent::Refinement))
        .map(|(t, _)| *t)
        .collect();
    let present = constraints.iter().filter(|c| first.contains(**c)).count();
    println!(
        "  constraints in the step-100 request: {present} of {} ({:.0} %); the problem: {}",
        constraints.len(),
        present as f64 * 100.0 / constraints.len() as f64,
        first.contains(THREAD[0].0)
    );
    println!(
        "  input tokens over the run: full history {full_input}, store + condensation {our_input} ({:.0} %)",
        our_input as f64 * 100.0 / full_input as f64
    );
    println!(
        "  cacheable prefix share: full history {:.1} %, store + condensation {:.1} %",
        full_cached as f64 * 100.0 / full_input as f64,
        our_cached as f64 * 100.0 / our_input as f64
    );
    let step_100 = (full_tokens[STEPS - 1], our_tokens[STEPS - 1]);
    check_targets(
        step_100,
        (present, constraints.len()),
        first.contains(THREAD[0].0),
    );
    targets::finish();
}

/// The targets: the step-100 prompt at most 40 % of the full history's,
/// every constraint and the problem in it.
fn check_targets((full, ours): (u64, u64), (present, constraints): (usize, usize), problem: bool) {
    targets::check(
        "context: step-100 prompt, store + condensation / full history",
        format!(
            "{ours} / {full} tokens ({:.0} %)",
            ours as f64 * 100.0 / full as f64
        ),
        "at most 40 %",
        ours * 100 <= full * 40,
    );
    targets::check(
        "context: constraints and the problem in the step-100 request",
        format!("{present} of {constraints}, the problem: {problem}"),
        "all, and the problem",
        present == constraints && problem,
    );
}
