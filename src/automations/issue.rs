//! The issue an automation opens: its instructions, a line saying which
//! automation opened it and for which time, and a hidden marker line by
//! which the next time finds it while it is open (and a restart finds the
//! one it opened just before it stopped).

use crate::config::AutomationConfig;
use crate::forge::NewIssue;
use chrono::{DateTime, SecondsFormat, Utc};

/// The start of the marker line every issue of automation `name` holds.
pub fn marker(name: &str) -> String {
    format!("<!-- forgehand-automation: {name} ")
}

/// The issue of `automation` for schedule time `slot`, labelled with
/// `trigger` and the automation's own labels.
pub fn new_issue(automation: &AutomationConfig, slot: DateTime<Utc>, trigger: &str) -> NewIssue {
    let local = slot.with_timezone(&automation.timezone);
    let body = format!(
        "{}\n\n---\nOpened by forgehand's scheduled automation `{}` (`{}` in {}) for {}.\n{}slot: {} -->\n",
        automation.instructions.trim_end(),
        automation.name,
        automation.schedule_text,
        automation.timezone.name(),
        local.format("%Y-%m-%d %H:%M %Z"),
        marker(&automation.name),
        slot.to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    let mut labels = vec![trigger.to_owned()];
    for label in &automation.labels {
        if !labels.contains(label) {
            labels.push(label.clone());
        }
    }
    NewIssue {
        title: automation.title.clone(),
        body,
        labels,
    }
}

/// The schedule time an issue's marker of automation `name` names.
pub fn slot_of(body: &str, name: &str) -> Option<DateTime<Utc>> {
    let start = body.find(&marker(name))? + marker(name).len();
    let rest = body[start..].strip_prefix("slot: ")?;
    let end = rest.find(" -->")?;
    DateTime::parse_from_rfc3339(rest[..end].trim())
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_schedule, AutomationForge, AutomationTarget};

    fn automation(name: &str) -> AutomationConfig {
        AutomationConfig {
            name: name.into(),
            schedule_text: "0 9 * * MON".into(),
            schedule: parse_schedule("0 9 * * MON").unwrap(),
            timezone: chrono_tz::Europe::Berlin,
            repositories: vec![AutomationTarget {
                forge: AutomationForge::GitHub,
                repo: "acme/app".into(),
            }],
            title: "Update dependencies".into(),
            instructions: "Update every dependency.\n".into(),
            labels: vec!["chore".into(), "coding agent".into()],
            starting_deadline: std::time::Duration::from_secs(3600),
        }
    }

    #[test]
    fn the_body_carries_the_instructions_and_a_marker_naming_its_time() {
        let slot = DateTime::parse_from_rfc3339("2026-12-07T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let issue = new_issue(&automation("deps"), slot, "coding agent");
        assert_eq!(issue.title, "Update dependencies");
        assert_eq!(issue.labels, vec!["coding agent".to_owned(), "chore".to_owned()]);
        assert!(
            issue.body.starts_with("Update every dependency.\n\n---\n"),
            "{}",
            issue.body
        );
        assert!(issue.body.contains("for 2026-12-07 09:00 CET."), "{}", issue.body);
        assert!(
            issue
                .body
                .contains("<!-- forgehand-automation: deps slot: 2026-12-07T08:00:00Z -->"),
            "{}",
            issue.body
        );
        assert_eq!(slot_of(&issue.body, "deps"), Some(slot));
        // Another automation's marker is not this one's, even as a prefix.
        assert_eq!(slot_of(&issue.body, "dep"), None);
        assert!(!issue.body.contains(&marker("dep")));
    }
}
