//! Every text forgehand sends to a model, from the files in `prompts/`:
//! embedded in the binary as defaults, each overridable by a file at the
//! same relative path in the configured folder (`agent.prompts_dir`), for
//! example `sage/judge.txt` or `context/synthesis.txt`. The texts are
//! English; each tells the model to write in the issue's language.

use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
#[error("cannot read the prompt override {path}: {source}; fix or remove it to use the built-in text")]
pub struct PromptError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// The override of `path` in `dir` when there is one, else `default`.
fn read(dir: Option<&Path>, path: &str, default: &str) -> Result<String, PromptError> {
    let text = match dir.map(|d| d.join(path)) {
        Some(file) if file.is_file() => {
            std::fs::read_to_string(&file).map_err(|source| PromptError { path: file, source })?
        }
        _ => default.to_owned(),
    };
    Ok(text.trim().to_owned())
}

/// A group of prompts: a struct with a field per file, its loader and the
/// list of its files (relative to the prompts folder).
macro_rules! prompt_group {
    ($(#[$doc:meta])* $name:ident { $($field:ident => $path:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            $(pub $field: String,)*
        }

        impl $name {
            pub const FILES: &'static [&'static str] = &[$($path),*];

            fn load(dir: Option<&Path>) -> Result<$name, PromptError> {
                Ok($name {
                    $($field: read(dir, $path, include_str!(concat!("../prompts/", $path)))?,)*
                })
            }
        }
    };
}

prompt_group! {
    /// The agent's system prompt: its introduction, the tools' sections, the git workflow, then the rules.
    AgentPrompts {
        base => "system_base.txt",
        command_executor => "command_executor.txt",
        text_editor => "system_prompt_text_editor.txt",
        git_workflow => "git_workflow.txt",
        behavior_rules => "behavior_rules.txt",
        repository_instructions => "repository_instructions.txt",
        test_failure => "test_failure.txt",
    }
}

prompt_group! {
    /// The planning debate and the sage tools.
    SagePrompts {
        system => "sage/system.txt",
        request => "sage/request.txt",
        opinion => "sage/opinion.txt",
        review => "sage/review.txt",
        generate => "sage/generate.txt",
        critique => "sage/critique.txt",
        synthesize => "sage/synthesize.txt",
        consensus => "sage/consensus.txt",
        judge => "sage/judge.txt",
        self_debate => "sage/self_debate.txt",
    }
}

prompt_group! {
    /// The context store: classification, summaries and the template every
    /// main request is synthesised into.
    ContextPrompts {
        system => "context/system.txt",
        classify => "context/classify.txt",
        summarize => "context/summarize.txt",
        synthesis => "context/synthesis.txt",
    }
}

