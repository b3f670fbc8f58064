//! The configuration as an operator meets it: the shipped file, environment
//! overrides, and one clear error per kind of mistake.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;

use forgehand::config::{Config, ConfigError};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

fn load(yaml: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Config::from_yaml(
        yaml,
        Path::new("test.yaml"),
        Path::new("/etc/forgehand"),
        &|name| env.get(name).cloned(),
    )
}

#[test]
fn the_shipped_config_loads_and_matches_the_built_in_defaults() {
    let shipped = common::shipped_config();
    let root = common::repo_root();
    let empty = Config::from_yaml("", Path::new("empty.yaml"), &root, &|_| None).unwrap();
    assert_eq!(shipped, empty, "config.yaml and the built-in defaults must agree");
    assert!(shipped.text_editor_mcp.enabled);
    assert_eq!(shipped.sandbox.network_mode, "none");
    assert_eq!(shipped.sandbox.exec_timeout, Duration::from_secs(1800));
    assert_eq!(shipped.sandbox.output_limit, 1 << 20);
    assert_eq!(shipped.sandbox.memory_bytes, 4 << 30);
    assert_eq!(shipped.daemon.state_dir, root.join("state"));
    assert_eq!(shipped.images.dir, None, "the built-in images");
    assert_eq!(shipped.agent.prompts_dir, None, "the built-in prompts");
    assert_eq!(shipped.planning.ideas, forgehand::config::IdeasMode::Auto);
    assert!(shipped.trust.label_vouches_for_issue_text);
    assert_eq!(shipped.ideas.min_interval, Duration::from_secs(5));
    assert_eq!(shipped.context.recent_turns, 3);
}

#[test]
fn the_minimal_example_loads_with_the_built_in_images_and_prompts() {
    let root = common::repo_root();
    let minimal = Config::load(&root.join("examples/minimal.yaml")).unwrap();
    assert_eq!(minimal.github.repositories, ["your-org/your-repo"]);
    // Nothing of the checkout is named: the file works from any folder.
    assert_eq!(minimal.images.dir, None);
    assert_eq!(minimal.agent.prompts_dir, None);
    assert_eq!(minimal.daemon.state_dir, root.join("examples").join("state"));
    // Everything else is the shipped default (the state folder aside).
    let mut shipped = common::shipped_config();
    shipped.daemon.state_dir = minimal.daemon.state_dir.clone();
    shipped.sandbox.egress_socket_dir = minimal.sandbox.egress_socket_dir.clone();
    shipped.sandbox.snapshots.dir = minimal.sandbox.snapshots.dir.clone();
    assert_eq!(minimal.sandbox, shipped.sandbox);
    assert_eq!(minimal.llm, shipped.llm);
}

#[test]
fn a_config_given_by_a_relative_path_gives_absolute_paths_only() {
    // cargo runs the tests in the checkout: this is the README's
    // `--config examples/minimal.yaml`.
    let minimal = Config::load(Path::new("examples/minimal.yaml")).unwrap();
    let root = common::repo_root();
    for dir in [
        &minimal.daemon.state_dir,
        &minimal.sandbox.egress_socket_dir,
        &minimal.sandbox.snapshots.dir,
    ] {
        assert!(dir.is_absolute(), "{} is relative", dir.display());
        assert!(dir.starts_with(&root), "{}", dir.display());
    }
    // A file name alone (`--config minimal.yaml`) anchors at the current folder.
    let here = Config::from_yaml(
        "daemon:\n  state_dir: \"state\"\n",
        Path::new("m.yaml"),
        Path::new(""),
        &|_| None,
    )
    .unwrap();
    assert_eq!(
        here.daemon.state_dir,
        std::env::current_dir().unwrap().join("state")
    );
    assert!(Config::defaults().daemon.state_dir.is_absolute());
}

