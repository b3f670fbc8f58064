//! Planning benchmarks.
//!
//! 1. Packing with the exact token count over a large real tree (the Rust
//!    sources under ~/.cargo/registry/src, after `cargo fetch`), against
//!    `files-to-prompt --cxml` (PyPI) on the same tree in the same run.
//! 2. The planning phase on a 120K-token pack (the default
//!    `planning.context_tokens`, selected from a large crate as a task's
//!    checkout is): the selection's time, then a three-model, three-round
//!    debate on instant in-process models: the time spent outside model
//!    calls, the tokens, and the share of the debate's input tokens that
//!    lies in the prefix every call shares (system text, packed code,
//!    request), which the providers' prompt caches serve.
//! 3. Classification cost per message of the context store: the tokens a
//!    classification request and its answer take on the default light model
//!    (the cheapest priced one), for a realistic thread of 20 messages.
//!
//! Run: `cargo bench --bench planning` (installs files-to-prompt with pip
//! when it is missing; set FORGEHAND_BENCH_TREE to pack another folder).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand_test_support::conversation;

use async_trait::async_trait;
use forgehand::config::Config;
use forgehand::context_store::classify;
use forgehand::llm::tokens::{count_request, count_text};
use forgehand::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Message, ModelInfo, TokenUsage};
use forgehand::planning::debate::{DebateSettings, NoCheckpoints, Planner};
use forgehand::planning::pack::{self, PackOptions};
use forgehand::planning::prompts::{fill, Context};
use forgehand::planning::select;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn registry_tree() -> PathBuf {
    if let Some(dir) = std::env::var_os("FORGEHAND_BENCH_TREE") {
        return PathBuf::from(dir);
    }
    let home = PathBuf::from(std::env::var_os("CARGO_HOME").unwrap_or_else(|| {
        let mut h = std::env::var_os("HOME").unwrap();
        h.push("/.cargo");
        h
    }));
    let src = home.join("registry/src");
    std::fs::read_dir(&src)
        .unwrap_or_else(|e| panic!("{}: {e}; run `cargo fetch` first", src.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("a registry index folder under registry/src")
}

fn files_to_prompt() -> PathBuf {
    let found = Command::new("sh")
        .args(["-c", "command -v files-to-prompt"])
        .output()
        .unwrap();
    if found.status.success() {
        return PathBuf::from(String::from_utf8_lossy(&found.stdout).trim());
    }
    println!("installing files-to-prompt from PyPI for the comparison");
    let status = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "files-to-prompt"])
        .status()
        .unwrap();
    assert!(
        status.success(),
        "pip install files-to-prompt failed; install it by hand"
    );
    let found = Command::new("sh")
        .args(["-c", "command -v files-to-prompt"])
        .output()
        .unwrap();
    assert!(found.status.success(), "files-to-prompt is still not on PATH");
    PathBuf::from(String::from_utf8_lossy(&found.stdout).trim())
}

