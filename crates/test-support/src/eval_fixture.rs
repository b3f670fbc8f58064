//! A small evaluation: a Python repository with two commits (`add()`
//! subtracts, then multiplies), instances on them, the hidden tests that
//! judge them, and a scripted model whose fix only fits the first bug.

use crate::scripted_model::{call, run, text, TurnModel};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

const CALC_BUGGY: &str = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n";
const CALC_OTHER_BUG: &str = "def add(a, b):\n    return a * b\n\n\ndef sub(a, b):\n    return a - b\n";

/// The tests the fix is judged by: the model never sees them.
pub const TEST_PATCH: &str = "diff --git a/test_calc.py b/test_calc.py
new file mode 100644
--- /dev/null
+++ b/test_calc.py
@@ -0,0 +1,10 @@
+import unittest
+from calc import add, sub
+
+
+class Calc(unittest.TestCase):
+    def test_add(self):
+        self.assertEqual(add(2, 3), 5)
+
+    def test_sub(self):
+        self.assertEqual(sub(5, 3), 2)
";

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").current_dir(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with two commits: `calc.py` with one bug, then another.
pub fn source_repository(dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "t"]);
    git(dir, &["config", "user.email", "t@example.invalid"]);
    std::fs::write(dir.join("requirements.txt"), "").unwrap();
    std::fs::write(dir.join("calc.py"), CALC_BUGGY).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "calc"]);
    let first = git(dir, &["rev-parse", "HEAD"]);
    std::fs::write(dir.join("calc.py"), CALC_OTHER_BUG).unwrap();
    git(dir, &["commit", "-qam", "another bug"]);
    let second = git(dir, &["rev-parse", "HEAD"]);
    (first, second)
}

pub fn instance(id: &str, repo: &Path, base: &str, test_command: &str) -> Value {
    json!({
        "instance_id": id,
        "repo": repo.display().to_string(),
        "base_commit": base,
        "problem_statement": "add() subtracts\n\nadd(2, 3) should be 5.",
        "FAIL_TO_PASS": "[\"test_calc.Calc.test_add\"]",
        "PASS_TO_PASS": ["test_calc.Calc.test_sub"],
        "test_patch": TEST_PATCH,
        "test_command": test_command,
        "version": "0.1",
    })
}

/// The scripted model: the same turns for every instance (planning
/// answered too); its replacement only fits the first bug.
pub async fn model() -> TurnModel {
    TurnModel::start_with_plan(
        vec![
            (
                call(
                    "text_editor_str_replace",
                    json!({"path": "/workspace/project/calc.py", "old_str": "def add(a, b):\n    return a - b", "new_str": "def add(a, b):\n    return a + b"}),
                ),
                None,
            ),
            (run("git add -A && git commit -qm 'Fix add' || echo nothing to commit"), None),
            (text("add() adds now."), None),
        ],
        Some("1. Make add() return a + b in calc.py.".to_owned()),
    )
    .await
}
