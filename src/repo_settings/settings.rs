//! `.forgehand.yaml` and the operator's side of it. Which side wins, key by
//! key (also in docs/src/maintainers/forgehand-yaml.md):
//!
//! - `image`: `images.pins` (operator) first; then the file's, when it
//!   names one of forgehand's own images or `repositories.allow_image` lets
//!   it name any; then the operator's defaults; then the image of the
//!   detected language.
//! - `setup`, `test`, `instructions`, `network.*`: the file's, else
//!   `repositories.per_repository.<repo>`, else `repositories.defaults`.
//!   Hosts outside `repositories.allowed_hosts` (when set) are dropped. The
//!   file's own `network.agent` needs that list: without it the agent stays
//!   offline (what runs beside the model must not reach hosts only the
//!   repository chose).
//! - `setup_timeout`, `test_timeout`: the same order, capped by
//!   `repositories.max_setup_timeout` / `max_test_timeout`.
//! - `env`: merged variable by variable, the file's value first.
//! - `attempts` (best of N): `repositories.per_repository.<repo>`, else
//!   `repositories.defaults`, else `agent.attempts`; the file's only lowers
//!   that (a repository cannot multiply the operator's spend).

use crate::config::{
    check_repo_file, AgentNetwork, ConfigError, HostPattern, RepoBudget, RepoFile, RepositoriesConfig,
};
use crate::images::Language;
use std::collections::BTreeMap;
use std::time::Duration;

/// The settings file's name at the repository's root.
pub const SETTINGS_FILE: &str = ".forgehand.yaml";

/// A repository's environment as the task uses it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RepoSettings {
    /// An image reference chosen by the settings (`None`: detection decides).
    pub image: Option<String>,
    pub setup: Vec<String>,
    pub setup_timeout: Duration,
    pub env: BTreeMap<String, String>,
    /// Hosts setup may reach.
    pub setup_hosts: Vec<HostPattern>,
    /// Hosts the agent phase (and the tests) may reach; empty: none.
    pub agent_hosts: Vec<HostPattern>,
    pub test: Option<String>,
    pub test_timeout: Duration,
    /// Files read as instructions; `None`: `AGENTS.md`, else `CLAUDE.md`,
    /// else `.github/copilot-instructions.md`.
    pub instructions: Option<Vec<String>>,
    /// The lowest of the caps the file and the operator's repository
    /// entries give (each lowers the operator's `budget.*`).
    pub budget: RepoBudget,
    /// Attempts at the change (best of N): the operator's number for the
    /// repository, or the file's when lower.
    pub attempts: u32,
    /// What the merge dropped or capped, for the progress comment.
    pub notes: Vec<String>,
}

/// A settings file that cannot be used: which key, which value, what is accepted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    #[error("`{SETTINGS_FILE}` is not valid YAML: {message}")]
    Syntax { message: String },
    #[error("`{SETTINGS_FILE}`, key `{key}`: {message}")]
    Invalid { key: String, message: String },
}

/// Parses the text of `.forgehand.yaml`; an empty file means no settings.
pub fn parse_file(text: &str) -> Result<RepoFile, SettingsError> {
    let value: yaml_serde::Value = yaml_serde::from_str(text).map_err(|e| SettingsError::Syntax {
        message: e.to_string(),
    })?;
    if value.is_null() {
        return Ok(RepoFile::default());
    }
    let file: RepoFile = serde_path_to_error::deserialize(value).map_err(|err| {
        let key = err.path().to_string();
        SettingsError::Invalid {
            key: if key == "." { "(top level)".into() } else { key },
            message: plain_serde_message(&err.into_inner().to_string()),
        }
    })?;
    check_repo_file("", &file).map_err(|err| match err {
        ConfigError::Invalid { key, message } => SettingsError::Invalid { key, message },
        other => SettingsError::Invalid {
            key: "(top level)".into(),
            message: other.to_string(),
        },
    })?;
    Ok(file)
}

fn plain_serde_message(message: &str) -> String {
    message
        .replace("unknown field", "unknown key")
        .replace("expected one of", "known keys are")
        .replace("invalid type: ", "wrong type: ")
        .replace("expected a string", "expected text")
        .replace("struct RepoFile", "a mapping of settings")
        .replace("struct RawNetwork", "a mapping with `setup` and `agent`")
}