fn bench_packing() {
    let tree = registry_tree();
    let options = PackOptions {
        max_file_bytes: 1 << 20,
    };
    // Warm the page cache so both tools read from memory.
    pack::pack(&tree, &[".".into()], options).unwrap();
    let mut ours = Vec::new();
    let mut only = Vec::new();
    let mut packed_bytes = 0;
    let mut tokens = 0;
    let mut files = 0;
    for _ in 0..3 {
        // Packing alone: walk, read, filter and write the XML, no count.
        let started = Instant::now();
        let corpus = pack::read(&tree, &[".".into()], options).unwrap();
        let mut xml = String::from("<documents>\n");
        for (i, file) in corpus.files.iter().enumerate() {
            xml.push_str(&pack::document(i + 1, file));
        }
        xml.push_str("</documents>");
        only.push(started.elapsed());
        std::hint::black_box(&xml);
        // The product's packing: the same, with the exact token count.
        let started = Instant::now();
        let packed = pack::pack(&tree, &[".".into()], options).unwrap();
        ours.push(started.elapsed());
        assert_eq!(packed.xml.len(), xml.len());
        packed_bytes = packed.xml.len();
        tokens = packed.tokens;
        files = packed.files.len();
    }
    let ours = *ours.iter().min().unwrap();
    let only = *only.iter().min().unwrap();
    let ftp = files_to_prompt();
    let started = Instant::now();
    let output = Command::new(&ftp)
        .arg("--cxml")
        .arg(&tree)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let theirs = started.elapsed();
    assert!(output.status.success(), "files-to-prompt failed");
    let their_bytes = output.stdout.len();
    let mb = |bytes: usize, d: Duration| bytes as f64 / 1e6 / d.as_secs_f64();
    println!("packing {} ({files} files)", tree.display());
    println!(
        "  forgehand packing alone: {:.2} s, {:.1} MB/s",
        only.as_secs_f64(),
        mb(packed_bytes, only)
    );
    println!(
        "  forgehand pack + exact o200k count: {:.2} s, {:.1} MB/s, {} MB, {tokens} tokens",
        ours.as_secs_f64(),
        mb(packed_bytes, ours),
        packed_bytes / 1_000_000
    );
    println!(
        "  files-to-prompt --cxml (packing only): {:.2} s, {:.1} MB/s, {} MB",
        theirs.as_secs_f64(),
        mb(their_bytes, theirs),
        their_bytes / 1_000_000
    );
    println!(
        "  ratio of packing speeds (MB/s): {:.1}x; forgehand pack + count vs files-to-prompt packing alone: {:.1}x faster",
        mb(packed_bytes, only) / mb(their_bytes, theirs),
        theirs.as_secs_f64() / ours.as_secs_f64()
    );
}

/// Answers at once, as the phase asks; optionally counts what it is sent.
struct Instant3 {
    count: bool,
    /// (tokens in the shared prefix, all input tokens), summed over calls.
    tokens: Mutex<(u64, u64)>,
    calls: Mutex<u32>,
}

#[async_trait]
impl ChatModel for Instant3 {
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.chat_on("o3", request).await
    }

    fn models(&self) -> Vec<ModelInfo> {
        ["o3", "gemini-2.5-pro", "claude-sonnet-4"]
            .iter()
            .map(|m| ModelInfo {
                name: (*m).into(),
                max_input_tokens: 1_000_000,
            })
            .collect()
    }

    async fn chat_on(&self, model: &str, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        *self.calls.lock().unwrap() += 1;
        let Message::User(user) = &request.messages[0] else {
            unreachable!()
        };
        if self.count {
            let prefix_text = format!(
                "{}{}",
                request.system,
                fill(
                    &forgehand::prompts::Prompts::embedded().sage.request,
                    &[("request", REQUEST.trim())]
                )
            );
            let prefix = count_text(&prefix_text);
            let total = count_request(request);
            let mut t = self.tokens.lock().unwrap();
            t.0 += prefix.min(total);
            t.1 += total;
        }
        let text = if user.contains("reached consensus") {
            r#"{"consensusScore": 0.5, "consensusReached": false, "reasoning": "different"}"#.to_owned()
        } else if user.contains("Critique the following") {
            "## Critique of Plan A\nNeeds tests and a migration step for the config.\n".repeat(8)
        } else if user.contains("You are the judge") {
            format!(
                "# Final Implementation Plan\n{}\nConfidence Score: 0.8",
                PLAN_BODY
            )
        } else {
            format!("# Implementation Plan (Model A)\n{PLAN_BODY}")
        };
        Ok(ChatResponse {
            text,
            tool_calls: Vec::new(),
            usage: TokenUsage {
                input_tokens: 1000,
                cached_input_tokens: 900,
                output_tokens: 500,
                ..Default::default()
            },
            model: model.into(),
            ..Default::default()
        })
    }
}

const REQUEST: &str = "Add a --verbose flag to the CLI and log every retry the router makes, with tests.";
const PLAN_BODY: &str = "1. Parse the flag in src/main.rs.\n2. Thread it to the router.\n3. Log retries.\n4. Test it.\n## Checklist\n- [ ] Parse the flag\n- [ ] Log retries\n- [ ] Test\n";

