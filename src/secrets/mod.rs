//! Masking of credentials by their published formats: GitHub, GitLab, AWS,
//! Slack, OpenAI, Anthropic and Google keys, private key blocks, JWTs,
//! URL credentials and `password=`-style assignments (`rules.yaml`).
//! Everything from outside the daemon (a CI job's log, a command's output,
//! thread text) goes through it, by way of [`crate::config::Secrets`],
//! before it reaches a model, a comment or a transcript: forgehand's own
//! secrets are masked by value, anyone else's by format.

mod rules;

pub use rules::{Masked, Rule, RuleSet, RulesError};

use std::sync::LazyLock;

/// The rules, compiled on first use.
static RULES: LazyLock<Result<RuleSet, RulesError>> =
    LazyLock::new(|| RuleSet::parse(include_str!("rules.yaml")));

/// The rule id reported when the rules themselves are unusable.
pub const RULES_UNAVAILABLE: &str = "rules-unavailable";

/// The compiled rules, or why there are none.
pub fn rules() -> Result<&'static RuleSet, &'static RulesError> {
    RULES.as_ref()
}

/// `text` with every credential the rules recognise masked. Should the
/// rules not compile (a defect their tests catch), nothing of `text` is
/// let through: failing closed beats sending a key on.
pub fn mask(text: &str) -> Masked {
    match rules() {
        Ok(rules) => rules.mask(text),
        Err(e) => {
            tracing::error!("{e}; text withheld");
            Masked {
                text: format!("[text withheld: {e}]"),
                rules: [RULES_UNAVAILABLE.to_owned()].into(),
            }
        }
    }
}

#[cfg(test)]
mod tests;
