//! `automations:`: issues forgehand opens itself on a schedule ("update
//! the dependencies every Monday"), each labelled with the trigger label
//! so the usual intake works it. Every value is checked here, at load:
//! the cron pattern, the time zone, the repositories (each one forgehand
//! works on), the names (unique, usable in a marker line).

use super::units::HumanDuration;
use super::{ConfigError, GitHubConfig, GitLabConfig};
use serde::Deserialize;
use std::time::Duration;

/// How late a missed run may still be caught up, unless an automation
/// says otherwise (`starting_deadline`).
pub const DEFAULT_STARTING_DEADLINE: Duration = Duration::from_secs(3600);

/// Which forge an automation's repository is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AutomationForge {
    GitHub,
    GitLab,
}

/// One repository an automation opens its issue in, spelled as the
/// forge's section of the config spells it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AutomationTarget {
    pub forge: AutomationForge,
    pub repo: String,
}

/// One scheduled automation.
#[derive(Debug, Clone, PartialEq)]
pub struct AutomationConfig {
    /// Unique among the automations; letters, digits, `.`, `_`, `-`.
    pub name: String,
    /// The 5-field cron pattern, as written.
    pub schedule_text: String,
    pub schedule: croner::Cron,
    /// The IANA time zone the pattern's wall-clock times are read in.
    pub timezone: chrono_tz::Tz,
    pub repositories: Vec<AutomationTarget>,
    pub title: String,
    /// The body.
    pub instructions: String,
    /// Labels besides the trigger label (which is always added).
    pub labels: Vec<String>,
    /// A run missed (the daemon was down) is caught up only while its time
    /// is at most this long ago; at most one missed run is caught up.
    pub starting_deadline: Duration,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAutomation {
    pub name: String,
    pub schedule: String,
    #[serde(default)]
    pub timezone: String,
    pub repositories: Vec<String>,
    pub title: String,
    pub instructions: String,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub starting_deadline: Option<HumanDuration>,
}

/// Parses a 5-field cron pattern (minute hour day-of-month month
/// day-of-week; names such as `MON` and `@daily` are taken too).
pub fn parse_schedule(text: &str) -> Result<croner::Cron, String> {
    let fields = text.split_whitespace().count();
    if !text.trim_start().starts_with('@') && fields != 5 {
        return Err(format!(
            "\"{text}\" has {fields} field(s); write 5: minute hour day-of-month month day-of-week, e.g. \"0 9 * * MON\" (every Monday at 09:00)"
        ));
    }
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Disallowed)
        .year(croner::parser::Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| {
            format!("\"{text}\" is not a cron pattern ({e}); write 5 fields: minute hour day-of-month month day-of-week, e.g. \"0 9 * * MON\"")
        })
}

/// Resolves `automations:` against the repositories the daemon works on.
pub fn resolve_automations(
    raw: Vec<RawAutomation>,
    github: &GitHubConfig,
    gitlab: &GitLabConfig,
) -> Result<Vec<AutomationConfig>, ConfigError> {
    let mut out: Vec<AutomationConfig> = Vec::new();
    for (i, raw) in raw.into_iter().enumerate() {
        let at = |field: &str| format!("automations[{i}].{field}");
        let name = raw.name.trim().to_owned();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return Err(ConfigError::invalid(
                &at("name"),
                format!("\"{name}\" is not a usable name; use letters, digits, '.', '_' and '-' (e.g. \"weekly-deps\")"),
            ));
        }
        if let Some(j) = out.iter().position(|a| a.name == name) {
            return Err(ConfigError::invalid(
                &at("name"),
                format!(
                    "\"{name}\" is the name of automations[{j}] too; give each automation a name of its own"
                ),
            ));
        }
        let schedule = parse_schedule(&raw.schedule).map_err(|m| ConfigError::invalid(&at("schedule"), m))?;
        let timezone =
            resolve_timezone(&raw.timezone).map_err(|m| ConfigError::invalid(&at("timezone"), m))?;
        let repositories = resolve_targets(&raw.repositories, github, gitlab, &at("repositories"))?;
        let title = super::non_empty(&at("title"), &raw.title)?;
        let instructions = super::non_empty(&at("instructions"), &raw.instructions)?;
        let labels: Vec<String> = raw.labels.iter().map(|l| l.trim().to_owned()).collect();
        if labels.iter().any(String::is_empty) {
            return Err(ConfigError::invalid(
                &at("labels"),
                "holds an empty label; remove it",
            ));
        }
        if let Some(label) = labels.iter().find(|l| l.contains(',')) {
            return Err(ConfigError::invalid(
                &at("labels"),
                format!(
                    "\"{label}\" holds a comma, which GitLab reads as two labels; name one label per entry"
                ),
            ));
        }
        let starting_deadline = raw.starting_deadline.map_or(DEFAULT_STARTING_DEADLINE, |d| d.0);
        if starting_deadline.is_zero() {
            return Err(ConfigError::invalid(
                &at("starting_deadline"),
                "must be longer than zero (e.g. \"1h\"): a run is opened at its time or, after downtime, within this long",
            ));
        }
        out.push(AutomationConfig {
            name,
            schedule_text: raw.schedule.trim().to_owned(),
            schedule,
            timezone,
            repositories,
            title,
            instructions,
            labels,
            starting_deadline,
        });
    }
    Ok(out)
}

