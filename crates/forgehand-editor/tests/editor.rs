//! The editor's rules, command by command, over a real folder.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_editor::{Editor, EditorError, Limits, Root};
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

struct Fixture {
    _dir: tempfile::TempDir,
    _outside: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
    editor: Editor,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    let outside_path = fs::canonicalize(outside.path()).unwrap();
    fs::write(outside_path.join("secret.txt"), "secret\n").unwrap();
    symlink(&outside_path, root.join("escape")).unwrap();
    symlink(outside_path.join("secret.txt"), root.join("secret-link")).unwrap();
    let editor = Editor::new(Root::new(&root).unwrap(), Limits::default());
    Fixture {
        _dir: dir,
        _outside: outside,
        root,
        outside: outside_path,
        editor,
    }
}

impl Fixture {
    fn p(&self, relative: &str) -> String {
        format!("{}/{relative}", self.root.display())
    }
    fn call(&mut self, args: Value) -> Result<String, EditorError> {
        let Value::Object(map) = args else {
            panic!("arguments must be an object")
        };
        self.editor.execute_json(&map)
    }
    fn ok(&mut self, args: Value) -> String {
        self.call(args.clone())
            .unwrap_or_else(|e| panic!("{args} failed: {e}"))
    }
    fn err(&mut self, args: Value) -> String {
        match self.call(args.clone()) {
            Ok(out) => panic!("{args} should fail, got: {out}"),
            Err(e) => e.to_string(),
        }
    }
    fn write(&self, relative: &str, content: impl AsRef<[u8]>) {
        let path = self.root.join(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }
    fn read(&self, relative: &str) -> String {
        fs::read_to_string(self.root.join(relative)).unwrap()
    }
}

// --- paths ---------------------------------------------------------------

#[test]
fn a_symlink_out_of_the_root_is_refused_for_every_command() {
    let mut f = fixture();
    let calls = [
        json!({"command": "view", "path": f.p("escape/secret.txt")}),
        json!({"command": "view", "path": f.p("secret-link")}),
        json!({"command": "view", "path": f.p("escape")}),
        json!({"command": "create", "path": f.p("escape/new.txt"), "file_text": "x"}),
        json!({"command": "str_replace", "path": f.p("secret-link"), "old_str": "secret", "new_str": "pwned"}),
        json!({"command": "insert", "path": f.p("escape/secret.txt"), "insert_line": 0, "new_str": "pwned"}),
        json!({"command": "undo_edit", "path": f.p("secret-link")}),
    ];
    for call in calls {
        let err = f.err(call.clone());
        assert!(err.contains("outside the project folder"), "{call}: {err}");
    }
    assert_eq!(
        fs::read_to_string(f.outside.join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert!(!f.outside.join("new.txt").exists());
}

#[test]
fn dot_dot_escapes_and_relative_paths_are_refused() {
    let mut f = fixture();
    let escape = format!("{}/../../etc/passwd", f.root.display());
    assert!(f
        .err(json!({"command": "view", "path": escape}))
        .contains("outside"));
    assert!(f
        .err(json!({"command": "create", "path": f.p("a/../../x"), "file_text": ""}))
        .contains("outside"));
    assert!(f
        .err(json!({"command": "view", "path": "/etc/passwd"}))
        .contains("outside"));
    let err = f.err(json!({"command": "view", "path": "src/main.rs"}));
    assert!(
        err.contains("not an absolute path") && err.contains(&f.p("src/main.rs")),
        "{err}"
    );
    // `..` that stays inside is fine.
    f.write("src/lib.rs", "x\n");
    assert!(f
        .ok(json!({"command": "view", "path": f.p("src/../src/lib.rs")}))
        .contains("1\tx"));
}

// --- arguments -----------------------------------------------------------

#[test]
fn malformed_arguments_name_the_field() {
    let mut f = fixture();
    let cases = [
        (json!({}), "Missing `command`"),
        (
            json!({"command": "delete", "path": f.p("a")}),
            "Unknown command `delete`",
        ),
        (json!({"command": "view"}), "Missing `path`"),
        (
            json!({"command": 7, "path": f.p("a")}),
            "`command` must be a string",
        ),
        (
            json!({"command": "create", "path": f.p("a")}),
            "Missing `file_text`",
        ),
        (
            json!({"command": "str_replace", "path": f.p("a")}),
            "Missing `old_str`",
        ),
        (
            json!({"command": "insert", "path": f.p("a"), "new_str": "x"}),
            "Missing `insert_line`",
        ),
        (
            json!({"command": "insert", "path": f.p("a"), "insert_line": "two", "new_str": "x"}),
            "`insert_line` must be a whole number",
        ),
        (
            json!({"command": "view", "path": f.p("a"), "view_range": [1]}),
            "`view_range` must be two whole numbers",
        ),
        (
            json!({"command": "view", "path": f.p("a"), "view_range": "1-5"}),
            "`view_range` must be two whole numbers",
        ),
    ];
    for (args, expected) in cases {
        let err = f.err(args.clone());
        assert!(err.contains(expected), "{args}: {err}");
    }
    // `description` is accepted and ignored; numbers as strings are accepted.
    f.write("a", "one\ntwo\n");
    assert!(f
        .ok(json!({"command": "view", "path": f.p("a"), "description": "why", "view_range": ["2", "2"]}))
        .contains("2\ttwo"));
}

// --- view ----------------------------------------------------------------

#[test]
fn view_numbers_lines_like_cat_n_and_honours_view_range() {
    let mut f = fixture();
    f.write("f.txt", "alpha\nbeta\ngamma\ndelta\n");
    let out = f.ok(json!({"command": "view", "path": f.p("f.txt")}));
    assert!(
        out.ends_with("     1\talpha\n     2\tbeta\n     3\tgamma\n     4\tdelta\n"),
        "{out}"
    );
    let out = f.ok(json!({"command": "view", "path": f.p("f.txt"), "view_range": [2, 3]}));
    assert!(out.ends_with("     2\tbeta\n     3\tgamma\n"), "{out}");
    let out = f.ok(json!({"command": "view", "path": f.p("f.txt"), "view_range": [3, -1]}));
    assert!(out.ends_with("     3\tgamma\n     4\tdelta\n"), "{out}");
    for range in [json!([0, 2]), json!([5, 5]), json!([3, 2]), json!([1, 9])] {
        let err = f.err(json!({"command": "view", "path": f.p("f.txt"), "view_range": range}));
        assert!(err.contains("has 4 lines"), "{range}: {err}");
    }
}

#[test]
fn view_of_an_empty_file_japanese_text_and_invalid_utf8() {
    let mut f = fixture();
    f.write("empty.txt", "");
    assert!(f
        .ok(json!({"command": "view", "path": f.p("empty.txt")}))
        .contains("(the file is empty)"));
    f.write("ja.md", "# 見出し\n日本語のテキスト\n");
    let out = f.ok(json!({"command": "view", "path": f.p("ja.md")}));
    assert!(
        out.contains("     1\t# 見出し\n     2\t日本語のテキスト\n"),
        "{out}"
    );
    f.write("latin1.txt", b"caf\xe9\n");
    assert!(f
        .ok(json!({"command": "view", "path": f.p("latin1.txt")}))
        .contains("caf\u{fffd}"));
}

#[test]
fn view_refuses_a_binary_file() {
    let mut f = fixture();
    f.write("image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR");
    let err = f.err(json!({"command": "view", "path": f.p("image.png")}));
    assert!(err.contains("binary file"), "{err}");
}

#[test]
fn a_5_mb_view_is_clipped_with_a_marker_that_says_how_to_go_on() {
    let mut f = fixture();
    let line = "0123456789 the quick brown fox jumps over the lazy dog 0123456789\n";
    f.write("big.txt", line.repeat(5 * 1024 * 1024 / line.len()));
    let out = f.ok(json!({"command": "view", "path": f.p("big.txt")}));
    assert!(out.len() <= 16 * 1024 + 512, "{} bytes", out.len());
    assert!(
        out.contains("<response clipped: showed lines 1-") && out.contains("view_range"),
        "{}",
        &out[out.len() - 300..]
    );
    let out = f.ok(json!({"command": "view", "path": f.p("big.txt"), "view_range": [70000, 70002]}));
    assert!(out.contains(" 70000\t0123") && out.contains(" 70002\t"), "{out}");
}

#[test]
fn view_of_a_folder_lists_two_levels_sorted_without_hidden_entries() {
    let mut f = fixture();
    f.write("src/main.rs", "");
    f.write("src/deep/er/file.rs", "");
    f.write(".git/config", "");
    f.write("src/.hidden", "");
    f.write("README.md", "");
    let out = f.ok(json!({"command": "view", "path": f.root.display().to_string()}));
    let base = f.root.display().to_string();
    let listed: Vec<&str> = out.lines().skip(2).collect();
    assert_eq!(
        listed,
        vec![
            format!("{base}/README.md"),
            format!("{base}/escape/"),
            format!("{base}/secret-link"),
            format!("{base}/src/"),
            format!("{base}/src/deep/"),
            format!("{base}/src/main.rs"),
        ]
    );
    assert!(!out.contains(".git") && !out.contains(".hidden") && !out.contains("er/file.rs"));
}

// --- create --------------------------------------------------------------

#[test]
fn create_makes_parents_and_never_overwrites() {
    let mut f = fixture();
    let out = f.ok(json!({"command": "create", "path": f.p("new/dir/a.py"), "file_text": "print('hi')\n"}));
    assert!(out.contains("File created successfully"));
    assert_eq!(f.read("new/dir/a.py"), "print('hi')\n");
    let err = f.err(json!({"command": "create", "path": f.p("new/dir/a.py"), "file_text": "other"}));
    assert!(
        err.contains("already exists") && err.contains("str_replace"),
        "{err}"
    );
    assert_eq!(f.read("new/dir/a.py"), "print('hi')\n");
    assert!(f
        .err(json!({"command": "create", "path": f.p("new"), "file_text": ""}))
        .contains("a folder already exists"));
    f.ok(json!({"command": "create", "path": f.p("empty.txt"), "file_text": ""}));
    assert_eq!(fs::metadata(f.root.join("empty.txt")).unwrap().len(), 0);
}

// --- str_replace ---------------------------------------------------------

#[test]
fn str_replace_needs_exactly_one_occurrence() {
    let mut f = fixture();
    f.write("a.rs", "let x = 1;\nlet y = 2;\nlet x = 1;\n");
    let err = f
        .err(json!({"command": "str_replace", "path": f.p("a.rs"), "old_str": "let x = 1;", "new_str": "z"}));
    assert!(
        err.contains("appears 2 times") && err.contains("lines 1, 3"),
        "{err}"
    );
    let err =
        f.err(json!({"command": "str_replace", "path": f.p("a.rs"), "old_str": "let w", "new_str": "z"}));
    assert!(err.contains("does not appear verbatim"), "{err}");
    let err = f.err(json!({"command": "str_replace", "path": f.p("a.rs"), "old_str": "", "new_str": "z"}));
    assert!(err.contains("`old_str` is empty"), "{err}");
    let out = f.ok(json!({"command": "str_replace", "path": f.p("a.rs"), "old_str": "let y = 2;", "new_str": "let y = 3;"}));
    assert!(
        out.contains("     2\tlet y = 3;") && out.contains("has been edited"),
        "{out}"
    );
    assert_eq!(f.read("a.rs"), "let x = 1;\nlet y = 3;\nlet x = 1;\n");
    assert!(f
        .err(json!({"command": "str_replace", "path": f.p("nope.rs"), "old_str": "a"}))
        .contains("does not exist"));
}

#[test]
fn replacement_is_literal_and_new_str_may_be_empty() {
    let mut f = fixture();
    f.write("a.js", "const price = 10;\n// remove me\n");
    f.ok(json!({"command": "str_replace", "path": f.p("a.js"), "old_str": "10", "new_str": "$& $1 $$ ${x}"}));
    assert_eq!(f.read("a.js"), "const price = $& $1 $$ ${x};\n// remove me\n");
    f.ok(json!({"command": "str_replace", "path": f.p("a.js"), "old_str": "// remove me\n", "new_str": ""}));
    assert_eq!(f.read("a.js"), "const price = $& $1 $$ ${x};\n");
}

#[test]
fn crlf_files_keep_their_line_endings() {
    let mut f = fixture();
    f.write("win.txt", "one\r\ntwo\r\nthree\r\n");
    // The model writes \n; the CRLF file still matches and stays CRLF.
    f.ok(json!({"command": "str_replace", "path": f.p("win.txt"), "old_str": "one\ntwo", "new_str": "uno\ndos"}));
    assert_eq!(f.read("win.txt"), "uno\r\ndos\r\nthree\r\n");
    f.ok(
        json!({"command": "insert", "path": f.p("win.txt"), "insert_line": 1, "new_str": "inserted\nlines"}),
    );
    assert_eq!(f.read("win.txt"), "uno\r\ninserted\r\nlines\r\ndos\r\nthree\r\n");
    // Exact CRLF text matches as written too.
    f.ok(
        json!({"command": "str_replace", "path": f.p("win.txt"), "old_str": "dos\r\n", "new_str": "two\r\n"}),
    );
    assert_eq!(f.read("win.txt"), "uno\r\ninserted\r\nlines\r\ntwo\r\nthree\r\n");
}

#[test]
fn japanese_text_is_replaced_and_inserted_intact() {
    let mut f = fixture();
    f.write("ja.txt", "こんにちは世界\nさようなら\n");
    f.ok(json!({"command": "str_replace", "path": f.p("ja.txt"), "old_str": "世界", "new_str": "皆さん"}));
    f.ok(json!({"command": "insert", "path": f.p("ja.txt"), "insert_line": 2, "new_str": "またね\n"}));
    assert_eq!(f.read("ja.txt"), "こんにちは皆さん\nさようなら\nまたね\n");
}

#[test]
fn editing_a_binary_file_is_refused() {
    let mut f = fixture();
    f.write("blob.bin", b"abc\x00def");
    assert!(f
        .err(json!({"command": "str_replace", "path": f.p("blob.bin"), "old_str": "abc", "new_str": "x"}))
        .contains("binary"));
    assert!(f
        .err(json!({"command": "insert", "path": f.p("blob.bin"), "insert_line": 0, "new_str": "x"}))
        .contains("binary"));
}

// --- insert --------------------------------------------------------------

#[test]
fn insert_at_top_middle_end_and_out_of_range() {
    let mut f = fixture();
    f.write("l.txt", "a\nb");
    f.ok(json!({"command": "insert", "path": f.p("l.txt"), "insert_line": 0, "new_str": "top"}));
    assert_eq!(f.read("l.txt"), "top\na\nb");
    f.ok(json!({"command": "insert", "path": f.p("l.txt"), "insert_line": 2, "new_str": "mid\n"}));
    assert_eq!(f.read("l.txt"), "top\na\nmid\nb");
    f.ok(json!({"command": "insert", "path": f.p("l.txt"), "insert_line": 4, "new_str": "end"}));
    assert_eq!(f.read("l.txt"), "top\na\nmid\nb\nend\n");
    for bad in [-1, 6] {
        let err =
            f.err(json!({"command": "insert", "path": f.p("l.txt"), "insert_line": bad, "new_str": "x"}));
        assert!(err.contains("between 0 and 5"), "{bad}: {err}");
    }
    f.write("empty.txt", "");
    f.ok(json!({"command": "insert", "path": f.p("empty.txt"), "insert_line": 0, "new_str": "first"}));
    assert_eq!(f.read("empty.txt"), "first\n");
}

// --- undo_edit -----------------------------------------------------------

#[test]
fn undo_reverts_each_kind_of_edit_and_says_when_there_is_nothing() {
    let mut f = fixture();
    let err = f.err(json!({"command": "undo_edit", "path": f.p("u.txt")}));
    assert!(err.contains("No edit to undo"), "{err}");

    f.ok(json!({"command": "create", "path": f.p("u.txt"), "file_text": "one\ntwo\n"}));
    f.ok(json!({"command": "str_replace", "path": f.p("u.txt"), "old_str": "two", "new_str": "TWO"}));
    f.ok(json!({"command": "insert", "path": f.p("u.txt"), "insert_line": 0, "new_str": "zero"}));
    assert_eq!(f.read("u.txt"), "zero\none\nTWO\n");

    f.ok(json!({"command": "undo_edit", "path": f.p("u.txt")}));
    assert_eq!(f.read("u.txt"), "one\nTWO\n", "insert undone");
    f.ok(json!({"command": "undo_edit", "path": f.p("u.txt")}));
    assert_eq!(f.read("u.txt"), "one\ntwo\n", "str_replace undone");
    let out = f.ok(json!({"command": "undo_edit", "path": f.p("u.txt")}));
    assert!(out.contains("removed"), "{out}");
    assert!(!Path::new(&f.p("u.txt")).exists(), "create undone");
    assert!(f
        .err(json!({"command": "undo_edit", "path": f.p("u.txt")}))
        .contains("No edit to undo"));
}

#[test]
fn failed_edits_leave_no_undo_step() {
    let mut f = fixture();
    f.write("k.txt", "same\nsame\n");
    f.err(json!({"command": "str_replace", "path": f.p("k.txt"), "old_str": "same", "new_str": "x"}));
    assert!(f
        .err(json!({"command": "undo_edit", "path": f.p("k.txt")}))
        .contains("No edit to undo"));
    assert_eq!(f.read("k.txt"), "same\nsame\n");
}