#[test]
fn text_editor_env_override_wins_over_the_file() {
    let yaml = "text_editor_mcp:\n  enabled: true\n";
    assert!(
        !load(yaml, &[("TEXT_EDITOR_MCP_ENABLED", "false")])
            .unwrap()
            .text_editor_mcp
            .enabled
    );
    assert!(
        load(
            "text_editor_mcp: {enabled: false}",
            &[("TEXT_EDITOR_MCP_ENABLED", "1")]
        )
        .unwrap()
        .text_editor_mcp
        .enabled
    );
    assert!(
        !load("text_editor_mcp: {enabled: false}", &[])
            .unwrap()
            .text_editor_mcp
            .enabled
    );
    let err = load("", &[("TEXT_EDITOR_MCP_ENABLED", "maybe")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("TEXT_EDITOR_MCP_ENABLED") && err.contains("maybe"),
        "{err}"
    );
}

#[test]
fn the_editor_binary_comes_from_the_file_or_its_env_override() {
    assert_eq!(load("", &[]).unwrap().text_editor_mcp.editor_binary, None);
    let config = load("text_editor_mcp: {editor_binary: bin/forgehand-editor}", &[]).unwrap();
    assert_eq!(
        config.text_editor_mcp.editor_binary.as_deref(),
        Some(Path::new("/etc/forgehand/bin/forgehand-editor"))
    );
    let config = load("", &[("FORGEHAND_EDITOR_BINARY", "/opt/fh/forgehand-editor")]).unwrap();
    assert_eq!(
        config.text_editor_mcp.editor_binary.as_deref(),
        Some(Path::new("/opt/fh/forgehand-editor"))
    );
}

#[test]
fn forge_addresses_come_from_the_file_or_their_env_overrides() {
    let config = load(
        "github:\n  api_url: \"https://ghe.example.com/api/v3/\"\ngitlab:\n  url: \"https://git.example.com/\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(config.github.api_url, "https://ghe.example.com/api/v3");
    assert_eq!(config.gitlab.url, "https://git.example.com");
    let config = load(
        "",
        &[
            ("GITHUB_API_URL", "http://127.0.0.1:8080"),
            ("GITLAB_URL", "https://gitlab.internal/prefix"),
        ],
    )
    .unwrap();
    assert_eq!(config.github.api_url, "http://127.0.0.1:8080");
    assert_eq!(config.gitlab.url, "https://gitlab.internal/prefix");
    assert!(!config.github.watches_anything() && !config.gitlab.watches_anything());
    let err = load("", &[("GITLAB_URL", "not a url")]).unwrap_err().to_string();
    assert!(
        err.contains("GITLAB_URL") && err.contains("not an http(s) address"),
        "{err}"
    );
}

#[test]
fn variables_are_substituted_in_string_values() {
    let yaml = "daemon:\n  instance_id: \"${POD_NAME:-local}\"\n  state_dir: \"${STATE}/forgehand\"\n";
    let config = load(yaml, &[("STATE", "/var/lib")]).unwrap();
    assert_eq!(config.daemon.instance_id, "local");
    assert_eq!(config.daemon.state_dir, Path::new("/var/lib/forgehand"));
    let config = load(yaml, &[("STATE", "/srv"), ("POD_NAME", "forgehand-7f9c")]).unwrap();
    assert_eq!(config.daemon.instance_id, "forgehand-7f9c");
}

#[test]
fn relative_paths_are_taken_from_the_config_folder() {
    let config = load("images: {dir: my-images}\ndaemon: {state_dir: /abs}", &[]).unwrap();
    assert_eq!(
        config.images.dir.as_deref(),
        Some(Path::new("/etc/forgehand/my-images"))
    );
    assert_eq!(config.daemon.state_dir, Path::new("/abs"));
}

#[test]
fn units_are_read_the_way_operators_write_them() {
    let config = load(
        "sandbox: {memory: 512m, exec_timeout: 90s, output_limit: 64k, tmp_size: 1073741824}",
        &[],
    )
    .unwrap();
    assert_eq!(config.sandbox.memory_bytes, 512 << 20);
    assert_eq!(config.sandbox.exec_timeout, Duration::from_secs(90));
    assert_eq!(config.sandbox.output_limit, 64 << 10);
    assert_eq!(config.sandbox.tmp_size, 1 << 30);
}

/// Each bad input: the YAML, then fragments its error must contain.
#[test]
fn every_bad_input_gets_an_error_naming_the_key_and_what_is_accepted() {
    let cases: &[(&str, &[&str])] = &[
        (
            "github:\n  repositories: [\"just-a-name\"]\n",
            &[
                "github.repositories[0]",
                "\"just-a-name\" is not a repository",
                "owner/name",
            ],
        ),
        ("github:\n  app_id: 12\n", &["github.app_id", "installation_id"]),
        (
            "github:\n  api_url: \"api.github.com\"\n",
            &["github.api_url", "not an http(s) address"],
        ),
        (
            "gitlab:\n  min_access_level: 35\n",
            &["gitlab.min_access_level", "30 (Developer)"],
        ),
        (
            "gitlab:\n  projects: [\"nogroup\"]\n",
            &["gitlab.projects[0]", "group/name"],
        ),
        (
            "labels:\n  done: \"coding agent\"\n",
            &["labels", "used for two roles"],
        ),
        (
            "planning:\n  mode: \"debates\"\n",
            &["planning.mode", "\"debates\" is not one of", "\"off\""],
        ),
        (
            "planning:\n  debaters: [\"gpt-5.6\", \"gpt-5\"]\n",
            &[
                "planning.debaters[1]",
                "\"gpt-5\" is not a model under llm.models",
                "gpt-5.6, claude-opus-5-5, gemini-3.1-pro-preview",
            ],
        ),
        (
            "llm:\n  models:\n    - {provider: openai, model: gpt-5.6, api: messages}\n",
            &[
                "llm.models[0].api",
                "not an API of this provider",
                "\"responses\"",
            ],
        ),
        (
            "llm:\n  models:\n    - {provider: anthropic, model: c, reasoning: deep}\n",
            &[
                "llm.models[0].reasoning",
                "\"deep\" is not one of",
                "\"adaptive\"",
            ],
        ),
        (
            "llm:\n  models:\n    - {provider: openai, model: m, reasoning_effort: extreme}\n",
            &[
                "llm.models[0].reasoning_effort",
                "\"extreme\" is not one of",
                "xhigh",
            ],
        ),
        (
            "llm:\n  models:\n    - {provider: openai, model: m, efforts: [low, turbo]}\n",
            &["llm.models[0].efforts", "\"turbo\""],
        ),
        (
            "llm:\n  models:\n    - {provider: openai, model: m, max_output_tokens: 0}\n",
            &["llm.models[0].max_output_tokens", "must be above 0"],
        ),
        (
            "llm:\n  stream_idle_timeout: \"10m\"\n  stream_total_timeout: \"5m\"\n",
            &["llm.stream_total_timeout", "at least llm.stream_idle_timeout"],
        ),
        (
            "llm:\n  stream_idle_timeout: \"0s\"\n",
            &["llm.stream_idle_timeout", "longer than zero"],
        ),
        (
            "llm:\n  prices:\n    m: {input: 1.0, output: 2.0, cache_write: -1}\n",
            &["llm.prices.m", "0 or more"],
        ),
        (
            "planning:\n  judge: \"claude\"\n",
            &["planning.judge", "not a model under llm.models"],
        ),
        ("planning:\n  rounds: 0\n", &["planning.rounds", "use 1 to 10"]),
        (
            "planning:\n  consensus_threshold: 1.5\n",
            &["planning.consensus_threshold", "at most 1"],
        ),
        (
            "planning:\n  context_tokens: 10\n",
            &["planning.context_tokens", "at least 1000"],
        ),
        (
            "planning:\n  ideas: \"sometimes\"\n",
            &["planning.ideas", "\"sometimes\" is not one of", "\"auto\""],
        ),
        (
            "context:\n  classifier_model: \"tiny\"\n",
            &["context.classifier_model", "not a model under llm.models"],
        ),
        (
            "context:\n  recent_turns: 0\n",
            &["context.recent_turns", "use 1 to 10"],
        ),
        (
            "context:\n  transcript_tokens: 100\n",
            &["context.transcript_tokens", "at least 4000"],
        ),
        (
            "context:\n  evolving_tokens: 10\n",
            &["context.evolving_tokens", "at least 500"],
        ),
        (
            "context:\n  keep_for: 0s\n",
            &["context.keep_for", "longer than zero"],
        ),
        (
            "context:\n  mission_tokens: 100\n",
            &["context.mission_tokens", "at least 500 (default 12000)"],
        ),
        (
            "llm:\n  models:\n    - {provider: openai, model: o3, max_input_tokens: 200000, role: heavy}\n",
            &["llm.models[0].role", r#""heavy" is not one of "main""#],
        ),
        (
            "ideas:\n  max_parallel: 0\n",
            &["ideas.max_parallel", "use 1 to 16"],
        ),
        (
            "ideas:\n  min_interval: 5\n",
            &["ideas.min_interval", "has no unit"],
        ),
        ("trust:\n  label_vouches: true\n", &["trust", "label_vouches"]),
        (
            "llm:\n  prices:\n    o3: {input: 1, output: 2, cached_input: -1}\n",
            &["llm.prices.o3", "0 or more"],
        ),
        (
            "daemon:\n  max_concurrent_tasks: 0\n",
            &["daemon.max_concurrent_tasks", "at least 1"],
        ),
        (
            "delivery:\n  max_push_attempts: 0\n",
            &["delivery.max_push_attempts", "at least 1"],
        ),
        (
            "sandbox:\n  memory: \"4 gigs\"\n",
            &["sandbox.memory", "\"4 gigs\" is not a size", "4g"],
        ),
        (
            "sandbox:\n  memory: 4m\n",
            &["sandbox.memory", "at least \"16m\""],
        ),
        (
            "sandbox:\n  output_limit: lots\n",
            &["sandbox.output_limit", "not a size"],
        ),
        (
            "sandbox:\n  copy_out_max_bytes: 10k\n",
            &["sandbox.copy_out_max_bytes", "at least \"1m\""],
        ),
        (
            "sandbox:\n  copy_out_max_entries: 5\n",
            &["sandbox.copy_out_max_entries", "at least 100"],
        ),
        (
            "sandbox:\n  exec_timeout: 1800\n",
            &["sandbox.exec_timeout", "no unit", "1800s"],
        ),
        (
            "sandbox:\n  exec_timeout: soon\n",
            &["sandbox.exec_timeout", "not a duration"],
        ),
        (
            "sandbox:\n  exec_timeout: 0s\n",
            &["sandbox.exec_timeout", "longer than zero"],
        ),
        (
            "sandbox:\n  pids_limit: many\n",
            &["sandbox.pids_limit", "wrong type", "whole number"],
        ),
        (
            "sandbox:\n  pids_limit: 3\n",
            &["sandbox.pids_limit", "at least 16"],
        ),
        ("sandbox:\n  cpus: -1\n", &["sandbox.cpus", "positive number"]),
        (
            "sandbox:\n  read_only_root: sometimes\n",
            &["sandbox.read_only_root", "true or false"],
        ),
        (
            "sandbox:\n  netwrk_mode: none\n",
            &["sandbox.netwrk_mode", "unknown key", "network_mode"],
        ),
        ("sandboxes: {}\n", &["sandboxes", "unknown key", "sandbox"]),
        ("sandbox:\n  user: \"\"\n", &["sandbox.user", "must not be empty"]),
        (
            "sandbox:\n  project_dir: project\n",
            &["sandbox.project_dir", "absolute"],
        ),
        (
            "sandbox:\n  project_dir: /srv/project\n",
            &["sandbox.project_dir", "inside sandbox.workspace_dir"],
        ),
        (
            "daemon:\n  instance_id: \"my daemon\"\n",
            &["daemon.instance_id", "letters, digits"],
        ),
        (
            "daemon:\n  state_dir: \"${FORGEHAND_STATE}\"\n",
            &["daemon.state_dir", "FORGEHAND_STATE", "is not set"],
        ),
        (
            "images:\n  pins:\n    justaname: img\n",
            &["images.pins.justaname", "owner/name"],
        ),
        ("images:\n  pins: [a, b]\n", &["images.pins", "wrong type"]),
        (
            "text_editor_mcp:\n  mcp_server:\n    command: [npx, \"\"]\n",
            &["text_editor_mcp.mcp_server.command", "empty argument"],
        ),
        (
            "text_editor_mcp:\n  enabled: yes please\n",
            &["text_editor_mcp.enabled", "true or false"],
        ),
        ("docker:\n  api_timeout: 0s\n", &["docker.api_timeout"]),
        (
            "text_editor_mcp:\n  max_view_bytes: 10\n",
            &["text_editor_mcp.max_view_bytes", "at least"],
        ),
        (
            "text_editor_mcp:\n  call_timeout: 5\n",
            &["text_editor_mcp.call_timeout", "no unit"],
        ),
        (
            "sandbox: [1, 2]\n",
            &["sandbox", "wrong type", "expected a mapping of settings"],
        ),
        (
            "delivery:\n  ci_fix_rounds: 50\n",
            &["delivery.ci_fix_rounds", "too many", "0 to 10"],
        ),
        (
            "delivery:\n  ci_poll: 100ms\n",
            &["delivery.ci_poll", "at least 1s"],
        ),
        (
            "delivery:\n  ci_wait: 2h\n  ci_timeout: 1h\n",
            &["delivery.ci_timeout", "at least delivery.ci_wait"],
        ),
        (
            "triggers:\n  review_quiet: 3d\n",
            &["triggers.review_quiet", "longer than a day"],
        ),
        (
            "triggers:\n  mentions: often\n",
            &["triggers.mentions", "true or false"],
        ),
        (
            "triggers:\n  plan_approval: sometimes\n",
            &["triggers.plan_approval", "off", "label", "always"],
        ),
        (
            "triggers:\n  plan_approval_timeout: 0s\n",
            &["triggers.plan_approval_timeout", "is zero"],
        ),
        (
            "budget:\n  task_usd: -2\n",
            &["budget.task_usd", "not a positive amount of US dollars"],
        ),
        (
            "budget:\n  daily_usd: 5\n",
            &["budget.daily_usd", "unknown key", "repository_daily_usd"],
        ),
        (
            "repositories:\n  defaults:\n    budget:\n      monthly_usd: 0\n",
            &["budget.monthly_usd", "not a positive amount"],
        ),
        (
            "daemon:\n  transcript_retention: 10m\n",
            &["daemon.transcript_retention", "at least \"1h\""],
        ),
        (
            "daemon:\n  http:\n    public_url: \"forgehand.example.org\"\n",
            &["daemon.http.public_url", "not an http(s) address"],
        ),
        (
            "daemon:\n  webhooks: true\n",
            &["daemon.webhooks", "daemon.http.listen is empty"],
        ),
        (
            "sandbox:\n  memory: 4g\n bad indent: x\n",
            &["test.yaml", "not valid YAML"],
        ),
    ];
    for (yaml, expected) in cases {
        let err = match load(yaml, &[]) {
            Ok(_) => panic!("{yaml:?} should be refused"),
            Err(err) => err.to_string(),
        };
        for fragment in *expected {
            assert!(
                err.contains(fragment),
                "error for {yaml:?} lacks {fragment:?}: {err}"
            );
        }
    }
}

#[test]
fn a_missing_file_says_how_to_point_at_one() {
    let err = Config::load(Path::new("/nonexistent/forgehand.yaml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/nonexistent/forgehand.yaml") && err.contains("--config"),
        "{err}"
    );
}

#[test]
fn sandboxes_as_pods_are_configured_with_their_registry_and_refuse_the_socket_tunnel() {
    let pods = load(
        "sandbox:\n  backend: kubernetes\n  kubernetes:\n    namespace: sandboxes\n    runtime_class: gvisor\nimages:\n  registry: registry.example.com/team\n  pull_secrets: [pull]\n",
        &[],
    )
    .unwrap();
    let forgehand::config::SandboxBackendChoice::Kubernetes(k) = pods.sandbox.backend else {
        panic!("pods asked for");
    };
    assert_eq!(
        (
            k.namespace.as_str(),
            k.registry.as_str(),
            k.runtime_class.as_deref()
        ),
        ("sandboxes", "registry.example.com/team", Some("gvisor"))
    );
    let err = load(
        "sandbox:\n  backend: kubernetes\n  egress:\n    transport: socket\n",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("sandbox.egress.transport") && err.contains("rides on exec"),
        "{err}"
    );
    let err = load("sandbox:\n  kubernetes:\n    namespaces: x\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("namespaces"), "{err}");
}

#[test]
fn egress_tls_ports_default_to_443_and_refuse_port_0() {
    assert_eq!(load("", &[]).unwrap().sandbox.egress_tls_ports, [443]);
    let listed = load("sandbox:\n  egress:\n    tls_ports: [443, 8443]\n", &[]).unwrap();
    assert_eq!(listed.sandbox.egress_tls_ports, [443, 8443]);
    let err = load("sandbox:\n  egress:\n    tls_ports: [443, 0]\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sandbox.egress.tls_ports") && err.contains("port 0"),
        "{err}"
    );
}

#[test]
fn egress_credentials_come_from_the_environment_and_bad_ones_name_their_key() {
    let yaml = |scheme: &str| {
        format!("sandbox:\n  egress:\n    credentials:\n      - host: pypi.corp.example\n        scheme: {scheme}\n        value_from: CORP_PYPI_TOKEN\n        repositories: [\"acme/*\"]\n")
    };
    let loaded = load(&yaml("bearer"), &[("CORP_PYPI_TOKEN", "tok-value-1")]).unwrap();
    let credential = &loaded.sandbox.egress_credentials.credentials[0];
    assert_eq!(
        (credential.host.as_str(), credential.port),
        ("pypi.corp.example", 443)
    );
    assert_eq!(credential.header_value.expose(), "Bearer tok-value-1");
    assert!(!format!("{loaded:?}").contains("tok-value-1"));
    let missing = load(&yaml("bearer"), &[]).unwrap_err().to_string();
    assert!(
        missing.starts_with("sandbox.egress.credentials[0].value_from")
            && missing.contains("CORP_PYPI_TOKEN"),
        "{missing}"
    );
    let scheme = load(&yaml("ntlm"), &[("CORP_PYPI_TOKEN", "tok-value-1")])
        .unwrap_err()
        .to_string();
    assert!(
        scheme.starts_with("sandbox.egress.credentials[0].scheme") && !scheme.contains("tok-value-1"),
        "{scheme}"
    );
}
