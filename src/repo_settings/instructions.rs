//! Repository instructions: `AGENTS.md` at the root and in sub-folders (the
//! nearest one above a file applies to it, per the AGENTS.md convention);
//! without any, `CLAUDE.md` and `.github/copilot-instructions.md`; or the
//! files the settings name. Read from the base branch and bounded in tokens
//! for the agent's system prompt and the planners' request.

use crate::llm::tokens::count_text;
use crate::prompts::fill;

pub const AGENTS_FILE: &str = "AGENTS.md";
/// Read when the repository has no `AGENTS.md` anywhere.
pub const FALLBACK_FILES: &[&str] = &["CLAUDE.md", ".github/copilot-instructions.md"];

/// One instruction file, as it goes into the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstructionFile {
    pub path: String,
    pub text: String,
    /// The folder it applies to (`None`: the whole repository).
    pub scope: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions {
    pub files: Vec<InstructionFile>,
    /// Files cut or left out for the token budget.
    pub cut: Vec<String>,
    /// Named files that were missing, not text, or not UTF-8.
    pub skipped: Vec<String>,
}

impl Instructions {
    /// Gathers the instructions. `configured`: the settings' `instructions`
    /// (`None`: the defaults above); `read`: a file of the base branch;
    /// `agents_files`: every `AGENTS.md` path in the base branch.
    pub fn gather(
        configured: Option<&[String]>,
        read: &dyn Fn(&str) -> Option<Vec<u8>>,
        agents_files: &[String],
        budget_tokens: u64,
    ) -> Instructions {
        let mut paths: Vec<String> = match configured {
            Some(list) => list
                .iter()
                .map(|p| p.trim().trim_start_matches("./").to_owned())
                .collect(),
            None if !agents_files.is_empty() => agents_files.to_vec(),
            None => FALLBACK_FILES.iter().map(|p| (*p).to_owned()).collect(),
        };
        // The root first, then shallower folders before deeper ones.
        paths.sort_by_key(|p| (p.matches('/').count(), p.clone()));
        paths.dedup();
        let mut out = Instructions::default();
        let mut left = budget_tokens;
        for path in paths {
            let Some(bytes) = read(&path) else {
                if configured.is_some() {
                    out.skipped.push(format!("{path} (not on the default branch)"));
                }
                continue;
            };
            let Ok(text) = String::from_utf8(bytes) else {
                out.skipped.push(format!("{path} (not UTF-8 text)"));
                continue;
            };
            let text = text.trim().to_owned();
            if text.is_empty() {
                continue;
            }
            let scope = path
                .rsplit_once('/')
                .map(|(dir, _)| format!("{dir}/"))
                .filter(|_| path.ends_with(AGENTS_FILE));
            let tokens = count_text(&text) + 20;
            if left < 100 {
                out.cut.push(path);
                continue;
            }
            let text = if tokens > left {
                out.cut.push(path.clone());
                crate::context_store::synthesis::clip(&text, left.saturating_sub(20))
            } else {
                text
            };
            left = left.saturating_sub(count_text(&text) + 20);
            out.files.push(InstructionFile { path, text, scope });
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The prompt section from `template` (`{sources}`, `{instructions}`),
    /// or `None` when the repository gives none.
    pub fn render(&self, template: &str) -> Option<String> {
        if self.files.is_empty() {
            return None;
        }
        let sources = self
            .files
            .iter()
            .map(|f| format!("`{}`", f.path))
            .collect::<Vec<_>>()
            .join(", ");
        let mut body = String::new();
        for file in &self.files {
            body.push_str(&format!("### {}", file.path));
            if let Some(scope) = &file.scope {
                body.push_str(&format!(" (applies to files under `{scope}`)"));
            }
            body.push_str("\n\n");
            body.push_str(&file.text);
            body.push_str("\n\n");
        }
        if !self.cut.is_empty() {
            body.push_str(&format!(
                "[forgehand: for length, these are cut or left out: {}; read them in the project folder when they matter]\n",
                self.cut.join(", ")
            ));
        }
        Some(fill(
            template,
            &[("sources", &sources), ("instructions", body.trim_end())],
        ))
    }

    /// One line for the progress comment.
    pub fn summary(&self) -> Option<String> {
        if self.files.is_empty() && self.skipped.is_empty() {
            return None;
        }
        let mut line = format!(
            "Repository instructions: {}",
            if self.files.is_empty() {
                "none usable".to_owned()
            } else {
                self.files
                    .iter()
                    .map(|f| format!("`{}`", f.path))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        if !self.cut.is_empty() {
            line.push_str(&format!(" (cut for length: {})", self.cut.join(", ")));
        }
        if !self.skipped.is_empty() {
            line.push_str(&format!("; not read: {}", self.skipped.join(", ")));
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn files(entries: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        entries
            .iter()
            .map(|(p, t)| ((*p).to_owned(), t.as_bytes().to_vec()))
            .collect()
    }

    fn gather(tree: &BTreeMap<String, Vec<u8>>, configured: Option<&[String]>, budget: u64) -> Instructions {
        let agents: Vec<String> = tree
            .keys()
            .filter(|p| p.ends_with(AGENTS_FILE))
            .cloned()
            .collect();
        Instructions::gather(configured, &|p| tree.get(p).cloned(), &agents, budget)
    }

    #[test]
    fn agents_files_come_root_first_with_their_folders() {
        let tree = files(&[
            ("pkg/web/AGENTS.md", "Use npm run lint."),
            ("AGENTS.md", "Run make test."),
            ("CLAUDE.md", "ignored while AGENTS.md exists"),
        ]);
        let found = gather(&tree, None, 8000);
        let paths: Vec<&str> = found.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["AGENTS.md", "pkg/web/AGENTS.md"]);
        let text = found.render("{sources}\n{instructions}").unwrap();
        assert!(text.contains("(applies to files under `pkg/web/`)"), "{text}");
        assert!(!text.contains("ignored"));
    }

    #[test]
    fn without_agents_md_the_other_conventions_are_read() {
        let tree = files(&[
            ("CLAUDE.md", "Be terse."),
            (".github/copilot-instructions.md", "Use tabs."),
        ]);
        let found = gather(&tree, None, 8000);
        assert_eq!(found.files.len(), 2);
        assert!(gather(&files(&[]), None, 8000).render("{instructions}").is_none());
    }

    #[test]
    fn long_instructions_are_cut_with_a_note_and_named_files_are_reported() {
        let long = "Always run the full suite before committing. ".repeat(2000);
        let tree = files(&[("AGENTS.md", &long), ("docs/bin.md", "\u{0}\u{ff}")]);
        let found = gather(&tree, None, 1000);
        assert_eq!(found.cut, ["AGENTS.md"]);
        let text = found.render("{instructions}").unwrap();
        assert!(
            count_text(&text) < 1200 && text.contains("cut or left out"),
            "{}",
            count_text(&text)
        );
        let mut tree = tree;
        tree.insert("docs/bin.md".into(), vec![0xff, 0xfe]);
        let named = gather(
            &tree,
            Some(&["docs/bin.md".into(), "docs/missing.md".into()]),
            1000,
        );
        assert!(named.files.is_empty());
        assert_eq!(named.skipped.len(), 2);
        assert!(named.summary().unwrap().contains("docs/missing.md"));
    }
}
