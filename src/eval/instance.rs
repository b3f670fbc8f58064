//! Evaluation instances, as SWE-bench writes them (one JSON object a line),
//! with forgehand's one addition: the command that runs a named test.

use serde::{Deserialize, Deserializer, Serialize};
use std::path::Path;

/// Where a test's name goes in `test_command`; without it the name is
/// appended.
pub const TEST_PLACEHOLDER: &str = "{test}";

/// One instance: a repository at a commit, a problem, and the tests that
/// say whether it was solved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub instance_id: String,
    /// A path or URL git can clone.
    pub repo: String,
    pub base_commit: String,
    pub problem_statement: String,
    /// Tests that fail before the fix and must pass after it.
    #[serde(rename = "FAIL_TO_PASS", deserialize_with = "test_names")]
    pub fail_to_pass: Vec<String>,
    /// Tests that pass before and must still pass after.
    #[serde(rename = "PASS_TO_PASS", default, deserialize_with = "test_names")]
    pub pass_to_pass: Vec<String>,
    /// Runs one named test in the repository's folder: `{test}` is
    /// replaced by the (shell-quoted) name, else the name is appended.
    /// Exit code 0 is a pass.
    #[serde(default)]
    pub test_command: Option<String>,
    /// A diff applied over the model's patch before scoring (the tests
    /// the fix is judged by; the model never sees them).
    #[serde(default)]
    pub test_patch: Option<String>,
}

/// A line of the instances file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("cannot read the instances file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
    #[error("{path} holds no instance (one JSON object a line, as SWE-bench writes them)")]
    Empty { path: String },
}

/// SWE-bench's files hold the test lists as JSON text inside the JSON
/// (`"[\"tests/test_a.py::test_x\"]"`); others as plain arrays. Both are read.
fn test_names<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Names {
        List(Vec<String>),
        Text(String),
    }
    match Names::deserialize(deserializer)? {
        Names::List(list) => Ok(list),
        Names::Text(text) if text.trim().is_empty() => Ok(Vec::new()),
        Names::Text(text) => serde_json::from_str(&text).map_err(|e| {
            serde::de::Error::custom(format!(
                "a test list given as text must hold a JSON array of names: {e}"
            ))
        }),
    }
}

/// Reads every instance of `path`; `default_command` stands for a missing
/// `test_command`. Blank lines are skipped; the first bad line stops it,
/// named.
pub fn read(path: &Path, default_command: Option<&str>) -> Result<Vec<Instance>, InstanceError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| InstanceError::Read {
        path: shown.clone(),
        source,
    })?;
    let mut instances: Vec<Instance> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| InstanceError::Line {
            path: shown.clone(),
            line: index + 1,
            message,
        };
        let mut instance: Instance = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        if instance.test_command.is_none() {
            instance.test_command = default_command.map(str::to_owned);
        }
        check(&instance).map_err(bad)?;
        if instances.iter().any(|i| i.instance_id == instance.instance_id) {
            return Err(bad(format!(
                "instance_id \"{}\" comes twice; each instance needs its own",
                instance.instance_id
            )));
        }
        instances.push(instance);
    }
    if instances.is_empty() {
        return Err(InstanceError::Empty { path: shown });
    }
    Ok(instances)
}

fn check(instance: &Instance) -> Result<(), String> {
    let id = &instance.instance_id;
    if id.trim().is_empty() || id.chars().any(|c| c.is_control() || c == '/' || c == '\\') {
        return Err(format!(
            "instance_id {id:?} must be a non-empty name without slashes (it names files and folders)"
        ));
    }
    if instance.repo.trim().is_empty() {
        return Err(format!("{id}: `repo` is empty; give a path or URL to clone"));
    }
    let sha = instance.base_commit.trim();
    if sha.len() < 7 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "{id}: base_commit {:?} is not a commit id (hexadecimal, at least 7 digits)",
            instance.base_commit
        ));
    }
    if instance.problem_statement.trim().is_empty() {
        return Err(format!("{id}: problem_statement is empty"));
    }
    if instance.fail_to_pass.is_empty() {
        return Err(format!(
            "{id}: FAIL_TO_PASS is empty; name the tests a fix must make pass"
        ));
    }
    match &instance.test_command {
        Some(command) if !command.trim().is_empty() => Ok(()),
        _ => Err(format!(
            "{id}: no test_command; give one in the instance or --test-command (e.g. \"python -m pytest -q {TEST_PLACEHOLDER}\")"
        )),
    }
}

impl Instance {
    /// Where git fetches the repository from: `repo` as given, but
    /// SWE-bench's `owner/name` (when no such folder exists) is that
    /// GitHub repository.
    pub fn source(&self) -> String {
        let repo = self.repo.trim();
        let looks_like_name = repo.split('/').count() == 2 && !repo.starts_with('.') && !repo.contains(':');
        if looks_like_name && !Path::new(repo).exists() {
            format!("https://github.com/{repo}.git")
        } else {
            repo.to_owned()
        }
    }