fn bench_debate(rt: &tokio::runtime::Runtime) {
    // A checkout larger than the budget (tokio's sources), selected down to
    // 120K tokens as a task's would be.
    let tree = registry_tree();
    let crate_dir = std::fs::read_dir(&tree)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("tokio-1."))
        })
        .max()
        .unwrap_or(tree.clone());
    let budget = Config::defaults().planning.context_tokens;
    let started = Instant::now();
    let selection = select::for_task(&crate_dir, REQUEST, budget, PackOptions::default()).unwrap();
    let selecting = started.elapsed();
    let packed = selection.packed;
    println!(
        "selection: {} of {} tokens ({} files) from {} in {:.0} ms",
        packed.tokens,
        selection.whole_tokens,
        packed.files.len(),
        crate_dir.display(),
        selecting.as_secs_f64() * 1e3
    );
    let context = Context::new(
        forgehand::prompts::Prompts::embedded(),
        &packed.xml,
        packed.tokens,
    );
    let mut settings = DebateSettings::from_config(&Config::defaults().planning, 8192);
    settings.debaters = vec!["o3".into(), "gemini-2.5-pro".into(), "claude-sonnet-4".into()];
    settings.rounds = 3;
    let prices = forgehand::llm::router::price_table(&Config::defaults().llm);
    let run = |model: &Instant3| {
        rt.block_on(async {
            let planner = Planner {
                model,
                settings: &settings,
                prices: &prices,
                checkpoints: &NoCheckpoints,
                observer: None,
            };
            planner.plan(&context, REQUEST).await.unwrap()
        })
    };
    let mut times = Vec::new();
    let mut calls = 0;
    for _ in 0..20 {
        let model = Instant3 {
            count: false,
            tokens: Mutex::new((0, 0)),
            calls: Mutex::new(0),
        };
        let started = Instant::now();
        let outcome = run(&model);
        times.push(started.elapsed());
        assert_eq!(outcome.rounds.len(), 3);
        calls = *model.calls.lock().unwrap();
    }
    times.sort();
    let counting = Instant3 {
        count: true,
        tokens: Mutex::new((0, 0)),
        calls: Mutex::new(0),
    };
    run(&counting);
    let (prefix, total) = *counting.tokens.lock().unwrap();
    println!(
        "debate: 3 models, 3 rounds, {calls} calls, context {} tokens, {total} input tokens in all",
        packed.tokens
    );
    println!(
        "  time outside model calls (instant models): median {:.2} ms, max {:.2} ms over {} runs",
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
        times.len()
    );
    println!(
        "  input tokens in the shared cacheable prefix: {prefix} of {total} ({:.1} %)",
        prefix as f64 * 100.0 / total as f64
    );
}

fn bench_classification() {
    let config = Config::defaults();
    let prompts = forgehand::prompts::Prompts::embedded();
    // The default light model: the cheapest priced one among the usable.
    let mut prices = forgehand::llm::router::price_table(&config.llm);
    prices
        .entry("gpt-4.1-mini".into())
        .or_insert(forgehand::config::Price {
            input_per_million: 0.4,
            output_per_million: 1.6,
            cached_input_per_million: 0.1,
            cache_write_per_million: 1.0,
        });
    let usable: Vec<ModelInfo> = ["o3", "gemini-2.5-pro", "gpt-4.1-mini"]
        .iter()
        .map(|m| ModelInfo {
            name: (*m).into(),
            max_input_tokens: 200_000,
        })
        .collect();
    let light = forgehand::llm::usage::cheapest(&usable, &prices).unwrap();
    let answer =
        r#"{"intent": ["CONSTRAINT_ADDITION"], "reason": "It adds a clear constraint on the separator."}"#;
    let output = count_text(answer);
    let inputs: Vec<u64> = conversation::conversation()
        .iter()
        .map(|m| count_request(&classify::request(&prompts.context, m)))
        .collect();
    let mean = inputs.iter().sum::<u64>() as f64 / inputs.len() as f64;
    let price = &prices[&light];
    let dollars = (mean * price.input_per_million + output as f64 * price.output_per_million) / 1e6;
    println!(
        "classification on {light} (the cheapest usable model): {mean:.0} input tokens per message on average (min {}, max {}), about {output} output tokens; ${dollars:.6} per message, ${:.4} for a thread of 20",
        inputs.iter().min().unwrap(),
        inputs.iter().max().unwrap(),
        dollars * 20.0
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    bench_debate(&rt);
    bench_classification();
    bench_packing();
}
