//! `owner/name` patterns, as `sandbox.egress.credentials[].repositories`
//! takes them: a glob in which `*` stands for any run of characters
//! within one path segment and `**` for any number of segments, so
//! `group/*` names a GitLab group's own projects and `group/**` its
//! subgroups' too. A lone `*` names every repository (as it always has).
//! Compared without case, as forges compare `owner/name`.

use super::ConfigError;
use globset::{GlobBuilder, GlobMatcher};

/// One compiled pattern and the text it was written as.
#[derive(Debug, Clone)]
pub struct RepositoryPattern {
    text: String,
    matcher: GlobMatcher,
}

impl PartialEq for RepositoryPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl RepositoryPattern {
    /// Compiles `text`; the error names `key` and says how to write one.
    pub fn parse(key: &str, text: &str) -> Result<RepositoryPattern, ConfigError> {
        let trimmed = text.trim();
        // A lone `*` spans `/` as it did before `**` existed: configs that
        // say "every repository" so keep meaning it.
        let glob = if trimmed == "*" { "**" } else { trimmed };
        let bad = |why: String| {
            ConfigError::invalid(
                key,
                format!(
                    r#""{text}" {why}; write "owner/name", "owner/*" (that owner's repositories), "group/**" (a GitLab group and its subgroups) or "*" (every repository)"#
                ),
            )
        };
        if glob.is_empty() {
            return Err(bad("is empty".into()));
        }
        if glob.starts_with('/') || glob.ends_with('/') {
            return Err(bad(r#"starts or ends with "/", so it names no repository"#.into()));
        }
        let matcher = GlobBuilder::new(glob)
            .literal_separator(true)
            .case_insensitive(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| bad(format!("is not a pattern ({})", e.kind())))?
            .compile_matcher();
        Ok(RepositoryPattern {
            text: trimmed.to_owned(),
            matcher,
        })
    }

    /// Whether `repository` (`owner/name`, or a GitLab `group/sub/name`)
    /// is one this pattern names.
    pub fn matches(&self, repository: &str) -> bool {
        self.matcher.is_match(repository)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn matches(pattern: &str, repository: &str) -> bool {
        RepositoryPattern::parse("k", pattern)
            .unwrap()
            .matches(repository)
    }

    #[test]
    fn a_star_stays_within_one_segment_and_two_span_subgroups() {
        assert!(matches("*", "a/b"));
        assert!(matches("*", "group/sub/project"));
        assert!(matches("**", "group/sub/project"));
        assert!(matches("Acme/*", "acme/app"));
        assert!(matches("acme/app", "ACME/App"));
        assert!(!matches("acme/app", "acme/app2"));
        assert!(matches("*/app-*", "acme/app-web"));
        assert!(!matches("acme/*", "other/acme/x"));
        assert!(!matches("group/*", "group/sub/project"));
        assert!(matches("group/**", "group/sub/project"));
        assert!(matches("group/**", "group/project"));
        assert!(!matches("group/**", "groupie/project"));
        assert!(matches("group/*/project", "group/sub/project"));
        assert!(!matches("group/*/project", "group/a/b/project"));
    }

    #[test]
    fn a_pattern_that_cannot_be_read_names_its_key() {
        let err = RepositoryPattern::parse("x.repositories[0]", "acme/[app").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("x.repositories[0]") && text.contains("group/**"),
            "{text}"
        );
        assert!(RepositoryPattern::parse("k", " ").is_err());
        assert!(RepositoryPattern::parse("k", "/acme/*").is_err());
        assert!(RepositoryPattern::parse("k", "acme/app/").is_err());
    }
}