    /// The repository's name as the operator's settings know it
    /// (`repositories.per_repository`, `images.pins`, budgets) and as its
    /// snapshots are keyed: a URL's host and path (`github.com/owner/name`,
    /// `gitlab.example.org:8443/group/app`), so repositories of the same
    /// path on two hosts share neither; a folder on this machine is
    /// `local/<folder>`.
    pub fn repository_name(&self) -> String {
        let source = self.source();
        let trim = |path: &str| path.trim_matches('/').trim_end_matches(".git").to_owned();
        if let Ok(url) = url::Url::parse(&source) {
            if let (false, Some(host)) = (url.scheme() == "file", url.host_str()) {
                let host = match url.port() {
                    Some(port) => format!("{host}:{port}"),
                    None => host.to_owned(),
                };
                return format!("{}/{}", host.to_ascii_lowercase(), trim(url.path()));
            }
        }
        // scp-like `git@host:owner/name.git`
        if let Some((user_host, path)) = source.split_once(':') {
            if let (Some((_, host)), false) = (user_host.split_once('@'), path.starts_with('/')) {
                return format!("{}/{}", host.to_ascii_lowercase(), trim(path));
            }
        }
        let folder = source.trim_start_matches("file://");
        let name = Path::new(folder.trim_end_matches('/'))
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".git").to_owned())
            .unwrap_or_else(|| "repository".to_owned());
        format!("local/{name}")
    }

    /// The issue the instance runs as: in its repository, numbered by its
    /// id (the same number in every run, so a run resumes its own task).
    pub fn item(&self) -> crate::forge::ItemRef {
        // FNV-1a: stable across runs and builds, unlike the std hasher.
        let hash = self.instance_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        crate::forge::ItemRef {
            forge: crate::forge::ForgeKind::Local,
            repo: self.repository_name(),
            kind: crate::forge::ItemKind::Issue,
            number: hash % 1_000_000_000 + 1,
        }
    }

    /// The command that runs the test `name`.
    pub fn command_for(&self, name: &str) -> String {
        let command = self.test_command.as_deref().unwrap_or_default();
        let quoted = crate::sandbox::command::shell_quote(name);
        if command.contains(TEST_PLACEHOLDER) {
            command.replace(TEST_PLACEHOLDER, &quoted)
        } else {
            format!("{command} {quoted}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn swe_bench_lines_read_with_their_test_lists_as_text() {
        let file = write(concat!(
            r#"{"instance_id": "a__b-1", "repo": "/r", "base_commit": "abcdef0", "problem_statement": "p", "FAIL_TO_PASS": "[\"t::x\"]", "PASS_TO_PASS": "[]", "hints_text": "", "version": "1.0"}"#,
            "\n\n",
            r#"{"instance_id": "a__b-2", "repo": "/r", "base_commit": "abcdef1", "problem_statement": "p", "FAIL_TO_PASS": ["t::y"], "test_command": "pytest {test}"}"#,
            "\n"
        ));
        let all = read(file.path(), Some("pytest -q")).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].fail_to_pass, vec!["t::x"]);
        assert!(all[0].pass_to_pass.is_empty());
        assert_eq!(all[0].command_for("t::x"), "pytest -q 't::x'");
        assert_eq!(all[1].command_for("t::y"), "pytest 't::y'");
    }

    #[test]
    fn repositories_are_named_by_host_and_path() {
        let named = |repo: &str| {
            Instance {
                repo: repo.into(),
                ..read_one()
            }
            .repository_name()
        };
        assert_eq!(named("acme/app"), "github.com/acme/app");
        assert_eq!(named("https://github.com/acme/app.git"), "github.com/acme/app");
        // The same path on another host is another repository.
        assert_eq!(
            named("https://GitLab.Example.org:8443/acme/app.git"),
            "gitlab.example.org:8443/acme/app"
        );
        assert_eq!(
            named("https://gitlab.example.org:443/acme/app"),
            "gitlab.example.org/acme/app"
        );
        assert_eq!(
            named("git@gitlab.example.org:group/sub/app.git"),
            "gitlab.example.org/group/sub/app"
        );
        assert_eq!(named("file:///srv/repos/app.git"), "local/app");
        assert_eq!(named("/srv/repos/app/"), "local/app");
        let item = |repo: &str| {
            Instance {
                repo: repo.into(),
                ..read_one()
            }
            .item()
        };
        let (github, gitlab) = (
            item("https://github.com/acme/app"),
            item("https://gitlab.example.org/acme/app"),
        );
        assert_ne!(github.key(), gitlab.key());
        assert_ne!(github.slug(), gitlab.slug());
    }

    /// One valid instance, to vary.
    fn read_one() -> Instance {
        let file = write(
            r#"{"instance_id": "a__b-1", "repo": "/r", "base_commit": "abcdef0", "problem_statement": "p", "FAIL_TO_PASS": ["t"], "test_command": "t"}"#,
        );
        read(file.path(), None).unwrap().remove(0)
    }

    #[test]
    fn a_bad_line_is_named_with_what_is_wrong() {
        let file = write(concat!(
            r#"{"instance_id": "x", "repo": "/r", "base_commit": "main", "problem_statement": "p", "FAIL_TO_PASS": ["t"], "test_command": "t"}"#,
            "\n"
        ));
        let err = read(file.path(), None).unwrap_err().to_string();
        assert!(
            err.contains("line 1") && err.contains("base_commit \"main\""),
            "{err}"
        );

        let file = write(
            r#"{"instance_id": "x", "repo": "/r", "base_commit": "abcdef0", "problem_statement": "p", "FAIL_TO_PASS": ["t"]}"#,
        );
        let err = read(file.path(), None).unwrap_err().to_string();
        assert!(err.contains("--test-command"), "{err}");

        let file = write("{\"instance_id\": \"x\"\n");
        let err = read(file.path(), None).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");

        let twice = r#"{"instance_id": "x", "repo": "/r", "base_commit": "abcdef0", "problem_statement": "p", "FAIL_TO_PASS": ["t"], "test_command": "t"}"#;
        let file = write(&format!("{twice}\n{twice}\n"));
        let err = read(file.path(), None).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("comes twice"), "{err}");

        let file = write("\n");
        assert!(matches!(
            read(file.path(), None),
            Err(InstanceError::Empty { .. })
        ));
    }
}