/// The public package registries setup may reach when no side names hosts.
pub fn public_registries(language: Language) -> &'static [&'static str] {
    match language {
        Language::Python => &["pypi.org", "files.pythonhosted.org"],
        Language::Node => &["registry.npmjs.org"],
        Language::Rust => &["crates.io", "index.crates.io", "static.crates.io"],
        Language::Go => &["proxy.golang.org", "sum.golang.org"],
        Language::Java => &[
            "repo.maven.apache.org",
            "repo1.maven.org",
            "plugins.gradle.org",
            "services.gradle.org",
            "downloads.gradle.org",
        ],
        Language::Base => &[],
    }
}

/// Merges the repository's `file` (when it has one) with the operator's
/// settings for `repository`.
pub fn resolve(
    config: &RepositoriesConfig,
    repository: &str,
    file: Option<&RepoFile>,
    language: Language,
) -> RepoSettings {
    let empty = RepoFile::default();
    let file = file.unwrap_or(&empty);
    let operator = config.per_repository.get(repository).unwrap_or(&empty);
    let layers = [file, operator, &config.defaults];
    let mut notes = Vec::new();

    let image = image(config, &layers, &mut notes);
    let setup = first(&layers, |l| l.setup.clone().map(|c| c.into_vec())).unwrap_or_default();
    let setup_timeout = capped(
        "setup_timeout",
        first(&layers, |l| l.setup_timeout.map(|d| d.0)).unwrap_or(config.setup_timeout),
        config.max_setup_timeout,
        &mut notes,
    );
    let test_timeout = capped(
        "test_timeout",
        first(&layers, |l| l.test_timeout.map(|d| d.0)).unwrap_or(config.test_timeout),
        config.max_test_timeout,
        &mut notes,
    );
    let mut env = BTreeMap::new();
    for layer in layers.iter().rev() {
        for (name, value) in layer.env.iter().flatten() {
            env.insert(name.clone(), value.to_string());
        }
    }
    let (setup_hosts, agent_hosts) = hosts(config, &layers, language, &mut notes);
    RepoSettings {
        image,
        setup,
        setup_timeout,
        env,
        setup_hosts,
        agent_hosts,
        test: first(&layers, |l| l.test.clone()).map(|t| t.trim().to_owned()),
        test_timeout,
        instructions: first(&layers, |l| l.instructions.clone()),
        budget: lowest_budget(&layers),
        attempts: attempts(config, operator, file, &mut notes),
        notes,
    }
}

/// The image: the repository's choice only when it is one of forgehand's
/// own, or the operator allows any (`repositories.allow_image`).
fn image(config: &RepositoriesConfig, layers: &[&RepoFile; 3], notes: &mut Vec<String>) -> Option<String> {
    let [file, operator, _] = layers;
    match &file.image {
        Some(chosen) if !config.allow_image && !crate::images::is_own_image_name(chosen) => {
            notes.push(format!(
                "The repository's `image: {chosen}` is ignored: only forgehand's own images (such as `python`) may be chosen unless the operator sets repositories.allow_image"
            ));
            operator.image.clone().or_else(|| config.defaults.image.clone())
        }
        _ => first(layers, |l| l.image.clone()),
    }
}

/// `value`, or the operator's `max` with a note when it asks for more.
fn capped(name: &str, value: Duration, max: Duration, notes: &mut Vec<String>) -> Duration {
    if value > max {
        notes.push(format!(
            "`{name}` of {} is capped at the operator's limit of {}",
            humantime::format_duration(value),
            humantime::format_duration(max)
        ));
        max
    } else {
        value
    }
}