prompt_group! {
    /// Idea options: the two stages and the JSON repair.
    IdeaPrompts {
        categories => "ideas/categories.txt",
        options => "ideas/options.txt",
        repair => "ideas/repair.txt",
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompts {
    pub agent: AgentPrompts,
    pub sage: SagePrompts,
    pub context: ContextPrompts,
    pub ideas: IdeaPrompts,
}

impl Prompts {
    /// The embedded texts, with any file present in `dir` taking precedence.
    /// A `.txt` file in `dir` that overrides nothing is logged: a misspelt
    /// name would otherwise be ignored silently.
    pub fn load(dir: Option<&Path>) -> Result<Prompts, PromptError> {
        if let Some(dir) = dir {
            // A configured folder that is not there is a mistake to name,
            // not a reason to run on the built-in texts unnoticed.
            if let Err(source) = std::fs::read_dir(dir) {
                return Err(PromptError {
                    path: dir.to_owned(),
                    source,
                });
            }
            for unused in unknown_files(dir) {
                tracing::warn!(
                    file = %unused.display(),
                    "this prompt file overrides nothing (known files: {}); check its name",
                    Prompts::files().collect::<Vec<_>>().join(", ")
                );
            }
        }
        Ok(Prompts {
            agent: AgentPrompts::load(dir)?,
            sage: SagePrompts::load(dir)?,
            context: ContextPrompts::load(dir)?,
            ideas: IdeaPrompts::load(dir)?,
        })
    }

    /// The built-in texts, shared.
    pub fn embedded() -> Arc<Prompts> {
        static EMBEDDED: std::sync::OnceLock<Arc<Prompts>> = std::sync::OnceLock::new();
        EMBEDDED
            .get_or_init(|| {
                // Reading no folder cannot fail.
                Arc::new(Prompts::load(None).unwrap_or_else(|e| unreachable!("{e}")))
            })
            .clone()
    }

    /// Every file a prompts folder may hold, relative to it.
    pub fn files() -> impl Iterator<Item = &'static str> {
        [
            AgentPrompts::FILES,
            SagePrompts::FILES,
            ContextPrompts::FILES,
            IdeaPrompts::FILES,
        ]
        .into_iter()
        .flatten()
        .copied()
    }
}

/// `.txt` files under `dir` (one level of subfolders) that are no prompt.
fn unknown_files(dir: &Path) -> Vec<PathBuf> {
    let known: Vec<PathBuf> = Prompts::files().map(|f| dir.join(f)).collect();
    let mut out: Vec<PathBuf> = ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .max_depth(Some(2))
        .build()
        .flatten()
        .map(ignore::DirEntry::into_path)
        .filter(|path| {
            path.is_file() && path.extension().is_some_and(|e| e == "txt") && !known.contains(path)
        })
        .collect();
    out.sort();
    out
}

/// Fills `{name}` places in one pass: text put in is never scanned again,
/// so a plan that happens to contain `{id}` stays as written.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + values.iter().map(|(_, v)| v.len()).sum::<usize>());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let hit = after.find('}').and_then(|close| {
            let name = &after[..close];
            values
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (close, *value))
        });
        match hit {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_folder_that_is_not_there_is_named_not_ignored() {
        let missing = std::path::Path::new("/nonexistent/forgehand-prompts");
        let err = Prompts::load(Some(missing)).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/forgehand-prompts"), "{err}");
        assert!(Prompts::load(None).is_ok());
    }

    #[test]
    fn filling_does_not_rescan_what_it_put_in() {
        let out = fill(
            "MODEL {id}: {plan} {unknown} {",
            &[("id", "A"), ("plan", "uses {id}")],
        );
        assert_eq!(out, "MODEL A: uses {id} {unknown} {");
    }

    #[test]
    fn every_group_can_be_overridden_from_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        for file in [
            "sage/judge.txt",
            "context/synthesis.txt",
            "ideas/options.txt",
            "git_workflow.txt",
        ] {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, format!("custom {file}\n")).unwrap();
        }
        let prompts = Prompts::load(Some(dir.path())).unwrap();
        assert_eq!(prompts.sage.judge, "custom sage/judge.txt");
        assert_eq!(prompts.context.synthesis, "custom context/synthesis.txt");
        assert_eq!(prompts.ideas.options, "custom ideas/options.txt");
        assert_eq!(prompts.agent.git_workflow, "custom git_workflow.txt");
        assert_eq!(prompts.sage.system, Prompts::embedded().sage.system);
    }

    #[test]
    fn a_misspelt_override_is_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sage")).unwrap();
        std::fs::write(dir.path().join("sage/judgement.txt"), "x").unwrap();
        std::fs::write(dir.path().join("sage/judge.txt"), "x").unwrap();
        assert_eq!(
            unknown_files(dir.path()),
            vec![dir.path().join("sage/judgement.txt")]
        );
    }

    #[test]
    fn the_built_in_prompts_are_english_and_ask_for_the_issues_language() {
        let prompts = Prompts::embedded();
        let all = [
            &prompts.agent.behavior_rules,
            &prompts.sage.system,
            &prompts.context.classify,
            &prompts.context.synthesis,
            &prompts.context.summarize,
            &prompts.ideas.categories,
            &prompts.ideas.options,
        ];
        for text in all {
            assert!(
                !text.chars().any(|c| ('\u{3040}'..='\u{30ff}').contains(&c) || ('\u{4e00}'..='\u{9fff}').contains(&c)),
                "{text}"
            );
            assert!(text.contains("language"), "no language rule in: {text}");
        }
    }
}
