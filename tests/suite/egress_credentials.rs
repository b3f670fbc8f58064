//! Credentials added on the host, end to end: the real daemon, a fake
//! GitHub, real Docker, and a private Python index (pypiserver asking for
//! a password) behind TLS with a CA of its own.
//!
//! - Setup's stock `pip install` with a default config pointing at the
//!   private URL succeeds: the relay ends the sandbox's TLS with the
//!   sandbox's own CA, adds the credential and verifies the real index
//!   with `sandbox.egress.extra_ca_file`.
//! - The credential is nowhere in the sandbox (its files, every
//!   process's environment and arguments), the transcript (which names
//!   the credential that was added), the log, the comment or the PR.
//! - The same for npm against verdaccio with a bearer token: the stock
//!   `npm install` with `--registry` at the private URL.
//! - A host whose certificate does not verify gets nothing, and the
//!   sandbox is told why; a repository not allowed a credential gets the
//!   plain tunnel (and the index's 401).
//! - A follow-up's setup runs in the task branch, which holds what the
//!   model pushed: a `preinstall` hook the model committed in the first
//!   run gets no credential in the review's follow-up.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::daemon_rig::DaemonProcess;
use forgehand_test_support::github_world;
use forgehand_test_support::private_registry::{private_npm_with, private_pypi_with, TestCa, TlsFront};
use forgehand_test_support::scripted_model;

use github_world::{World, DONE, MODEL_KEY, REPO, TOKEN};
use scripted_model::{call, replace, run, text};

const USER: &str = "corp-reader";
const PASSWORD: &str = "pypi-pass-58213-never-in-a-sandbox";
const VAR: &str = "CORP_PYPI_TOKEN";

/// Looks for the credential in the sandbox without naming it in any
/// process's arguments: it is put together from reversed pieces here.
const SCAN: &str = r#"import base64, os
user = "redaer-proc"[::-1]
password = "xobdnas-a-ni-reven-31285-ssap-ipyp"[::-1]
needles = [password.encode(), base64.b64encode(f"{user}:{password}".encode())]
found = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("environ", "cmdline"):
            try:
                data = open(f"/proc/{pid}/{part}", "rb").read()
            except OSError:
                continue
            if any(n in data for n in needles):
                found.append(f"/proc/{pid}/{part}")
for top, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(top, d) not in ("/proc", "/sys", "/dev")]
    for name in files:
        path = os.path.join(top, name)
        try:
            if os.path.islink(path) or os.path.getsize(path) > 50_000_000:
                continue
            data = open(path, "rb").read()
        except OSError:
            continue
        if any(n in data for n in needles):
            found.append(path)
print("leak-scan:", found or "clean")
print("trust:", os.environ.get("SSL_CERT_FILE"), os.environ.get("PIP_CERT"))
"#;

/// Setup's probes of the two hosts that must not get the credential, and
/// of requests to the index the operator did not name, sent as written
/// through the sandbox's proxy: each must be refused by the relay (400,
/// 405), or reach the index without the credential (its own 401).
const PROBE: &str = r#"import http.client, os, ssl, sys, urllib.parse, urllib.request, urllib.error
for label, port, context in (("unverified-host", sys.argv[1], None), ("not-allowed", sys.argv[2], ssl._create_unverified_context())):
    try:
        r = urllib.request.urlopen(f"https://localhost:{port}/simple/", context=context, timeout=20)
        print(label, r.status)
    except urllib.error.HTTPError as e:
        print(label, e.code, e.read().decode(errors="replace").strip()[:300])
    except Exception as e:
        print(label, "failed:", e)
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
good = int(sys.argv[3])
context = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
for label, method, target, host in (
    ("absolute-form", "GET", "https://other.example/simple/fhsecret/", None),
    ("absolute-form-own-host", "GET", "https://other.example/simple/fhsecret/", f"localhost:{good}"),
    ("other-port", "GET", "/simple/fhsecret/", "localhost:1"),
    ("encoded-dots", "GET", "/simple/%2e%2e/packages/", f"localhost:{good}"),
    ("trace", "TRACE", "/simple/fhsecret/", f"localhost:{good}"),
    ("put", "PUT", "/simple/fhsecret/", f"localhost:{good}"),
):
    connection = http.client.HTTPSConnection(proxy.hostname, proxy.port, context=context, timeout=20)
    connection.set_tunnel("localhost", good)
    try:
        connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        if host:
            connection.putheader("Host", host)
        if method == "PUT":
            connection.putheader("Content-Length", "0")
        connection.endheaders()
        print("attack", label, connection.getresponse().status)
    except Exception as e:
        print("attack", label, "failed:", e)
    finally:
        connection.close()
