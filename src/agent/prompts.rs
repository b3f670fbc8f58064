//! The agent's system prompt, assembled from the texts of
//! [`crate::prompts::AgentPrompts`] in this order: the
//! editor section right after the command executor's, before the rules.

use crate::prompts::AgentPrompts;

impl AgentPrompts {
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
    use crate::prompts::Prompts;

    #[test]
    fn sections_come_in_the_order_of_the_specification() {
        let prompt = Prompts::embedded().agent.system_prompt(true);
        let at = |needle: &str| prompt.find(needle).unwrap_or_else(|| panic!("{needle} missing"));
        assert!(at("## Command Executor") < at("## Text Editor Tool"));
        assert!(at("## Text Editor Tool") < at("## Git Workflow"));
        assert!(at("## Git Workflow") < at("## Behavior Rules"));
        let without = Prompts::embedded().agent.system_prompt(false);
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
        let prompt = Prompts::load(Some(dir.path())).unwrap().agent.system_prompt(true);
        assert!(prompt.ends_with("## Behavior Rules\nBe brief."), "{prompt}");
    }
}
