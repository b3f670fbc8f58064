//! The system prompt, from the text files in `prompts/`: embedded in the
//! binary as defaults, each overridable by a file of the same name in the
//! configured prompts folder. Assembled in the order of seed 004 §7.3: the
//! editor section right after the command executor's, before the rules.

use std::path::{Path, PathBuf};

/// (file name, embedded default), in assembly order.
const FILES: [(&str, &str); 5] = [
    ("system_base.txt", include_str!("../../prompts/system_base.txt")),
    (
        "command_executor.txt",
        include_str!("../../prompts/command_executor.txt"),
    ),
    (
        "system_prompt_text_editor.txt",
        include_str!("../../prompts/system_prompt_text_editor.txt"),
    ),
    ("git_workflow.txt", include_str!("../../prompts/git_workflow.txt")),
    (
        "behavior_rules.txt",
        include_str!("../../prompts/behavior_rules.txt"),
    ),
];

#[derive(Debug, thiserror::Error)]
#[error("cannot read the prompt override {path}: {source}; fix or remove it to use the built-in text")]
pub struct PromptError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompts {
    base: String,
    command_executor: String,
    text_editor: String,
    git_workflow: String,
    behavior_rules: String,
}

impl Prompts {
    /// The embedded texts, with any file present in `dir` taking precedence.
    pub fn load(dir: Option<&Path>) -> Result<Prompts, PromptError> {
        let mut texts = Vec::with_capacity(FILES.len());
        for (name, default) in FILES {
            let text = match dir.map(|d| d.join(name)) {
                Some(path) if path.is_file() => {
                    std::fs::read_to_string(&path).map_err(|source| PromptError { path, source })?
                }
                _ => default.to_owned(),
            };
            texts.push(text.trim().to_owned());
        }
        let mut texts = texts.into_iter();
        let mut next = || texts.next().unwrap_or_default();
        Ok(Prompts {
            base: next(),
            command_executor: next(),
            text_editor: next(),
            git_workflow: next(),
            behavior_rules: next(),
        })
    }

    pub fn embedded() -> Prompts {
        // Reading no folder cannot fail.
        Prompts::load(None).unwrap_or_else(|e| unreachable!("{e}"))
    }

    /// The whole system prompt. Without the editor, its section and the
    /// editor-based git workflow are left out.
    pub fn system_prompt(&self, editor_enabled: bool) -> String {
        let mut sections = vec![self.base.as_str(), self.command_executor.as_str()];
        if editor_enabled {
            sections.push(&self.text_editor);
            sections.push(&self.git_workflow);
        }
        sections.push(&self.behavior_rules);
        sections.join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_come_in_the_order_of_the_specification() {
        let prompt = Prompts::embedded().system_prompt(true);
        let at = |needle: &str| prompt.find(needle).unwrap_or_else(|| panic!("{needle} missing"));
        assert!(at("## Command Executor") < at("## Text Editor Tool"));
        assert!(at("## Text Editor Tool") < at("## Git Workflow"));
        assert!(at("## Git Workflow") < at("## Behavior Rules"));
        let without = Prompts::embedded().system_prompt(false);
        assert!(!without.contains("## Text Editor Tool") && without.contains("## Behavior Rules"));
    }

    #[test]
    fn a_file_in_the_prompts_folder_overrides_its_section() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("behavior_rules.txt"),
            "## Behavior Rules\nBe brief.\n",
        )
        .unwrap();
        let prompt = Prompts::load(Some(dir.path())).unwrap().system_prompt(true);
        assert!(prompt.ends_with("## Behavior Rules\nBe brief."), "{prompt}");
    }
}