"#;

/// `forgehand tasks show` of the newest run of `issue`; the CLI reads the
/// same config, so it needs the credential's variable too.
fn transcript_of(world: &World, issue: u64, value: &str) -> String {
    transcript_of_with(world, issue, VAR, value)
}

fn transcript_of_with(world: &World, issue: u64, var: &str, value: &str) -> String {
    transcript_of_kind(world, ("issue", issue), var, value)
}

/// The same for an item of `kind` (`issue`, or `change` for a pull request).
fn transcript_of_kind(world: &World, (kind, number): (&str, u64), var: &str, value: &str) -> String {
    let forgehand = |args: &[&str]| {
        let out = std::process::Command::new(forgehand_test_support::daemon_rig::bin())
            .arg("--config")
            .arg(&world.config)
            .args(args)
            .env(var, value)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let key = format!("github:{REPO}:{kind}:{number}");
    let listing = forgehand(&["tasks"]);
    let id = listing
        .lines()
        .filter(|l| l.contains(&key))
        .find_map(|l| l.split_whitespace().next().filter(|w| w.parse::<u64>().is_ok()))
        .unwrap_or_else(|| panic!("no run of {key}:\n{listing}"))
        .to_owned();
    forgehand(&["tasks", "show", &id])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_installs_from_a_private_index_with_a_credential_the_sandbox_never_sees() {
    let index = private_pypi_with(
        "fhsecret",
        "1.0",
        "def punctuate(text):\n    return text + '!'\n",
        USER,
        PASSWORD,
    );
    let index_ca = TestCa::new("corp index CA");
    let front = TlsFront::start(&index_ca, index.port).await;
    let stranger_ca = TestCa::new("a CA nobody trusts");
    let unverified = TlsFront::start(&stranger_ca, index.port).await;
    let not_allowed = TlsFront::start(&index_ca, index.port).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("corp-ca.pem");
    std::fs::write(&ca_file, &index_ca.pem).unwrap();

    let (good, bad, other) = (front.port, unverified.port, not_allowed.port);
    let settings = format!(
        "image: python\nsetup:\n  - python3 -m venv .venv\n  - .venv/bin/pip install --no-cache-dir --index-url https://localhost:{good}/simple/ -r requirements.txt\n  - python3 probe.py {bad} {other} {good} > \"$HOME/probe.txt\" 2>&1\nnetwork:\n  setup: ['localhost:{good}', 'localhost:{bad}', 'localhost:{other}']\ntest: .venv/bin/python -m unittest -q\n"
    );
    let credential = |port: u16, repositories: &str| {
        format!("      - host: \"localhost:{port}\"\n        value_from: {VAR}\n        scheme: basic\n        repositories: [{repositories}]\n")
    };
    let config = format!(
        "sandbox:\n  egress:\n    allow_loopback: true\n    tls_ports: [{good}, {bad}, {other}]\n    extra_ca_file: {}\n    credentials:\n{}{}{}",
        ca_file.display(),
        credential(good, &format!("\"{REPO}\"")),
        credential(bad, "\"*\""),
        credential(other, "\"someone-else/*\""),
    );
    let greet = "from fhsecret import punctuate\n\n\ndef greeting():\n    return punctuate('Hello')\n";
    let test = "import unittest\nfrom greet import greeting\n\n\nclass Greeting(unittest.TestCase):\n    def test_world(self):\n        self.assertEqual(greeting(), 'Hello, world!')\n";
    let turns = vec![
        (
            run("cat \"$HOME/probe.txt\"; python3 scan.py; .venv/bin/python -m unittest -q 2>&1 | tail -12"),
            None,
        ),
        (replace("'Hello'", "'Hello, world'"), None),
        (run("git commit -qam 'Greet the world'"), None),
        (text("Greeted the world; the tests pass."), None),
    ];
    let world = World::with_repository(
        turns,
        &[
            ("greet.py", greet),
            ("test_greet.py", test),
            ("requirements.txt", "fhsecret==1.0\n"),
            ("probe.py", PROBE),
            ("scan.py", SCAN),
            (".gitignore", ".venv/\n__pycache__/\n"),
            (".forgehand.yaml", &settings),
        ],
        &config,
    )
    .await;
    let issue = world.labelled_issue("Greet the world");
    let value = format!("{USER}:{PASSWORD}");
    let mut env = world.env();
    env.push((VAR, value.clone()));
    let daemon = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    world.wait_for_end(issue).await;
    let log = daemon.log_text();
    let comment = world.progress_comment(issue);
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{comment}\n{log}"
    );
    assert!(comment.contains("Setup: done"), "{comment}");

    // What the agent's first command saw inside the sandbox.
    let requests = world.model.requests().await;
    let seen = requests[1].to_string();
    assert!(seen.contains("leak-scan: clean"), "{seen}");
    assert!(
        seen.contains("trust: /tmp/.forgehand-egress/ca-bundle.pem /tmp/.forgehand-egress/ca-bundle.pem"),
        "{seen}"
    );
    // The installed package works: the test fails only on the greeting.
    assert!(seen.contains("Hello!") && seen.contains("FAILED"), "{seen}");
    // A host whose certificate does not verify got nothing and said why.
    assert!(
        seen.contains("unverified-host 502") && seen.contains("does not verify"),
        "{seen}"
    );
    // A repository not allowed the credential: the plain tunnel, and the
    // index's own refusal.
    assert!(seen.contains("not-allowed 401"), "{seen}");
    // Requests to the index the operator did not name: refused by the
    // relay, or answered by the index's own 401 (no credential added).
    for expected in [
        "attack absolute-form 400",
        "attack absolute-form-own-host 400",
        "attack other-port 400",
        "attack encoded-dots 400",
        "attack trace 405",
    ] {
        assert!(seen.contains(expected), "{expected}: {seen}");
    }
    assert!(
        seen.contains("attack put 401") || seen.contains("attack put 403") || seen.contains("attack put 405"),
        "{seen}"
    );

    let transcript = transcript_of(&world, issue, &value);
    assert!(
        transcript.contains(&format!("localhost:{good} allowed, credential {VAR} added")),
        "{transcript}"
    );
    assert!(
        transcript.contains(&format!(
            "localhost:{bad} denied: the certificate of localhost does not verify"
        )),
        "{transcript}"
    );
    let other_line = transcript
        .lines()
        .find(|l| l.contains(&format!("localhost:{other}")))
        .unwrap_or_default();
    assert!(
        other_line.contains("allowed") && !other_line.contains("credential"),
        "{transcript}"
    );

    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&value);
    let body = &world.github.pulls(REPO)[0].body;
    for text in [&log, &comment, &transcript, body, &seen] {
        for secret in [PASSWORD, encoded.as_str(), TOKEN, MODEL_KEY] {
            assert!(!text.contains(secret), "a secret leaked");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_installs_from_a_private_registry_with_a_token_added_on_the_host() {
    let ca = TestCa::new("corp npm CA");
    let (_registry, front, token) = private_npm_with(
        &ca,
        "fhpunct",
        "1.0.0",
        "exports.punctuate = (text) => text + '!';\n",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("corp-ca.pem");
    std::fs::write(&ca_file, &ca.pem).unwrap();
    let port = front.port;
    let settings = format!(
        "image: node\nsetup: npm install --no-audit --no-fund --registry https://localhost:{port}/\nnetwork:\n  setup: ['localhost:{port}']\ntest: npm test\n"
    );
    let config = format!(
        "sandbox:\n  egress:\n    allow_loopback: true\n    tls_ports: [{port}]\n    extra_ca_file: {}\n    credentials:\n      - host: \"localhost:{port}\"\n        value_from: CORP_NPM_TOKEN\n        scheme: bearer\n        repositories: [\"acme/*\"]\n",
        ca_file.display()
    );
    let greet = "const { punctuate } = require('fhpunct');\n\nexports.greeting = () => punctuate('Hello');\n";
    let test = "const assert = require('assert');\nconst { greeting } = require('./greet');\n\nassert.strictEqual(greeting(), 'Hello, world!');\nconsole.log('greeting ok');\n";
    let package = "{\"name\": \"app\", \"version\": \"1.0.0\", \"private\": true, \"scripts\": {\"test\": \"node test.js\"}, \"dependencies\": {\"fhpunct\": \"1.0.0\"}}\n";
    let turns = vec![
        (run("npm test 2>&1 | tail -15"), None),
        (
            call(
                "text_editor_str_replace",
                serde_json::json!({"path": "/workspace/project/greet.js", "old_str": "'Hello'", "new_str": "'Hello, world'"}),
            ),
            None,
        ),
        (run("git commit -qam 'Greet the world'"), None),
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
        &config,
    )
    .await;
    let issue = world.labelled_issue("Greet the world");
    let mut env = world.env();
    env.push(("CORP_NPM_TOKEN", token.clone()));
    let daemon = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    world.wait_for_end(issue).await;
    let log = daemon.log_text();
    let comment = world.progress_comment(issue);
    assert_eq!(
        world.github.issue(REPO, issue).labels,
        vec![DONE.to_owned()],
        "{comment}\n{log}"
    );
    assert!(comment.contains("Setup: done"), "{comment}");
    let requests = world.model.requests().await;
    let first_run = requests[1].to_string();
    assert!(
        first_run.contains("actual: 'Hello!'") && first_run.contains("ERR_ASSERTION"),
        "{first_run}"
    );
    let transcript = transcript_of_with(&world, issue, "CORP_NPM_TOKEN", &token);
    assert!(
        transcript.contains(&format!(
            "localhost:{port} allowed, credential CORP_NPM_TOKEN added"
        )),
        "{transcript}"
    );
    let body = &world.github.pulls(REPO)[0].body;
    let all_requests: Vec<String> = requests.iter().map(ToString::to_string).collect();
    for text in [&log, &comment, &transcript, body]
        .into_iter()
        .chain(&all_requests)
    {
        assert!(!text.contains(&token), "the token leaked");
    }
}

/// A one-file Java client (the source launcher runs it): the JDK's own
/// HttpClient, its default trust store, no options of its own.
const FETCH_JAVA: &str = r#"import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Fetch {
    public static void main(String[] args) throws Exception {
        HttpResponse<String> response = HttpClient.newHttpClient().send(
            HttpRequest.newBuilder(URI.create(args[0])).build(),
            HttpResponse.BodyHandlers.ofString());
        System.out.println("status " + response.statusCode());
        System.out.println(response.body());
    }
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_fetches_from_a_private_index_through_its_trust_store() {
    let index = private_pypi_with(
        "fhjava",
        "1.0",
        "def punctuate(text):\n    return text + '!'\n",
        USER,
        PASSWORD,
    );
    let index_ca = TestCa::new("corp index CA");
    let front = TlsFront::start(&index_ca, index.port).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("corp-ca.pem");
    std::fs::write(&ca_file, &index_ca.pem).unwrap();
    let port = front.port;
    let settings = format!(
        "image: java\nsetup: java Fetch.java https://localhost:{port}/simple/fhjava/ > \"$HOME/fetched.txt\" 2>&1\nnetwork:\n  setup: ['localhost:{port}']\ntest: 'true'\n"
    );
    let config = format!(
        "sandbox:\n  egress:\n    allow_loopback: true\n    tls_ports: [{port}]\n    extra_ca_file: {}\n    credentials:\n      - host: \"localhost:{port}\"\n        value_from: {VAR}\n        scheme: basic\n        repositories: [\"{REPO}\"]\n",
        ca_file.display()
    );
    let turns = vec![
        (run("cat \"$HOME/fetched.txt\""), None),
        (text("Fetched the index page."), None),
    ];
    let world = World::with_repository(
        turns,
        &[("Fetch.java", FETCH_JAVA), (".forgehand.yaml", &settings)],
        &config,
    )
    .await;
    let issue = world.labelled_issue("Fetch the index");
    let value = format!("{USER}:{PASSWORD}");
    let mut env = world.env();
    env.push((VAR, value.clone()));
    let daemon = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    world.wait_for_end(issue).await;
    let log = daemon.log_text();
    let comment = world.progress_comment(issue);
    assert!(comment.contains("Setup: done"), "{comment}\n{log}");
    let requests = world.model.requests().await;
    let seen = requests[1].to_string();
    // Java verified the relay's certificate and the index let it in.
    assert!(
        seen.contains("status 200") && seen.contains("fhjava-1.0"),
        "{seen}"
    );
    let transcript = transcript_of(&world, issue, &value);
    assert!(
        transcript.contains(&format!("localhost:{port} allowed, credential {VAR} added")),
        "{transcript}"
    );
    for text in [&log, &comment, &transcript, &seen] {
        assert!(!text.contains(PASSWORD), "the credential leaked");
    }
}

/// Setup's hook, harmless on the default branch (nothing runs it): it asks
/// the private registry for its package, which only a request with the
/// credential may read.
fn private_read_hook(port: u16) -> String {
    format!(
        "#!/bin/sh\necho \"private version: $(npm view fhpunct version --registry https://localhost:{port}/ 2>&1 | tail -2 | tr '\\n' ' ')\" >> \"$HOME/hook.txt\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preinstall_hook_the_model_pushed_gets_no_credential_in_the_follow_ups_setup() {
    let ca = TestCa::new("corp npm CA");
    let (_registry, front, token) = private_npm_with(
        &ca,
        "fhpunct",
        "1.0.0",
        "exports.punctuate = (text) => text + '!';\n",
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("corp-ca.pem");
    std::fs::write(&ca_file, &ca.pem).unwrap();
    let port = front.port;
    let settings = format!(
        "image: node\nsetup: npm install --no-audit --no-fund --registry https://localhost:{port}/\nnetwork:\n  setup: ['localhost:{port}']\n"
    );
    let config = format!(
        "triggers:\n  review_quiet: \"2s\"\nrepositories:\n  on_setup_failure: continue\nsandbox:\n  egress:\n    allow_loopback: true\n    tls_ports: [{port}]\n    extra_ca_file: {}\n    credentials:\n      - host: \"localhost:{port}\"\n        value_from: CORP_NPM_TOKEN\n        scheme: bearer\n        repositories: [\"acme/*\"]\n",
        ca_file.display()
    );
    let package = "{\"name\": \"app\", \"version\": \"1.0.0\", \"private\": true, \"scripts\": {\"test\": \"node test.js\"}, \"dependencies\": {\"fhpunct\": \"1.0.0\"}}\n";
    // Both runs: show what setup's hook got, then (once) make the hook a
    // `preinstall` script, and change a file.
    let add_hook = "grep -q preinstall package.json || sed -i 's/\"test\": \"node test.js\"/\"test\": \"node test.js\", \"preinstall\": \"sh hook.sh\"/' package.json; \
                    echo '// looked at again' >> greet.js && git add -A && git commit -qm 'Check the registry before installing'";
    let turns = vec![
        (run("cat \"$HOME/hook.txt\" 2>&1; echo hook-shown"), None),
        (run(add_hook), None),
        (text("Added a registry check before installing."), None),
    ];
    let hook = private_read_hook(port);
    let world = World::with_repository(
        turns,
        &[
            ("greet.js", "exports.greeting = () => 'Hello';\n"),
            ("package.json", package),
            ("hook.sh", &hook),
            ("README.md", "# app\n"),
            (".gitignore", "node_modules/\npackage-lock.json\n"),
            (".forgehand.yaml", &settings),
        ],
        &config,
    )
    .await;
    let issue = world.labelled_issue("Check the registry");
    let mut env = world.env();
    env.push(("CORP_NPM_TOKEN", token.clone()));
    let daemon = DaemonProcess::start(&world.config, &["run"], &env, &world.log_path());
    let pull = world.follow_up_by_review(issue, &daemon, "README.md").await;
    let log = daemon.log_text();

    // The first run's setup was the default branch's: the credential was added.
    let first = transcript_of_with(&world, issue, "CORP_NPM_TOKEN", &token);
    assert!(
        first.contains(&format!(
            "localhost:{port} allowed, credential CORP_NPM_TOKEN added"
        )),
        "{first}"
    );
    let branch = format!("forgehand/issue-{issue}");
    let pushed = forgehand_test_support::git_http::log(&world.bare, &branch);
    assert!(
        pushed
            .iter()
            .any(|l| l.contains("Check the registry before installing")),
        "{pushed:?}"
    );

    // What the hook got, as the follow-up's agent saw it: never the
    // private package.
    let requests: Vec<String> = world
        .model
        .requests()
        .await
        .iter()
        .map(ToString::to_string)
        .collect();
    let shown: Vec<&String> = requests.iter().filter(|r| r.contains("hook-shown")).collect();
    assert!(shown.len() >= 2, "both runs showed the hook's output");
    for seen in &requests {
        let hook: String = seen
            .find("private version")
            .map_or(String::new(), |at| seen[at..].chars().take(200).collect());
        assert!(
            !hook.starts_with("private version: 1.0.0"),
            "the hook read the private package: {hook}"
        );
        assert!(!seen.contains(&token), "the token leaked");
    }

    // The follow-up's setup ran the model's hook, and said it had no credential.
    let progress = world.progress_comment(pull);
    assert!(
        progress.contains("Setup: runs without the egress credentials"),
        "{progress}\n{log}"
    );
    // Without it the private package does not install (the registry's
    // certificate is one only the relay trusts); the operator let the
    // model go on without setup.
    assert!(
        progress.contains("Setup failed: `npm install") && progress.contains("on_setup_failure: continue"),
        "{progress}"
    );
    let follow_up = transcript_of_kind(&world, ("change", pull), "CORP_NPM_TOKEN", &token);
    assert!(
        follow_up.contains("Setup: runs without the egress credentials"),
        "{follow_up}"
    );
    let setup_lines: Vec<&str> = follow_up
        .lines()
        .filter(|l| l.contains(&format!("localhost:{port}")))
        .collect();
    assert!(!setup_lines.is_empty(), "setup reached the registry: {follow_up}");
    assert!(
        setup_lines.iter().all(|l| !l.contains("credential")),
        "{follow_up}"
    );
}