/// The hosts setup and the agent may reach, within the operator's allowed
/// list. The repository's own `network.agent` needs such a list: without
/// one the agent stays offline.
fn hosts(
    config: &RepositoriesConfig,
    layers: &[&RepoFile; 3],
    language: Language,
    notes: &mut Vec<String>,
) -> (Vec<HostPattern>, Vec<HostPattern>) {
    let setup_hosts = match first(layers, |l| l.network.as_ref().and_then(|n| n.setup.clone())) {
        Some(hosts) => patterns(&hosts),
        None => public_registries(language)
            .iter()
            .filter_map(|h| HostPattern::parse(h).ok())
            .collect(),
    };
    let agent_hosts = match first(layers, |l| l.network.as_ref().and_then(|n| n.agent.clone())) {
        Some(AgentNetwork::Hosts(hosts)) => patterns(&hosts),
        _ => Vec::new(),
    };
    let agent_from_file = layers[0].network.as_ref().is_some_and(|n| n.agent.is_some());
    let (setup_hosts, dropped_setup) = within_limit(setup_hosts, &config.allowed_hosts);
    let (agent_hosts, dropped_agent) = if agent_from_file
        && config.allowed_hosts.is_empty()
        && !agent_hosts.is_empty()
    {
        notes.push(format!(
            "The agent stays offline: the repository's `network.agent` ({}) needs the operator's list of hosts repositories may name (repositories.allowed_hosts), and none is set",
            agent_hosts.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ));
        (Vec::new(), Vec::new())
    } else {
        within_limit(agent_hosts, &config.allowed_hosts)
    };
    let dropped: Vec<String> = dropped_setup
        .iter()
        .chain(&dropped_agent)
        .map(ToString::to_string)
        .collect();
    if !dropped.is_empty() {
        notes.push(format!(
            "Hosts outside the operator's allowed list (repositories.allowed_hosts) are not reachable: {}",
            dropped.join(", ")
        ));
    }
    (setup_hosts, agent_hosts)
}

/// The operator's number of attempts for the repository (its entry, the
/// defaults, `agent.attempts`), lowered by the file's, never raised.
fn attempts(
    config: &RepositoriesConfig,
    operator: &RepoFile,
    file: &RepoFile,
    notes: &mut Vec<String>,
) -> u32 {
    let allowed = operator
        .attempts
        .or(config.defaults.attempts)
        .unwrap_or(config.attempts);
    match file.attempts {
        Some(asked) if asked > allowed => {
            notes.push(format!(
                "`attempts: {asked}` is capped at the operator's {allowed} for this repository (a repository's file can only lower it)"
            ));
            allowed
        }
        Some(asked) => asked,
        None => allowed,
    }
}

/// Each cap at the lowest any layer gives.
fn lowest_budget(layers: &[&RepoFile]) -> RepoBudget {
    let lowest = |cap: fn(&RepoBudget) -> Option<f64>| {
        layers
            .iter()
            .filter_map(|l| l.budget.as_ref().and_then(cap))
            .reduce(f64::min)
    };
    RepoBudget {
        task_usd: lowest(|b| b.task_usd),
        daily_usd: lowest(|b| b.daily_usd),
        monthly_usd: lowest(|b| b.monthly_usd),
    }
}

/// The first layer (file, operator's repository entry, operator's
/// defaults) that gives a value.
fn first<T>(layers: &[&RepoFile], pick: impl Fn(&RepoFile) -> Option<T>) -> Option<T> {
    layers.iter().find_map(|l| pick(l))
}

/// Patterns already checked when their file was parsed.
fn patterns(hosts: &[String]) -> Vec<HostPattern> {
    let mut out: Vec<HostPattern> = hosts.iter().filter_map(|h| HostPattern::parse(h).ok()).collect();
    out.sort();
    out.dedup();
    out
}

