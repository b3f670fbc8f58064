//! Packing golden tests: nested .gitignore files and .git/info/exclude
//! honoured; hidden, binary, non-UTF-8 and oversized files reported; a fixed
//! order; the exact token count; paths outside the root refused; and what a
//! task packs when the checkout is over its budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand::llm::tokens::count_text;
use forgehand::planning::pack::{self, PackError, PackOptions, SkipReason};
use forgehand::planning::select;
use std::path::Path;

fn write(root: &Path, path: &str, bytes: &[u8]) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    write(r, ".gitignore", b"target/\n*.log\n");
    write(r, ".git/info/exclude", b"excluded.rs\n");
    write(r, ".git/HEAD", b"ref: refs/heads/main\n");
    write(r, "README.md", b"# demo\n");
    write(r, "src/main.rs", b"fn main() {\n    demo::run();\n}\n");
    write(r, "src/lib.rs", b"pub fn run() {}");
    write(r, "src/.hidden_notes", b"secret plans\n");
    write(r, ".env", b"TOKEN=x\n");
    write(r, ".config/settings.toml", b"a = 1\n");
    write(r, "target/debug/out.txt", b"build output\n");
    write(r, "app.log", b"log line\n");
    write(r, "excluded.rs", b"// excluded by .git/info/exclude\n");
    write(r, "sub/.gitignore", b"gen/\nsecret.txt\n");
    write(r, "sub/gen/a.rs", b"// generated\n");
    write(r, "sub/secret.txt", b"nested ignore\n");
    write(r, "sub/ok.rs", b"// kept\n");
    write(r, "image.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR");
    write(r, "big.txt", &vec![b'x'; 2000]);
    write(r, "latin1.txt", b"caf\xe9\n");
    dir
}

const OPTIONS: PackOptions = PackOptions { max_file_bytes: 1000 };

#[test]
fn a_tree_packs_to_the_expected_xml_with_every_skip_reported() {
    let dir = tree();
    let packed = pack::pack(dir.path(), &[".".into()], OPTIONS).unwrap();
    let expected = "<documents>\n\
<document index=\"1\">\n<source>README.md</source>\n<document_content>\n# demo\n</document_content>\n</document>\n\
<document index=\"2\">\n<source>src/lib.rs</source>\n<document_content>\npub fn run() {}\n</document_content>\n</document>\n\
<document index=\"3\">\n<source>src/main.rs</source>\n<document_content>\nfn main() {\n    demo::run();\n}\n</document_content>\n</document>\n\
<document index=\"4\">\n<source>sub/ok.rs</source>\n<document_content>\n// kept\n</document_content>\n</document>\n\
</documents>";
    assert_eq!(packed.xml, expected);
    assert_eq!(packed.tokens, count_text(&packed.xml), "the count is exact");
    let skipped: Vec<(String, String)> = packed
        .skipped
        .iter()
        .map(|s| (s.path.clone(), s.reason.to_string()))
        .collect();
    let expect = |p: &str, r: &str| (p.to_owned(), r.to_owned());
    assert_eq!(
        skipped,
        vec![
            expect(".config", "hidden"),
            expect(".env", "hidden"),
            expect(".gitignore", "hidden"),
            expect("big.txt", "2000 bytes, over the limit of 1000"),
            expect("image.png", "binary"),
            expect("latin1.txt", "not UTF-8 text"),
            expect("src/.hidden_notes", "hidden"),
            expect("sub/.gitignore", "hidden"),
        ]
    );
    assert_eq!(packed.files.len(), 4);
    assert_eq!(
        packed.files.iter().map(|f| f.tokens).sum::<u64>()
            + count_text("<documents>\n")
            + count_text("</documents>"),
        packed.tokens
    );
}

