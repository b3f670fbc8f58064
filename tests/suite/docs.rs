//! The book (`docs/`) and the README hold together: every page is in the
//! book's table of contents and every page there exists, and every relative
//! link and anchor in them leads somewhere. `scripts/test` also builds the
//! book with mdBook.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support as common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every Markdown file under `dir`.
fn pages(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(pages(&path));
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// The text outside fenced code blocks and inline code.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || line.starts_with("    ") {
            continue;
        }
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// Targets of `[text](target)` links.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut found = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                found.push(after[..end].trim().to_owned());
                rest = &after[end..];
            }
            None => break,
        }
    }
    found
}

/// The anchors mdBook gives a page's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim().to_lowercase();
        let slug: String = title
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        out.insert(slug);
    }
    out
}

/// Broken relative links of `page`, as "page: target (why)".
fn broken_links(root: &Path, page: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(page).unwrap();
    let mut broken = Vec::new();
    for target in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            broken.push(format!(
                "{}: {target} (the docs link only within the repository)",
                page.display()
            ));
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let resolved = if file.is_empty() {
            page.to_owned()
        } else {
            page.parent().unwrap().join(file)
        };
        if !resolved.exists() {
            broken.push(format!("{}: {target} (no such file)", page.display()));
            continue;
        }
        if !resolved.starts_with(root) {
            broken.push(format!("{}: {target} (outside the repository)", page.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            let heads = anchors(&std::fs::read_to_string(&resolved).unwrap_or_default());
            if !heads.contains(anchor) {
                broken.push(format!(
                    "{}: {target} (no heading gives #{anchor})",
                    page.display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_page_is_in_the_summary_and_every_summary_entry_exists() {
    let src = common::repo_root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary).iter().map(|l| src.join(l)).collect();
    let on_disk: BTreeSet<PathBuf> = pages(&src)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "SUMMARY.md"))
        .collect();
    let missing: Vec<_> = listed.difference(&on_disk).collect();
    let unlisted: Vec<_> = on_disk.difference(&listed).collect();
    assert!(missing.is_empty(), "in SUMMARY.md but not on disk: {missing:?}");
    assert!(
        unlisted.is_empty(),
        "pages SUMMARY.md does not list: {unlisted:?}"
    );
}

#[test]
fn every_relative_link_and_anchor_of_the_book_and_the_readme_leads_somewhere() {
    let root = common::repo_root();
    let mut all = pages(&root.join("docs/src"));
    all.push(root.join("README.md"));
    let broken: Vec<String> = all.iter().flat_map(|p| broken_links(&root, p)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_checker_finds_what_is_broken() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("a.md"), "# A page\n\n## Part two\n").unwrap();
    let page = root.join("b.md");
    std::fs::write(
        &page,
        "[ok](a.md) [ok](a.md#part-two) [gone](c.md) [bad](a.md#part-three) [web](https://example.org)\n`[code](x.md)`\n",
    )
    .unwrap();
    let broken = broken_links(root, &page);
    assert_eq!(broken.len(), 3, "{broken:?}");
    assert!(broken[0].contains("c.md (no such file)"));
    assert!(broken[1].contains("#part-three"));
    assert!(broken[2].contains("within the repository"));
}