/// Splits `hosts` into those the operator's `allowed` list covers (all of
/// them when it is empty) and those it does not.
fn within_limit(hosts: Vec<HostPattern>, allowed: &[HostPattern]) -> (Vec<HostPattern>, Vec<HostPattern>) {
    if allowed.is_empty() {
        return (hosts, Vec::new());
    }
    hosts
        .into_iter()
        .partition(|host| allowed.iter().any(|limit| limit.covers(host)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn config_with(yaml: &str) -> RepositoriesConfig {
        Config::from_yaml(
            yaml,
            std::path::Path::new("t.yaml"),
            std::path::Path::new("."),
            &|_| None,
        )
        .unwrap()
        .repositories
    }

    #[test]
    fn the_file_wins_over_operator_defaults_and_env_merges() {
        let config = config_with(
            "repositories:\n  defaults:\n    test: make check\n    env: {A: one, B: two}\n  per_repository:\n    o/r:\n      setup: make deps\n      env: {B: three}\n",
        );
        let file =
            parse_file("setup: [pip install -r requirements.txt, pip install -e .]\nenv:\n  A: 1\n").unwrap();
        let settings = resolve(&config, "o/r", Some(&file), Language::Python);
        assert_eq!(
            settings.setup,
            ["pip install -r requirements.txt", "pip install -e ."]
        );
        assert_eq!(settings.test.as_deref(), Some("make check"));
        assert_eq!(settings.env["A"], "1");
        assert_eq!(settings.env["B"], "three");
        let without_file = resolve(&config, "o/r", None, Language::Python);
        assert_eq!(without_file.setup, ["make deps"]);
    }

    #[test]
    fn setup_hosts_default_to_the_language_registries() {
        let config = config_with("");
        let python = resolve(&config, "o/r", None, Language::Python);
        let node = resolve(&config, "o/r", None, Language::Node);
        assert!(!python.setup_hosts.is_empty());
        assert_ne!(python.setup_hosts, node.setup_hosts);
        assert!(python.agent_hosts.is_empty());
        assert!(resolve(&config, "o/r", None, Language::Base)
            .setup_hosts
            .is_empty());
    }

    #[test]
    fn limits_cap_timeouts_and_drop_hosts_outside_the_allowed_list() {
        let config = config_with(
            "repositories:\n  max_setup_timeout: 10m\n  allowed_hosts: ['*.example.org', 127.0.0.1]\n",
        );
        let file = parse_file(
            "setup_timeout: 2h\nnetwork:\n  setup: [pkgs.example.org, '*.cdn.example.org', other.example.com, 127.0.0.1]\n  agent: [example.org]\n",
        )
        .unwrap();
        let settings = resolve(&config, "o/r", Some(&file), Language::Python);
        assert_eq!(settings.setup_timeout, Duration::from_secs(600));
        let setup: Vec<String> = settings.setup_hosts.iter().map(ToString::to_string).collect();
        assert_eq!(setup, ["127.0.0.1", "pkgs.example.org", "*.cdn.example.org"]);
        assert!(settings.agent_hosts.is_empty());
        let notes = settings.notes.join("\n");
        assert!(
            notes.contains("capped") && notes.contains("other.example.com") && notes.contains("example.org")
        );
    }

    #[test]
    fn a_bad_file_names_the_key_the_value_and_what_is_accepted() {
        let cases = [
            ("setup: [\"\"]\n", "setup"),
            ("network:\n  setup: ['*']\n", "network.setup"),
            ("network:\n  agent: on\n", "network.agent"),
            ("tests: pytest\n", "tests"),
            ("setup_timeout: 10\n", "setup_timeout"),
            ("env:\n  GITHUB_TOKEN: x\n", "env.GITHUB_TOKEN"),
            ("instructions: [../secrets]\n", "instructions"),
        ];
        for (text, key) in cases {
            match parse_file(text) {
                Err(SettingsError::Invalid { key: got, message }) => {
                    assert_eq!(got, key, "{text}: {message}");
                    assert!(message.len() > 20, "{text}: {message}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            parse_file("setup: [a\n"),
            Err(SettingsError::Syntax { .. })
        ));
        let unknown = parse_file("tests: pytest\n").unwrap_err().to_string();
        assert!(unknown.contains("tests") && unknown.contains("test"), "{unknown}");
        assert_eq!(parse_file("").unwrap(), RepoFile::default());
    }

    #[test]
    fn by_default_a_repository_chooses_only_among_forgehands_own_images() {
        let default = config_with("");
        let own = parse_file("image: node\n").unwrap();
        assert_eq!(
            resolve(&default, "o/r", Some(&own), Language::Python)
                .image
                .as_deref(),
            Some("node")
        );
        let foreign = parse_file("image: registry.example.org/evil/toolbox:1\n").unwrap();
        let settings = resolve(&default, "o/r", Some(&foreign), Language::Python);
        assert_eq!(settings.image, None);
        assert!(settings.notes[0].contains("allow_image"), "{:?}", settings.notes);
        let open = config_with("repositories:\n  allow_image: true\n");
        assert_eq!(
            resolve(&open, "o/r", Some(&foreign), Language::Python)
                .image
                .as_deref(),
            Some("registry.example.org/evil/toolbox:1")
        );
    }

    #[test]
    fn a_repositorys_own_agent_hosts_need_the_operators_allowlist() {
        let file = parse_file("network:\n  agent: [api.example.org]\n").unwrap();
        let default = resolve(&config_with(""), "o/r", Some(&file), Language::Python);
        assert!(default.agent_hosts.is_empty());
        assert!(
            default.notes.join("\n").contains("repositories.allowed_hosts"),
            "{:?}",
            default.notes
        );
        let listed = config_with("repositories:\n  allowed_hosts: ['*.example.org']\n");
        let opened = resolve(&listed, "o/r", Some(&file), Language::Python);
        assert_eq!(
            opened.agent_hosts,
            [HostPattern::parse("api.example.org").unwrap()]
        );
        // The operator's own per-repository hosts need no second list.
        let operator = config_with(
            "repositories:\n  per_repository:\n    o/r:\n      network:\n        agent: [api.example.org]\n",
        );
        let by_operator = resolve(&operator, "o/r", None, Language::Python);
        assert_eq!(by_operator.agent_hosts.len(), 1);
    }

    #[test]
    fn a_port_off_the_operators_list_is_dropped() {
        let config =
            config_with("repositories:\n  allowed_hosts: ['*.example.org', 'db.example.org:5432']\n");
        let file = parse_file(
            "network:\n  setup: [pkgs.example.org, 'pkgs.example.org:22', 'db.example.org:5432']\n",
        )
        .unwrap();
        let settings = resolve(&config, "o/r", Some(&file), Language::Python);
        let setup: Vec<String> = settings.setup_hosts.iter().map(ToString::to_string).collect();
        assert_eq!(setup, ["db.example.org:5432", "pkgs.example.org"]);
        assert!(settings.notes.join("\n").contains("pkgs.example.org:22"));
    }

    #[test]
    fn the_operator_sets_attempts_per_repository_and_the_file_only_lowers_them() {
        let config = config_with(
            "agent:\n  attempts: 2\nrepositories:\n  per_repository:\n    acme/app:\n      attempts: 3\n",
        );
        assert_eq!(resolve(&config, "o/r", None, Language::Python).attempts, 2);
        assert_eq!(resolve(&config, "acme/app", None, Language::Python).attempts, 3);
        let lower = parse_file("attempts: 1\n").unwrap();
        let lowered = resolve(&config, "acme/app", Some(&lower), Language::Python);
        assert_eq!(lowered.attempts, 1);
        assert!(lowered.notes.is_empty(), "{:?}", lowered.notes);
        let higher = parse_file("attempts: 8\n").unwrap();
        let capped = resolve(&config, "acme/app", Some(&higher), Language::Python);
        assert_eq!(capped.attempts, 3);
        assert!(
            capped.notes.join("\n").contains("attempts: 8"),
            "{:?}",
            capped.notes
        );
        // Without any operator entry the file cannot pass `agent.attempts`.
        assert_eq!(
            resolve(&config, "o/r", Some(&higher), Language::Python).attempts,
            2
        );
        let defaults = config_with("repositories:\n  defaults:\n    attempts: 4\n");
        assert_eq!(resolve(&defaults, "o/r", None, Language::Python).attempts, 4);
        assert_eq!(
            resolve(&config_with(""), "o/r", None, Language::Python).attempts,
            1
        );
    }

    #[test]
    fn attempts_out_of_range_name_the_key() {
        for text in [
            "attempts: 0\n",
            "attempts: 9\n",
            "attempts: -1\n",
            "attempts: many\n",
        ] {
            match parse_file(text) {
                Err(SettingsError::Invalid { key, message }) => {
                    assert_eq!(key, "attempts", "{text}: {message}")
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        for (value, key) in [
            (
                "per_repository:\n    acme/app:\n      attempts: 9",
                "repositories.per_repository.acme/app.attempts",
            ),
            ("defaults:\n    attempts: 0", "repositories.defaults.attempts"),
        ] {
            let err = Config::from_yaml(
                &format!("repositories:\n  {value}\n"),
                std::path::Path::new("t.yaml"),
                std::path::Path::new("."),
                &|_| None,
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(key) && err.contains("1 (one attempt) to 8"), "{err}");
        }
    }
}
