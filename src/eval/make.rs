//! `forgehand eval make`: evaluation instances from a repository's own
//! history. An issue closed by a merged PR/MR that changed tests becomes an
//! instance: the PR's base commit, the issue as the problem statement, the
//! PR's test changes as `test_patch` (kept from the model) and its other
//! changes as the reference `patch`. The tests are the changed test files,
//! each run by the test command (`{test}` is the file's path).

use super::instance::TEST_PLACEHOLDER;
use crate::forge::history::{ClosedByChange, FileStatus, History};
use crate::forge::{ForgeError, Timestamp};
use serde::Serialize;

/// An instance as written: SWE-bench's fields, forgehand's `test_command`,
/// and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MadeInstance {
    pub instance_id: String,
    pub repo: String,
    pub base_commit: String,
    pub problem_statement: String,
    /// The merged change without its tests: the reference solution.
    pub patch: String,
    pub test_patch: String,
    #[serde(rename = "FAIL_TO_PASS")]
    pub fail_to_pass: Vec<String>,
    #[serde(rename = "PASS_TO_PASS")]
    pub pass_to_pass: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_command: Option<String>,
    pub created_at: String,
    pub issue_number: u64,
    pub change_number: u64,
}

/// What `eval make` found: the instances, and each closed issue left out
/// with why.
#[derive(Debug, Default)]
pub struct Made {
    pub instances: Vec<MadeInstance>,
    pub skipped: Vec<String>,
}

/// Parses `--since`: a day (`2026-01-31`) or an RFC 3339 instant.
pub fn parse_since(text: &str) -> Result<Timestamp, String> {
    let text = text.trim();
    if let Some(at) = crate::forge::parse_time(Some(text)) {
        return Ok(at);
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|day| day.and_hms_opt(0, 0, 0))
        .map(|at| at.and_utc())
        .ok_or_else(|| format!("--since {text:?} is not a day (YYYY-MM-DD) or an RFC 3339 time"))
}

/// The instances of `repo` (cloned from `clone_url`) closed since `since`.
pub async fn make(
    history: &dyn History,
    (repo, clone_url): (&str, &str),
    since: Timestamp,
    test_command: Option<&str>,
) -> Result<Made, ForgeError> {
    let mut made = Made::default();
    for closed in history.closed_by_changes(repo, since).await? {
        match instance_of(repo, clone_url, &closed, test_command) {
            Ok(instance) => made.instances.push(instance),
            Err(why) => made
                .skipped
                .push(format!("#{} (closed by {}): {why}", closed.issue, closed.change)),
        }
    }
    Ok(made)
}

fn instance_of(
    repo: &str,
    clone_url: &str,
    closed: &ClosedByChange,
    test_command: Option<&str>,
) -> Result<MadeInstance, String> {
    let (tests, code): (Vec<_>, Vec<_>) = closed.files.iter().partition(|f| is_test_path(&f.path));
    let tests: Vec<_> = tests.into_iter().filter(|f| f.unified().is_some()).collect();
    if tests.is_empty() {
        return Err("its change touched no test (as text)".into());
    }
    let fail_to_pass: Vec<String> = tests
        .iter()
        .filter(|f| f.status != FileStatus::Removed)
        .map(|f| f.path.clone())
        .collect();
    if fail_to_pass.is_empty() {
        return Err("its change only removed tests".into());
    }
    let patch: String = code.iter().filter_map(|f| f.unified()).collect();
    if patch.is_empty() {
        return Err("its change had nothing but tests".into());
    }
    Ok(MadeInstance {
        instance_id: format!("{}-{}", repo.replace('/', "__"), closed.issue),
        repo: clone_url.to_owned(),
        base_commit: closed.base_sha.clone(),
        problem_statement: format!("{}\n\n{}", closed.title.trim(), closed.body.trim()),
        patch,
        test_patch: tests.iter().filter_map(|f| f.unified()).collect(),
        fail_to_pass,
        pass_to_pass: Vec::new(),
        test_command: test_command.map(str::to_owned),
        created_at: closed
            .closed_at
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        issue_number: closed.issue,
        change_number: closed.change,
    })
}

/// Whether `path` is a test by the usual conventions: a folder named for
/// tests, or a file named so (`test_x.py`, `x_test.go`, `x.test.ts`,
/// `x.spec.js`, `XTest.java`, `x_spec.rb`).
pub fn is_test_path(path: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    let file = parts.pop().unwrap_or_default();
    if parts
        .iter()
        .any(|p| matches!(*p, "test" | "tests" | "__tests__" | "spec" | "specs" | "testing"))
    {
        return true;
    }
    let stem = file.split('.').next().unwrap_or_default();
    let lower = file.to_ascii_lowercase();
    stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || stem.ends_with("Test")
        || stem.ends_with("Tests")
        || lower.contains(".test.")
        || lower.contains(".spec.")
}

/// The hint printed when instances have no test command.
pub fn test_command_hint() -> String {
    format!("give --test-command (e.g. \"python3 -m pytest -q {TEST_PLACEHOLDER}\"), or add `test_command` to each instance before running them")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::history::ChangedFile;

    #[test]
    fn test_files_are_known_by_their_folders_and_names() {
        for path in [
            "tests/test_calc.py",
            "pkg/calc_test.go",
            "src/__tests__/a.js",
            "web/a.spec.ts",
            "src/test/java/CalcTest.java",
            "spec/calc_spec.rb",
            "test_calc.py",
        ] {
            assert!(is_test_path(path), "{path}");
        }
        for path in ["calc.py", "src/contest.rs", "docs/testing.md", "latest.py"] {
            assert!(!is_test_path(path), "{path}");
        }
    }

    #[test]
    fn a_closed_issue_becomes_an_instance_with_its_tests_kept_apart() {
        let file = |path: &str, status, hunks: &str| ChangedFile {
            path: path.into(),
            old_path: None,
            status,
            hunks: Some(hunks.into()),
        };
        let closed = ClosedByChange {
            issue: 4,
            title: "add() subtracts".into(),
            body: "It should add.".into(),
            closed_at: parse_since("2026-03-01").unwrap(),
            change: 5,
            base_sha: "abc1234".into(),
            files: vec![
                file("calc.py", FileStatus::Modified, "@@ -1 +1 @@\n-a - b\n+a + b\n"),
                file(
                    "tests/test_calc.py",
                    FileStatus::Added,
                    "@@ -0,0 +1 @@\n+assert True\n",
                ),
            ],
        };
        let made = instance_of(
            "acme/app",
            "https://forge.invalid/acme/app.git",
            &closed,
            Some("pytest {test}"),
        )
        .unwrap();
        assert_eq!(made.instance_id, "acme__app-4");
        assert_eq!(made.fail_to_pass, vec!["tests/test_calc.py"]);
        assert!(made.patch.starts_with("diff --git a/calc.py b/calc.py\n"));
        assert!(made.test_patch.contains("+++ b/tests/test_calc.py"));
        assert!(!made.patch.contains("test_calc"));
        assert_eq!(made.problem_statement, "add() subtracts\n\nIt should add.");

        let untested = ClosedByChange {
            files: vec![closed.files[0].clone()],
            ..closed.clone()
        };
        assert!(instance_of("acme/app", "u", &untested, None).is_err());
        assert!(parse_since("last week").is_err());
    }
}
