//! A repository's own environment, end to end: the real daemon, a fake
//! GitHub, a real git remote, real Docker, the turn-scripted model.
//!
//! - `.forgehand.yaml` on the default branch: setup runs in the sandbox
//!   before any model call, its `env` reaches setup and the agent, the
//!   repository's AGENTS.md files are in the system prompt, and the tests
//!   run after the model says it is done: a failure goes back to it, its
//!   fix passes, and the PR body says so.
//! - A malformed settings file and a failing setup: a comment that says
//!   what to fix, and no model call at all.
//! - A test that prints 50 MB and then hangs: stopped at `test_timeout`,
//!   the end of its output on the issue, and with
//!   `delivery.require_passing_tests` no PR (the branch keeps the change).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig;
use forgehand_test_support::git_http;
use forgehand_test_support::github_world;
use forgehand_test_support::registries;
use forgehand_test_support::scripted_model;

use daemon_rig::DaemonProcess;
use github_world::{Ended, World, DONE, MODEL_KEY, REPO, TOKEN};
use scripted_model::{call, replace, run, text, GREET, TEST};
use serde_json::json;
use std::time::Duration;

const FAILED: &str = "coding agent failed";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_instructions_and_tests_shape_the_work_and_a_failing_test_goes_back_to_the_model() {
    let settings = "image: python\nsetup:\n  - mkdir -p \"$HOME/.cache/app\" && echo \"prepared for $APP_MODE\" > \"$HOME/.cache/app/marker\"\n  - echo setup-output-line\ntest: python3 -m unittest -q\nenv:\n  APP_MODE: testing\n";
    let turns = vec![
        (
            run("cat \"$HOME/.cache/app/marker\"; echo \"mode=$APP_MODE\""),
            None,
        ),
        // A first attempt with the wrong case; the tests catch it.
        (replace("'Hello'", "'Hello, World!'"), None),
        (run("git commit -qam 'Greet the world'"), None),
        (text("Changed the greeting."), None),
        (replace("World!", "world"), None),
        (run("git commit -qam 'Lower-case world, as the test wants'"), None),
        (text("Fixed the case of the greeting; the tests pass now."), None),
    ];
    let world = World::with_repository(
        turns,
        &[
            ("greet.py", GREET),
            ("test_greet.py", TEST),
            (".forgehand.yaml", settings),
            (
                "AGENTS.md",
                "Run the unit tests before you commit. Root marker: agents-root-7731.\n",
            ),
            (
                "web/AGENTS.md",
                "Use two-space indents here. Web marker: agents-web-5512.\n",
            ),
        ],
        "",
    )
    .await;
    let Ended { issue, daemon } = world.run_to_end("Greet the world").await;
    let log = daemon.log_text();
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{log}"
    );

    let requests = world.model.requests().await;
    let system = requests[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("## Repository Instructions"), "{system}");
    assert!(system.contains("agents-root-7731") && system.contains("agents-web-5512"));
    assert!(system.contains("(applies to files under `web/`)"));
    let second = requests[1].to_string();
    assert!(
        second.contains("prepared for testing") && second.contains("mode=testing"),
        "{second}"
    );
    // The failing run went back to the model with its output.
    let failure = requests
        .iter()
        .map(ToString::to_string)
        .find(|r| r.contains("The repository's tests fail on your change"))
        .expect("the test failure reached the model");
    assert!(
        failure.contains("Hello, World") && failure.contains("python3 -m unittest -q"),
        "{failure}"
    );

    let pulls = world.github.pulls(REPO);
    assert_eq!(pulls.len(), 1);
    let body = &pulls[0].body;
    assert!(
        body.contains("### Tests") && body.contains("`python3 -m unittest -q` passed"),
        "{body}"
    );
    assert!(body.contains("after 1 fix round(s)"), "{body}");
    let comment = world.progress_comment(issue);
    assert!(comment.contains("Settings: `.forgehand.yaml`"), "{comment}");
    assert!(comment.contains("Setup: done"), "{comment}");
    assert!(
        comment.contains("Repository instructions: `AGENTS.md`, `web/AGENTS.md`"),
        "{comment}"
    );
    assert!(
        comment.contains("Tests: `python3 -m unittest -q` passed"),
        "{comment}"
    );
    for secret in [TOKEN, MODEL_KEY] {
        assert!(!comment.contains(secret) && !body.contains(secret));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_settings_file_and_a_failing_setup_cost_no_model_call() {
    let world = World::with_repository(
        vec![(text("unused"), None)],
        &[
            ("greet.py", GREET),
            (
                ".forgehand.yaml",
                "setup_timeout: 10\ntest: python3 -m unittest\n",
            ),
        ],
        "",
    )
    .await;
    let Ended { issue, mut daemon } = world.run_to_end("Greet the world").await;
    world.assert_labels(issue, &[FAILED], &daemon);
    let comment = world.progress_comment(issue);
    assert!(
        comment.contains("`.forgehand.yaml`, key `setup_timeout`"),
        "{comment}"
    );
    assert!(
        comment.contains("has no unit") && comment.contains("\"10s\""),
        "{comment}"
    );
    assert!(comment.contains("no model was called"), "{comment}");
    assert!(world.model.all_requests().await.is_empty());
    daemon.terminate();

    // The maintainer fixes the file, but the setup itself fails.
    git_http::push_commit(
        &world.bare,
        "main",
        ".forgehand.yaml",
        "setup: \"echo resolving; echo 'E: package nosuchpkg not found' >&2; exit 3\"\n",
        "Setup that fails",
    );
    let Ended { issue, daemon } = world.run_to_end("Greet the world again").await;
    world.assert_labels(issue, &[FAILED], &daemon);
    let comment = world.progress_comment(issue);
    assert!(comment.contains("the repository's setup failed"), "{comment}");
    assert!(comment.contains("exited with code 3"), "{comment}");
    assert!(comment.contains("E: package nosuchpkg not found"), "{comment}");
    assert!(comment.contains("repositories.on_setup_failure"), "{comment}");
    assert!(world.model.all_requests().await.is_empty());
    assert!(world.github.pulls(REPO).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_that_floods_and_hangs_is_stopped_and_a_required_pass_keeps_the_change_from_review() {
    let settings = "image: python\ntest: |-\n  python3 -c \"import sys; sys.stdout.write('x' * 50_000_000 + chr(10) + 'end-' + 'of-output' + chr(10))\"; sleep 600\ntest_timeout: 3s\n";
    let turns = vec![
        (replace("'Hello'", "'Hello, world'"), None),
        (run("git commit -qam 'Greet the world'"), None),
        (text("Changed the greeting."), None),
    ];
    let world = World::with_repository(
        turns,
        &[("greet.py", GREET), (".forgehand.yaml", settings)],
        "agent:\n  test_fix_rounds: 1\ndelivery:\n  require_passing_tests: true\n",
    )
    .await;
    let Ended { issue, daemon } = world.run_to_end("Greet the world").await;
    let log = daemon.log_text();
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![FAILED.to_owned()],
        "{log}"
    );
    let comment = world.progress_comment(issue);
    assert!(
        comment.contains("did not finish within 3s (test_timeout)"),
        "{comment}"
    );
    assert!(comment.contains("delivery.require_passing_tests"), "{comment}");
    assert!(comment.contains("end-of-output"), "{comment}");
    assert!(
        comment.len() < 60_000 || {
            eprintln!("{}", &comment[..2000]);
            eprintln!("...{}", &comment[comment.len() - 3000..]);
            false
        },
        "the comment carries only the output's end"
    );
    assert!(world.github.pulls(REPO).is_empty());
    // The change is kept on its branch.
    let repo = git2::Repository::open_bare(&world.bare).unwrap();
    let branch = repo
        .branches(Some(git2::BranchType::Local))
        .unwrap()
        .flatten()
        .filter_map(|(b, _)| b.name().ok().flatten().map(str::to_owned))
        .find(|n| n.starts_with("forgehand/"))
        .expect("the task branch was pushed");
    let tip = repo.find_branch(&branch, git2::BranchType::Local).unwrap();
    let tree = tip.get().peel_to_tree().unwrap();
    let blob = tree
        .get_path(std::path::Path::new("greet.py"))
        .unwrap()
        .to_object(&repo)
        .unwrap();
    assert!(String::from_utf8_lossy(blob.as_blob().unwrap().content()).contains("Hello, world"));
    // The model saw the end of the output, not 50 MB of it.
    let failure = world
        .model
        .requests()
        .await
        .iter()
        .map(ToString::to_string)
        .find(|r| r.contains("The repository's tests fail on your change"))
        .expect("the failure reached the model");
    assert!(failure.contains("did not finish within 3s") && failure.len() < 200_000);
}

/// A stand-in for a host on the internet: answers every request on
/// 127.0.0.1 with `body`; returns its port.
async fn web_server(body: &'static str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let _ = socket.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_reaches_only_its_allowlist_through_the_tunnel_and_the_agent_phase_is_offline() {
    let (world, daemon) = allowlist_through_the_tunnel("auto").await;
    // The tunnel came in through the sandbox's own socket, gone with it.
    let sockets = world.dir.path().join("state/egress");
    assert!(sockets.is_dir());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::read_dir(&sockets).unwrap().count() > 0 {
        assert!(std::time::Instant::now() < deadline, "{}", daemon.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tunnel_over_the_exec_stream_keeps_the_same_allowlist() {
    let (world, _daemon) = allowlist_through_the_tunnel("exec").await;
    assert!(!world.dir.path().join("state/egress").exists());
}

/// Setup may fetch from the allowlisted host only; the agent from none.
async fn allowlist_through_the_tunnel(transport: &str) -> (World, DaemonProcess) {
    let registry = web_server("package-body-4471").await;
    let elsewhere = web_server("exfiltrated").await;
    let fetch = |url: String| {
        format!("python3 -c \"import urllib.request as u, os; print(u.urlopen('{url}').read().decode())\"")
    };
    // The last setup command leaves a process in a session of its own,
    // which would keep fetching beside the model.
    let escape = format!(
        "setsid sh -c 'while :; do echo beat >> /tmp/escaped; python3 -c \"import urllib.request as u; u.urlopen(\\\"http://127.0.0.1:{registry}/simple/pkg/\\\")\" >> /tmp/escaped 2>&1; sleep 0.2; done' > /dev/null 2>&1 &"
    );
    let settings = format!(
        "image: python\nsetup:\n  - {} > \"$HOME/pkg.txt\"\n  - {} || echo refused-as-expected\n  - {}\nnetwork:\n  setup: ['127.0.0.1:{registry}']\n",
        fetch(format!("http://127.0.0.1:{registry}/simple/pkg/")),
        fetch(format!("http://localhost:{elsewhere}/upload")),
        serde_json::to_string(&escape).unwrap(),
    );
    let agent_fetch = format!(
        "cat \"$HOME/pkg.txt\"; {} 2>&1 | tail -3; a=$(wc -l < /tmp/escaped); sleep 1; echo beats-grew=$(( $(wc -l < /tmp/escaped) - a ))",
        fetch(format!("http://127.0.0.1:{registry}/simple/pkg/"))
    );
    let world = World::with_repository(
        vec![(run(&agent_fetch), None), (text("Nothing to change."), None)],
        &[("greet.py", GREET), (".forgehand.yaml", &settings)],
        &format!("sandbox:\n  egress:\n    allow_loopback: true\n    transport: {transport}\n"),
    )
    .await;
    let Ended { issue, daemon } = world.run_to_end("Check the registry").await;
    let log = daemon.log_text();
    let comment = world.progress_comment(issue);
    assert!(comment.contains("Setup: done"), "{comment}\n{log}");
    assert!(
        comment.contains("Network: setup reached 1 host(s); denied 1: localhost"),
        "{comment}"
    );
    assert!(
        comment.contains("Network: agent reached 0 host(s); denied 1: 127.0.0.1"),
        "{comment}"
    );
    let requests = world.model.requests().await;
    let result = requests[1].to_string();
    assert!(
        result.contains("package-body-4471"),
        "setup's download is there: {result}"
    );
    assert!(result.contains("HTTP Error 403"), "{result}");
    assert!(
        result.contains("beats-grew=0"),
        "setup's escaped process ended: {result}"
    );
    assert!(comment.contains("Setup: ended "), "{comment}");
    assert!(log.contains("egress is off for the agent"), "{log}");
    assert!(!result.contains("exfiltrated"));
    assert!(
        log.contains("egress denied") && log.contains("egress allowed"),
        "{log}"
    );
    assert!(!log.contains(TOKEN) && !log.contains(MODEL_KEY));
    // Each decision is in the run's transcript too.
    let transcript = world.transcript(issue);
    for line in [
        format!("network, setup: 127.0.0.1:{registry} allowed"),
        format!("network, setup: localhost:{elsewhere} denied"),
        format!("network, agent: 127.0.0.1:{registry} denied"),
    ] {
        assert!(transcript.contains(&line), "{line} in:\n{transcript}");
    }
    (world, daemon)
}

/// Every file under `dir`, read whole.
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push((path.clone(), std::fs::read(&path).unwrap()));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_task_starts_from_the_setup_snapshot_and_a_changed_lockfile_makes_a_new_one() {
    // "Installing" copies the lockfile into an ignored dependency folder and
    // counts its runs in the home folder: both only setup writes.
    let settings = "image: python\nsetup:\n  - mkdir -p .venv \"$HOME/.cache\" && cp requirements.txt .venv/installed.txt\n  - echo ran >> \"$HOME/.cache/setup-runs\"\n";
    let look = "cat .venv/installed.txt; echo runs=$(wc -l < \"$HOME/.cache/setup-runs\"); cat greet.py; ls";
    let mut turns: Vec<_> = [1, 2, 3]
        .into_iter()
        .flat_map(|_| [(run(look), None), (text("Nothing to change."), None)])
        .collect();
    // The fourth task's first call waits for a restore that fails; after
    // setup the run starts over.
    turns.extend([
        (run(look), None),
        (run(look), None),
        (text("Nothing to change."), None),
    ]);
    let world = World::with_repository(
        turns,
        &[
            ("greet.py", GREET),
            (".gitignore", ".venv/\n"),
            ("requirements.txt", "dep==1.0\n"),
            ("obsolete.py", "# removed later\n"),
            (".forgehand.yaml", settings),
        ],
        "",
    )
    .await;
    let daemon = world.start();
    let first = world.labelled_issue("First");
    world.wait_for_end(first).await;
    let comment = world.progress_comment(first);
    assert!(
        comment.contains("Setup: done"),
        "{comment}\n{}",
        daemon.log_text()
    );
    assert!(comment.contains("kept"), "{comment}");
    // The source changes, the dependency files do not: the snapshot serves.
    git_http::push_commit(
        &world.bare,
        "main",
        "greet.py",
        "def greeting():\n    return 'Hi'\n",
        "source",
    );
    let second = world.labelled_issue("Second");
    world.wait_for_end(second).await;
    let comment = world.progress_comment(second);
    assert!(
        comment.contains("Setup: not run; snapshot"),
        "{comment}\n{}",
        daemon.log_text()
    );
    // A changed lockfile is a new key: setup runs again and is kept anew.
    git_http::push_commit(&world.bare, "main", "requirements.txt", "dep==2.0\n", "bump");
    let third = world.labelled_issue("Third");
    world.wait_for_end(third).await;
    let comment = world.progress_comment(third);
    assert!(
        comment.contains("Setup: done") && comment.contains("kept"),
        "{comment}"
    );

    let requests = world.model.requests().await;
    let seen: Vec<String> = [1, 3, 5].iter().map(|i| requests[*i].to_string()).collect();
    assert!(
        seen[0].contains("dep==1.0") && seen[0].contains("runs=1"),
        "{}",
        seen[0]
    );
    // Restored: the dependency folder and the home folder as setup left
    // them (it ran once), with the fresh clone's source.
    assert!(
        seen[1].contains("dep==1.0") && seen[1].contains("runs=1"),
        "{}",
        seen[1]
    );
    assert!(seen[1].contains("return 'Hi'"), "{}", seen[1]);
    assert!(
        seen[2].contains("dep==2.0") && seen[2].contains("runs=1"),
        "{}",
        seen[2]
    );

    let snapshots = world.dir.path().join("state/snapshots");
    let kept: Vec<_> = std::fs::read_dir(&snapshots).unwrap().flatten().collect();
    assert_eq!(kept.len(), 2, "{kept:?}");

    // A damaged snapshot: the home folder comes back, the project part does
    // not; setup runs over it, the task goes on, and a sound one replaces it.
    let newest = kept
        .iter()
        .max_by_key(|e| e.metadata().unwrap().modified().unwrap())
        .unwrap()
        .path();
    std::fs::write(newest.join("project.tar"), vec![7u8; 4096]).unwrap();
    let fourth = world.labelled_issue("Fourth");
    world.wait_for_end(fourth).await;
    let comment = world.progress_comment(fourth);
    assert!(
        comment.contains("could not be restored") && comment.contains("Setup: done"),
        "{comment}\n{}",
        daemon.log_text()
    );
    let requests = world.model.requests().await;
    assert_eq!(requests.len(), 9, "{requests:?}");
    // The first request's tool call never ran; the second run's did, on
    // the set-up sandbox (setup's second run in a restored home folder).
    let after = requests[8].to_string();
    assert!(after.contains("dep==2.0") && after.contains("runs=2"), "{after}");
    let project = std::fs::read(newest.join("project.tar")).unwrap();
    assert!(
        String::from_utf8_lossy(&project).contains("installed.txt"),
        "the damaged snapshot is replaced"
    );
    for (path, bytes) in files_under(&snapshots) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(TOKEN) && !text.contains(MODEL_KEY),
            "{}",
            path.display()
        );
        // Neither the clone's files nor its history are kept.
        assert!(
            !text.contains("removed later") && !text.contains("[core]"),
            "{}",
            path.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_installs_from_a_real_index_through_the_tunnel_and_the_model_fixes_the_failing_test() {
    let index = registries::pypi_with("fhpunct", "1.0", "def punctuate(text):\n    return text + '!'\n");
    let elsewhere = web_server("exfiltrated").await;
    let settings = format!(
        "image: python\nsetup:\n  - python3 -m venv .venv\n  - .venv/bin/pip install --no-cache-dir --index-url {url}/simple/ -r requirements.txt\n  - python3 -c \"import urllib.request as u; u.urlopen('http://localhost:{elsewhere}/')\" || echo refused-as-expected\nnetwork:\n  setup: ['127.0.0.1:{port}']\ntest: .venv/bin/python -m unittest -q\n",
        url = index.url(),
        port = index.port
    );
    let greet = "from fhpunct import punctuate\n\n\ndef greeting():\n    return punctuate('Hello')\n";
    let test = "import unittest\nfrom greet import greeting\n\n\nclass Greeting(unittest.TestCase):\n    def test_world(self):\n        self.assertEqual(greeting(), 'Hello, world!')\n";
    let tests = ".venv/bin/python -m unittest -q 2>&1 | tail -12";
    let download = format!(
        ".venv/bin/pip download --no-cache-dir --retries 0 --timeout 5 --index-url {}/simple/ fhpunct -d /tmp/d 2>&1 | tail -2",
        index.url()
    );
    let turns = vec![
        (run(tests), None),
        (replace("'Hello'", "'Hello, world'"), None),
        (run(&format!("{tests}; git commit -qam 'Greet the world'")), None),
        (run(&download), None),
        (text("Greeted the world; the tests pass."), None),
    ];
    let world = World::with_repository(
        turns,
        &[
            ("greet.py", greet),
            ("test_greet.py", test),
            ("requirements.txt", "fhpunct==1.0\n"),
            (".gitignore", ".venv/\n__pycache__/\n"),
            (".forgehand.yaml", &settings),
        ],
        "sandbox:\n  egress:\n    allow_loopback: true\n",
    )
    .await;
    let Ended { issue, daemon } = world.run_to_end("Greet the world").await;
    let log = daemon.log_text();
    let comment = world.progress_comment(issue);
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{comment}\n{log}"
    );
    // Setup installed the package from the index, and nothing else got out.
    assert!(comment.contains("Setup: done"), "{comment}");
    assert!(
        comment.contains("Network: setup reached 1 host(s); denied 1: localhost"),
        "{comment}"
    );
    assert!(
        log.contains("egress denied") && log.contains("localhost"),
        "{log}"
    );
    let requests = world.model.requests().await;
    let first_run = requests[1].to_string();
    assert!(
        first_run.contains("Hello!") && first_run.contains("FAILED"),
        "{first_run}"
    );
    let second_run = requests[3].to_string();
    assert!(second_run.contains("OK"), "{second_run}");
    // In the agent phase the index is out of reach.
    let agent_download = requests[4].to_string();
    assert!(!agent_download.contains("Saved"), "{agent_download}");
    assert!(
        comment.contains("Network: agent reached 0 host(s); denied 1: 127.0.0.1"),
        "{comment}"
    );
    let body = &world.github.pulls(REPO)[0].body;
    assert!(
        body.contains("`.venv/bin/python -m unittest -q` passed"),
        "{body}"
    );
    for secret in [TOKEN, MODEL_KEY] {
        assert!(!comment.contains(secret) && !body.contains(secret) && !log.contains(secret));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_installs_from_a_real_registry_through_the_tunnel_and_the_fixed_tests_pass() {
    let registry = registries::npm_with("fhpunct", "1.0.0", "exports.punctuate = (text) => text + '!';\n");
    let settings = format!(
        "image: node\nsetup: npm install --no-audit --no-fund --registry {}/\nnetwork:\n  setup: ['127.0.0.1:{}']\ntest: npm test\n",
        registry.url(),
        registry.port
    );
    let greet = "const { punctuate } = require('fhpunct');\n\nexports.greeting = () => punctuate('Hello');\n";
    let test = "const assert = require('assert');\nconst { greeting } = require('./greet');\n\nassert.strictEqual(greeting(), 'Hello, world!');\nconsole.log('greeting ok');\n";
    let package = "{\"name\": \"app\", \"version\": \"1.0.0\", \"private\": true, \"scripts\": {\"test\": \"node test.js\"}, \"dependencies\": {\"fhpunct\": \"1.0.0\"}}\n";
    let tests = "npm test 2>&1 | tail -15";
    let turns = vec![
        (run(tests), None),
        (
            call(
                "text_editor_str_replace",
                json!({"path": "/workspace/project/greet.js", "old_str": "'Hello'", "new_str": "'Hello, world'"}),
            ),
            None,
        ),
        (run(&format!("{tests}; git commit -qam 'Greet the world'")), None),
        (text("Greeted the world; npm test passes."), None),
    ];
    let world = World::with_repository(
        turns,
        &[
            ("greet.js", greet),
            ("test.js", test),
            ("package.json", package),
            (".gitignore", "node_modules/\npackage-lock.json\n"),
            (".forgehand.yaml", &settings),
        ],
        "sandbox:\n  egress:\n    allow_loopback: true\n",
    )
    .await;
    let Ended { issue, daemon } = world.run_to_end("Greet the world").await;
    let log = daemon.log_text();
    let comment = world.progress_comment(issue);
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{comment}\n{log}"
    );
    assert!(comment.contains("Setup: done"), "{comment}");
    assert!(comment.contains("Network: setup reached 1 host(s)"), "{comment}");
    let requests = world.model.requests().await;
    let first_run = requests[1].to_string();
    assert!(
        first_run.contains("actual: 'Hello!'") && first_run.contains("ERR_ASSERTION"),
        "{first_run}"
    );
    assert!(requests[3].to_string().contains("greeting ok"));
    let body = &world.github.pulls(REPO)[0].body;
    assert!(body.contains("`npm test` passed"), "{body}");
    for secret in [TOKEN, MODEL_KEY] {
        assert!(!comment.contains(secret) && !body.contains(secret) && !log.contains(secret));
    }
}
