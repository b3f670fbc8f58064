//! The live transcript page's latency: from the moment the model's
//! streamed text reaches the run's transcript (what the agent's stream
//! hands on as the provider's events are parsed) to the moment a reader of
//! `/tasks/ID/events` (the page's script) has it, over the daemon's real
//! HTTP listener on loopback. The provider's side (bytes on the wire to
//! the first parsed text) is `cargo bench --bench models`' streaming row.
//!
//! Run: `cargo bench --bench live`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use forgehand::agent::StepRecorder;
use forgehand::config::Secrets;
use forgehand::daemon::http::{serve, Health, HttpState};
use forgehand::journal::Journal;
use forgehand::llm::stream::StreamEvent;
use forgehand::sandbox::docker::DockerBackend;
use forgehand::transcript::{LiveRuns, Transcript};
use forgehand_test_support::stats;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const SAMPLES: u32 = 200;

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let journal = Arc::new(Journal::open(dir.path()).unwrap());
    let live = Arc::new(LiveRuns::default());
    let secrets = Arc::new(Secrets::from_lookup(&|name| {
        (name == "GITHUB_TOKEN").then(|| "ghp_benchToken000000000000000000000".to_owned())
    }));
    let transcript = Transcript::begin(
        journal.clone(),
        secrets,
        "github:acme/app:issue:1",
        Some(live.clone()),
    )
    .unwrap();
    let state = Arc::new(HttpState {
        health: Arc::new(Health::new(Duration::from_secs(60))),
        journal,
        // Only /readyz asks the engine; the events never do.
        backend: Arc::new(DockerBackend::new(
            bollard::Docker::connect_with_unix_defaults().unwrap(),
            forgehand::config::Config::defaults().sandbox,
            "bench",
        )),
        token: None,
        instance: "bench".into(),
        board: Arc::default(),
        metrics: Arc::default(),
        live,
        webhooks: None,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, state, stop.clone()));

    let mut events = reqwest::get(format!("http://{address}/tasks/{}/events", transcript.id()))
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let mut samples = Vec::new();
    for n in 1..=SAMPLES {
        // Each answer is a new step: the first text of an answer is sent at once.
        let word = format!("Reading the failing test number {n} ");
        let sent = Instant::now();
        transcript.streamed(n, &StreamEvent::Text(word));
        let wanted = format!("number {n}\"");
        let mut seen = String::new();
        while !seen.contains(&wanted) {
            let chunk = events.chunk().await.unwrap().expect("the event stream ended");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        samples.push(sent.elapsed());
    }
    stats::report("streamed text to a live reader of /tasks/ID/events", &mut samples);
    stop.cancel();
}