#[test]
fn the_order_is_the_same_every_time_and_explicit_paths_win_over_ignores() {
    let dir = tree();
    let paths = vec!["sub".to_owned(), "src/main.rs".to_owned(), "app.log".to_owned()];
    let first = pack::pack(dir.path(), &paths, OPTIONS).unwrap();
    for _ in 0..5 {
        assert_eq!(pack::pack(dir.path(), &paths, OPTIONS).unwrap(), first);
    }
    let sources: Vec<&str> = first.files.iter().map(|f| f.path.as_str()).collect();
    // app.log is ignored by .gitignore, but it was asked for by name.
    assert_eq!(sources, ["app.log", "src/main.rs", "sub/ok.rs"]);
}

#[test]
fn paths_outside_the_root_are_refused_with_the_path_named() {
    let dir = tree();
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "secret.txt", b"outside\n");
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    for bad in ["../etc", "/etc/passwd", "link/secret.txt", "link"] {
        let err = pack::pack(dir.path(), &[bad.to_owned()], OPTIONS).unwrap_err();
        assert!(matches!(err, PackError::OutsideRoot { .. }), "{bad}: {err}");
        assert!(err.to_string().contains(bad), "{err}");
    }
    let err = pack::pack(dir.path(), &["nope.rs".into()], OPTIONS).unwrap_err();
    assert!(matches!(err, PackError::NotFound { .. }), "{err}");
    assert!(matches!(
        pack::pack(dir.path(), &[], OPTIONS),
        Err(PackError::NoPaths)
    ));
    // Walking the root does not follow the link out either.
    let packed = pack::pack(dir.path(), &[".".into()], OPTIONS).unwrap();
    assert!(!packed.xml.contains("outside"));
}

#[test]
fn a_checkout_over_the_budget_packs_what_the_request_points_at() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    for i in 0..40 {
        let body = format!("// module {i}\n{}", "fn filler() { let x = 1 + 2; }\n".repeat(40));
        write(r, &format!("src/m{i:02}.rs"), body.as_bytes());
    }
    write(r, "src/parser/cli.rs", b"pub fn parse_flags() {}\n");
    write(r, "src/parser/lexer.rs", b"pub fn tokens() {}\n");
    write(r, "src/engine.rs", b"pub struct RetryPolicy;\n");
    let request = "Add a --verbose flag in cli.rs and make `RetryPolicy` log its waits.";
    let budget = 3_000;
    let whole = select::for_task(r, request, 1_000_000, PackOptions::default()).unwrap();
    assert!(whole.whole && whole.left_out.is_empty());
    assert!(
        whole.packed.tokens > budget,
        "the test tree must be over the budget"
    );

    let selection = select::for_task(r, request, budget, PackOptions::default()).unwrap();
    assert!(!selection.whole);
    assert!(
        selection.packed.tokens <= budget,
        "{} > {budget}",
        selection.packed.tokens
    );
    assert_eq!(selection.packed.tokens, count_text(&selection.packed.xml));
    let sources: Vec<&str> = selection.packed.files.iter().map(|f| f.path.as_str()).collect();
    for wanted in [
        "src/parser/cli.rs",
        "src/engine.rs",
        "src/parser/lexer.rs",
        select::LEFT_OUT_SOURCE,
    ] {
        assert!(sources.contains(&wanted), "{wanted} missing from {sources:?}");
    }
    assert!(!selection.left_out.is_empty());
    // The files left out are listed for the models (up to a tenth of the
    // budget, then counted) and every one is reported.
    let listed = selection
        .left_out
        .iter()
        .filter(|p| selection.packed.xml.contains(p.as_str()))
        .count();
    assert!(listed > 0);
    if listed < selection.left_out.len() {
        let more = format!("... and {} more", selection.left_out.len() - listed);
        assert!(selection.packed.xml.contains(&more), "{more}");
    }
    for path in &selection.left_out {
        assert!(selection
            .packed
            .skipped
            .iter()
            .any(|s| &s.path == path && matches!(s.reason, SkipReason::OverBudget { .. })));
    }
}
