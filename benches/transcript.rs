//! The transcript's costs: journalling one step (a model answer with a
//! tool call, and the tool's 2 KB result with an edit's diff) into a real
//! journal, and rendering a 500-step run's page from the journal.
//!
//! Run: `cargo bench --bench transcript`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support/targets.rs"]
mod targets;

use forgehand::agent::{ModelTurn, StepRecorder};
use forgehand::config::Secrets;
use forgehand::journal::Journal;
use forgehand::llm::{TokenUsage, ToolCall, ToolResult};
use forgehand::transcript::{Entry, Transcript};
use forgehand_test_support::stats;
use std::sync::Arc;
use std::time::{Duration, Instant};

const STEPS: u32 = 500;

fn step(transcript: &Transcript, n: u32) {
    let call = ToolCall {
        id: format!("call_{n}"),
        name: "text_editor_str_replace".into(),
        arguments: format!(
            r#"{{"path": "/workspace/project/src/lib{n}.rs", "old_str": "fn old_{n}() {{}}\n", "new_str": "fn new_{n}() {{\n    println!(\"{n}\");\n}}\n"}}"#
        ),
    };
    transcript.model_turn(&ModelTurn {
        step: n,
        model: "gpt-5.6",
        text: "I will rename the function and print its number.",
        tool_calls: std::slice::from_ref(&call),
        usage: TokenUsage {
            input_tokens: 20_000 + u64::from(n) * 300,
            cached_input_tokens: 18_000,
            output_tokens: 120,
            ..TokenUsage::default()
        },
        cost: Some(0.0123),
        took: Duration::from_millis(900),
    });
    let result = ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: format!(
            "The file /workspace/project/src/lib{n}.rs was edited.\n{}",
            "a line of context\n".repeat(110)
        ),
        is_error: false,
    };
    transcript.tool_ran(n, &call, &result, Duration::from_millis(2));
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open(dir.path()).unwrap());
    let secrets = Arc::new(Secrets::from_lookup(&|name| {
        (name == "GITHUB_TOKEN").then(|| "ghp_benchToken000000000000000000000".to_owned())
    }));
    let transcript = Transcript::begin(journal.clone(), secrets, "github:acme/app:issue:1", None).unwrap();
    let mut samples = Vec::new();
    for n in 1..=STEPS {
        let started = Instant::now();
        step(&transcript, n);
        samples.push(started.elapsed());
    }
    transcript.end("delivered", "https://github.example/acme/app/pull/2");
    stats::report("journalling one step (answer + tool result)", &mut samples);
    // The target is the release build's; the quick mode's debug build on
    // loaded cores takes about 0.3 ms, and an order of magnitude more is a regression.
    let bound = targets::pick(1.0, 5.0);
    let median = stats::percentile(&mut samples, 0.5).as_secs_f64() * 1e3;
    targets::check(
        "journalling one step, median",
        format!("{median:.2} ms"),
        &format!("under {bound} ms"),
        median < bound,
    );

    let id = transcript.id();
    let mut renders = Vec::new();
    let mut bytes = 0;
    for _ in 0..20 {
        let started = Instant::now();
        let (run, entries) = forgehand::transcript::load(&journal, id).unwrap().unwrap();
        assert!(!entries
            .iter()
            .any(|e| matches!(e, Entry::Note { text } if text.contains("cannot be read"))));
        let page = forgehand::transcript::render_page(&run, &entries);
        renders.push(started.elapsed());
        bytes = page.len();
    }
    stats::report(
        &format!("the page of a {STEPS}-step run ({} KB)", bytes / 1024),
        &mut renders,
    );
    let median = stats::percentile(&mut renders, 0.5).as_secs_f64() * 1e3;
    targets::check(
        &format!("the page of a {STEPS}-step run, median"),
        format!("{median:.1} ms"),
        "under 1,000 ms",
        median < 1000.0,
    );
    targets::finish();
}
