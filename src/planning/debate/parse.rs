//! Reading the models' answers: critiques, the judge's consensus JSON and
//! confidence, the final plan and its checklist.

use super::{Consensus, Entry};

/// `- [ ] step` lines of the plan's checklist; without one, its top-level
/// numbered steps.
pub fn checklist(plan: &str) -> Vec<String> {
    const MAX: usize = 20;
    let boxed: Vec<String> = plan
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            l.strip_prefix("- [ ]")
                .or_else(|| l.strip_prefix("- [x]"))
                .or_else(|| l.strip_prefix("* [ ]"))
                .map(|s| s.trim().to_owned())
        })
        .filter(|s| !s.is_empty())
        .take(MAX)
        .collect();
    if !boxed.is_empty() {
        return boxed;
    }
    plan.lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('\t'))
        .filter_map(|l| {
            let (number, rest) = l.split_once(". ")?;
            number.parse::<u32>().ok()?;
            Some(rest.trim().trim_matches('*').trim().to_owned())
        })
        .filter(|s| !s.is_empty())
        .take(MAX)
        .collect()
}

/// What the critics said about plan `id`: the `## Critique of Plan <id>`
/// section of each critique, or the whole critique when it has no sections.
pub(super) fn critiques_of(id: &str, critiques: &[Entry]) -> String {
    let heading = format!("critique of plan {}", id.to_ascii_lowercase());
    let mut out = Vec::new();
    for critique in critiques.iter().filter(|c| c.id != id) {
        let lines: Vec<&str> = critique.text.lines().collect();
        let start = lines.iter().position(|l| {
            let l = l.trim_start_matches('#').trim().to_ascii_lowercase();
            l == heading || l.starts_with(&format!("{heading} ")) || l.starts_with(&format!("{heading}:"))
        });
        let section = match start {
            Some(start) => {
                let end = lines[start + 1..]
                    .iter()
                    .position(|l| l.starts_with("## ") || l.starts_with("# "))
                    .map(|e| start + 1 + e)
                    .unwrap_or(lines.len());
                lines[start..end].join("\n")
            }
            None => critique.text.clone(),
        };
        out.push(format!("### From MODEL {}\n{}", critique.id, section.trim()));
    }
    if out.is_empty() {
        "(no critiques were received)".into()
    } else {
        out.join("\n\n")
    }
}

/// The judge's JSON, also when wrapped in a code fence or surrounded by words.
pub fn parse_consensus(answer: &str) -> Option<Consensus> {
    let start = answer.find('{')?;
    let end = answer.rfind('}')?;
    let value: serde_json::Value = serde_json::from_str(answer.get(start..=end)?).ok()?;
    let score = value.get("consensusScore")?.as_f64()?;
    if !(0.0..=1.0).contains(&score) {
        return None;
    }
    Some(Consensus {
        score,
        reached: value
            .get("consensusReached")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        reasoning: value
            .get("reasoning")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned(),
    })
}

/// `Confidence Score: 0.8` anywhere in the judge's answer.
pub fn parse_confidence(answer: &str) -> Option<f64> {
    let lower = answer.to_ascii_lowercase();
    let at = lower.rfind("confidence score")?;
    let rest = &answer[at + "confidence score".len()..];
    let number: String = rest
        .trim_start_matches(|c: char| c == ':' || c == '*' || c.is_whitespace())
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    number.parse::<f64>().ok().filter(|c| (0.0..=1.0).contains(c))
}

/// From `# Final Implementation Plan` on, without the confidence line.
pub(super) fn final_plan(answer: &str) -> String {
    let start = answer.find("# Final Implementation Plan").unwrap_or(0);
    answer[start..]
        .lines()
        .filter(|l| !l.to_ascii_lowercase().contains("confidence score"))
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_owned()
}

pub(super) fn clip(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].replace('\n', " ");
    if end < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consensus_json_is_found_in_fences_and_garbage_is_none() {
        let c = parse_consensus(
            "```json\n{\"consensusScore\": 0.93, \"consensusReached\": true, \"reasoning\": \"same\"}\n```",
        )
        .unwrap();
        assert_eq!((c.score, c.reached, c.reasoning.as_str()), (0.93, true, "same"));
        assert!(parse_consensus("I think they agree.").is_none());
        assert!(parse_consensus("{\"consensusScore\": 7}").is_none());
    }

    #[test]
    fn confidence_and_final_plan_are_read_from_the_judge() {
        let answer = "Some words\n# Final Implementation Plan\n1. Do it\n## Checklist\n- [ ] Write the parser\n- [ ] Test it\n\nConfidence Score: 0.85";
        assert_eq!(parse_confidence(answer), Some(0.85));
        let plan = final_plan(answer);
        assert!(plan.starts_with("# Final Implementation Plan"));
        assert!(!plan.contains("Confidence"));
        assert_eq!(checklist(&plan), vec!["Write the parser", "Test it"]);
    }

    #[test]
    fn checklist_falls_back_to_numbered_steps() {
        assert_eq!(
            checklist("# Plan\n1. First\n   1. nested\n2. **Second**\n"),
            vec!["First", "Second"]
        );
    }

    #[test]
    fn each_plan_gets_the_critique_sections_about_it() {
        let critiques = vec![
            Entry {
                id: "A".into(),
                model: "m1".into(),
                text: "## Critique of Plan B\nB is slow\n## Critique of Plan C\nC is wrong".into(),
            },
            Entry {
                id: "C".into(),
                model: "m3".into(),
                text: "Plan B lacks tests".into(),
            },
        ];
        let b = critiques_of("B", &critiques);
        assert!(
            b.contains("B is slow") && !b.contains("C is wrong") && b.contains("lacks tests"),
            "{b}"
        );
    }
}