/// An IANA time zone name; empty is UTC.
fn resolve_timezone(text: &str) -> Result<chrono_tz::Tz, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(chrono_tz::UTC);
    }
    text.parse::<chrono_tz::Tz>().map_err(|_| {
        format!("\"{text}\" is not an IANA time zone; use a name such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\"")
    })
}

/// Each repository, on the forge whose section lists it (any ASCII case,
/// spelled as listed there); one no section lists is taken only when a
/// single forge watches everything it can see.
fn resolve_targets(
    repos: &[String],
    github: &GitHubConfig,
    gitlab: &GitLabConfig,
    key: &str,
) -> Result<Vec<AutomationTarget>, ConfigError> {
    if repos.is_empty() {
        return Err(ConfigError::invalid(
            key,
            "is empty; list the repositories (\"owner/name\") the automation opens its issue in",
        ));
    }
    let mut out: Vec<AutomationTarget> = Vec::new();
    for (i, repo) in repos.iter().enumerate() {
        let repo = repo.trim();
        let listed = |list: &[String]| list.iter().find(|r| r.eq_ignore_ascii_case(repo)).cloned();
        let target = match (listed(&github.repositories), listed(&gitlab.projects)) {
            (Some(name), _) => AutomationTarget {
                forge: AutomationForge::GitHub,
                repo: name,
            },
            (None, Some(name)) => AutomationTarget {
                forge: AutomationForge::GitLab,
                repo: name,
            },
            (None, None) => match (github.all_repositories, gitlab.all_projects) {
                (true, false) if repo.contains('/') => AutomationTarget {
                    forge: AutomationForge::GitHub,
                    repo: repo.to_owned(),
                },
                (false, true) if repo.contains('/') => AutomationTarget {
                    forge: AutomationForge::GitLab,
                    repo: repo.to_owned(),
                },
                _ => {
                    return Err(ConfigError::invalid(
                        &format!("{key}[{i}]"),
                        format!("\"{repo}\" is not a repository forgehand works on; add it to github.repositories or gitlab.projects, or name one listed there"),
                    ))
                }
            },
        };
        if !out.contains(&target) {
            out.push(target);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    fn load(yaml: &str) -> Result<Config, ConfigError> {
        let text = format!(
            "github:\n  repositories: [\"acme/app\"]\ngitlab:\n  projects: [\"group/sub/tool\"]\n{yaml}"
        );
        Config::from_yaml(&text, Path::new("config.yaml"), Path::new("/tmp"), &|_| None)
    }

    fn automation(fields: &str) -> String {
        format!("automations:\n  - name: \"weekly-deps\"\n    title: \"Update dependencies\"\n    instructions: \"Update them.\"\n{fields}")
    }

    fn error(yaml: &str) -> String {
        match load(yaml) {
            Ok(_) => panic!("accepted: {yaml}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_automation_resolves_with_its_defaults_and_forges() {
        let config = load(&automation(
            "    schedule: \"0 9 * * MON\"\n    repositories: [\"ACME/app\", \"group/sub/tool\"]\n    labels: [\"chore\"]\n",
        ))
        .unwrap();
        let a = &config.automations[0];
        assert_eq!(a.name, "weekly-deps");
        assert_eq!(a.timezone, chrono_tz::UTC);
        assert_eq!(a.starting_deadline, DEFAULT_STARTING_DEADLINE);
        assert_eq!(a.labels, vec!["chore".to_owned()]);
        assert_eq!(
            a.repositories,
            vec![
                AutomationTarget {
                    forge: AutomationForge::GitHub,
                    repo: "acme/app".into()
                },
                AutomationTarget {
                    forge: AutomationForge::GitLab,
                    repo: "group/sub/tool".into()
                },
            ]
        );
        let zoned = load(&automation(
            "    schedule: \"*/5 * * * *\"\n    timezone: \"Europe/Berlin\"\n    starting_deadline: \"10m\"\n    repositories: [\"acme/app\"]\n",
        ))
        .unwrap();
        assert_eq!(zoned.automations[0].timezone, chrono_tz::Europe::Berlin);
        assert_eq!(zoned.automations[0].starting_deadline, Duration::from_secs(600));
        assert!(Config::defaults().automations.is_empty());
    }

    #[test]
    fn a_bad_cron_pattern_names_the_key_and_the_form() {
        let six = error(&automation(
            "    schedule: \"0 0 9 * * MON\"\n    repositories: [\"acme/app\"]\n",
        ));
        assert!(
            six.starts_with(
                "automations[0].schedule: \"0 0 9 * * MON\" has 6 field(s); write 5: minute hour"
            ),
            "{six}"
        );
        let bad = error(&automation(
            "    schedule: \"61 * * * *\"\n    repositories: [\"acme/app\"]\n",
        ));
        assert!(
            bad.starts_with("automations[0].schedule: \"61 * * * *\" is not a cron pattern (")
                && bad.contains("e.g. \"0 9 * * MON\""),
            "{bad}"
        );
    }

    #[test]
    fn an_unknown_time_zone_is_refused_with_examples() {
        let e = error(&automation(
            "    schedule: \"0 9 * * *\"\n    timezone: \"Europe/Atlantis\"\n    repositories: [\"acme/app\"]\n",
        ));
        assert_eq!(
            e,
            "automations[0].timezone: \"Europe/Atlantis\" is not an IANA time zone; use a name such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\""
        );
    }

    #[test]
    fn an_unknown_repository_is_refused_and_names_where_to_add_it() {
        let e = error(&automation(
            "    schedule: \"0 9 * * *\"\n    repositories: [\"acme/app\", \"acme/other\"]\n",
        ));
        assert_eq!(
            e,
            "automations[0].repositories[1]: \"acme/other\" is not a repository forgehand works on; add it to github.repositories or gitlab.projects, or name one listed there"
        );
        let none = error(&automation("    schedule: \"0 9 * * *\"\n    repositories: []\n"));
        assert!(
            none.starts_with("automations[0].repositories: is empty;"),
            "{none}"
        );
    }

    #[test]
    fn a_duplicate_or_unusable_name_is_refused() {
        let one = "  - name: \"weekly-deps\"\n    schedule: \"0 9 * * *\"\n    repositories: [\"acme/app\"]\n    title: \"t\"\n    instructions: \"i\"\n";
        let e = error(&format!("automations:\n{one}{one}"));
        assert_eq!(
            e,
            "automations[1].name: \"weekly-deps\" is the name of automations[0] too; give each automation a name of its own"
        );
        let spaced = error(
            &one.replace("weekly-deps", "weekly deps")
                .replacen("", "automations:\n", 1),
        );
        assert!(
            spaced.starts_with("automations[0].name: \"weekly deps\" is not a usable name;"),
            "{spaced}"
        );
    }

    #[test]
    fn a_label_with_a_comma_is_refused() {
        let e = error(&automation(
            "    schedule: \"0 9 * * *\"\n    repositories: [\"acme/app\"]\n    labels: [\"a,b\"]\n",
        ));
        assert_eq!(
            e,
            "automations[0].labels: \"a,b\" holds a comma, which GitLab reads as two labels; name one label per entry"
        );
    }

    #[test]
    fn a_zero_deadline_and_an_unknown_key_are_refused() {
        let zero = error(&automation(
            "    schedule: \"0 9 * * *\"\n    repositories: [\"acme/app\"]\n    starting_deadline: \"0s\"\n",
        ));
        assert!(
            zero.starts_with("automations[0].starting_deadline: must be longer than zero"),
            "{zero}"
        );
        let unknown = error(&automation(
            "    schedule: \"0 9 * * *\"\n    repositories: [\"acme/app\"]\n    cron: \"x\"\n",
        ));
        assert!(
            unknown.contains("automations[0]") && unknown.contains("cron"),
            "{unknown}"
        );
    }
}
