//! Reading the models' answers as real models write them: critiques in
//! tagged sections (headings of any depth inside), the judge's consensus
//! JSON after prose or in fences, confidence written as "0.7", "(0-1): 0.7"
//! or "85%", the final plan under a heading in any case, and the checklist
//! from the plan's own "Checklist" section. When a shape is not found, the
//! whole answer is used, never a fragment of it.

use super::{Consensus, Entry};

/// At most this many checklist steps are taken.
const MAX_STEPS: usize = 20;

/// The plan's checklist: the `- [ ]` lines of its last "Checklist" section
/// (any heading depth or case); without that section, every checkbox line;
/// without checkboxes, the numbered items of its "steps" section (or its
/// top-level numbered items). Duplicates are dropped, order kept.
pub fn checklist(plan: &str) -> Vec<String> {
    let lines: Vec<&str> = plan.lines().collect();
    let section = last_section(&lines, |title| title.contains("checklist"));
    let boxed = match section {
        Some(range) => boxes(&lines[range]),
        None => Vec::new(),
    };
    let boxed = if boxed.is_empty() { boxes(&lines) } else { boxed };
    if !boxed.is_empty() {
        return dedup(boxed);
    }
    let steps = last_section(&lines, |title| title.contains("step"))
        .map(|range| numbered(&lines[range]))
        .unwrap_or_default();
    dedup(if steps.is_empty() { numbered(&lines) } else { steps })
}

/// The heading text of a Markdown heading line, lower-cased, without its
/// `#`s and emphasis; `None` for other lines.
fn heading(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    let rest = trimmed.strip_prefix('#')?;
    let title = rest.trim_start_matches('#').trim();
    Some(title.trim_matches(|c| c == '*' || c == '_').trim().to_lowercase())
}

/// The lines after the last heading whose title matches, up to the next
/// heading of the same or a higher level.
fn last_section(lines: &[&str], wanted: impl Fn(&str) -> bool) -> Option<std::ops::Range<usize>> {
    let level = |l: &str| l.trim_start().chars().take_while(|c| *c == '#').count();
    let start = lines
        .iter()
        .rposition(|l| heading(l).is_some_and(|t| wanted(&t)))?;
    let depth = level(lines[start]);
    let end = lines[start + 1..]
        .iter()
        .position(|l| heading(l).is_some() && level(l) <= depth)
        .map(|e| start + 1 + e)
        .unwrap_or(lines.len());
    Some(start + 1..end)
}

fn boxes(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix("- ").or_else(|| l.strip_prefix("* "))?;
            let rest = rest.trim_start();
            rest.strip_prefix("[ ]")
                .or_else(|| rest.strip_prefix("[x]"))
                .or_else(|| rest.strip_prefix("[X]"))
                .map(|s| s.trim().to_owned())
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// `1. text` items that are not indented.
fn numbered(lines: &[&str]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('\t'))
        .filter_map(|l| {
            let (number, rest) = l.split_once(". ")?;
            number.parse::<u32>().ok()?;
            Some(rest.trim().trim_matches('*').trim().to_owned())
        })
        .filter(|s| !s.is_empty())
        .collect()
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|i| seen.insert(i.to_lowercase()))
        .take(MAX_STEPS)
        .collect()
}

/// What the critics said about plan `id`: from each critique, the section
/// the critic wrote between `<critique of="ID">` and `</critique>` (as the
/// critique prompt asks), whatever headings it holds; when the critic did
/// not tag its sections, its whole answer.
pub(super) fn critiques_of(id: &str, critiques: &[Entry]) -> String {
    let mut out = Vec::new();
    for critique in critiques.iter().filter(|c| c.id != id) {
        let section = tagged_section(&critique.text, id).unwrap_or_else(|| critique.text.trim().to_owned());
        out.push(format!("### From MODEL {}\n{}", critique.id, section.trim()));
    }
    if out.is_empty() {
        "(no critiques were received)".into()
    } else {
        out.join("\n\n")
    }
}

/// The text inside `<critique of="ID">` ... `</critique>` (case, quotes and
/// spaces as models vary them); up to the next opening tag or the end when
/// the closing tag is missing.
fn tagged_section(text: &str, id: &str) -> Option<String> {
    let lower = text.to_lowercase();
    let want = id.to_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find("<critique") {
        let open = from + at;
        let close = open + lower[open..].find('>')?;
        let attributes: String = lower[open + "<critique".len()..close]
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
            .collect();
        from = close + 1;
        let names = attributes
            .strip_prefix("of=")
            .map(|v| v.trim_start_matches("plan").to_owned());
        if names.as_deref() != Some(want.as_str()) {
            continue;
        }
        let body = &lower[from..];
        let end = [body.find("</critique>"), body.find("<critique")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(body.len());
        let section = text[from..from + end].trim();
        return (!section.is_empty()).then(|| section.to_owned());
    }
    None
}

/// The judge's consensus JSON, also in a code fence or after prose (with
/// braces of its own); the score as a number or a numeric string.
pub fn parse_consensus(answer: &str) -> Option<Consensus> {
    let value = answer.match_indices('{').find_map(|(at, _)| {
        let mut values = serde_json::Deserializer::from_str(&answer[at..]).into_iter::<serde_json::Value>();
        values
            .next()
            .and_then(Result::ok)
            .filter(|v| v.get("consensusScore").is_some())
    })?;
    let score = match value.get("consensusScore")? {
        serde_json::Value::String(s) => s.trim().parse::<f64>().ok()?,
        other => other.as_f64()?,
    };
    if !(0.0..=1.0).contains(&score) {
        return None;
    }
    Some(Consensus {
        score,
        reached: value.get("consensusReached").and_then(|v| v.as_bool()),
        reasoning: value
            .get("reasoning")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned(),
    })
}

/// The judge's confidence: the last line that states it ("Confidence
/// Score: 0.8", "**Confidence score (0-1):** 0.7", "Confidence: 85%").
pub fn parse_confidence(answer: &str) -> Option<f64> {
    answer.lines().rev().find_map(confidence_line)
}

/// The confidence a line states, when the line is a confidence statement:
/// it begins (after Markdown emphasis or list marks) with "confidence".
fn confidence_line(line: &str) -> Option<f64> {
    let stripped = line.trim_start_matches(|c: char| c.is_whitespace() || "*_#>-".contains(c));
    let lower = stripped.to_lowercase();
    let rest = lower.strip_prefix("confidence")?;
    let rest = rest
        .trim_start_matches(|c: char| c.is_whitespace() || c == '*' || c == '_')
        .trim_start_matches("score")
        .trim_start_matches("level")
        .trim_start();
    // A stated range such as "(0-1)" or "(0.0 to 1.0)".
    let rest = match rest.strip_prefix('(') {
        Some(inner) => &inner[inner.find(')')? + 1..],
        None => rest,
    };
    let rest = rest.trim_start_matches(|c: char| c.is_whitespace() || ":=*_-".contains(c));
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let value: f64 = number.trim_end_matches('.').parse().ok()?;
    let after = rest[number.len()..].trim_start();
    let value = if after.starts_with('%') {
        value / 100.0
    } else {
        value
    };
    (0.0..=1.0).contains(&value).then_some(value)
}

/// The judge's final plan: from its "Final Implementation Plan" heading (any
/// case or depth) on, without the confidence statement; the whole answer
/// when the heading is missing.
pub(super) fn final_plan(answer: &str) -> String {
    let lines: Vec<&str> = answer.lines().collect();
    let start = lines
        .iter()
        .position(|l| heading(l).is_some_and(|t| t.contains("final implementation plan")))
        .unwrap_or(0);
    let statement = lines
        .iter()
        .rposition(|l| confidence_line(l).is_some())
        .filter(|at| *at >= start);
    lines[start..]
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(start + i) != statement)
        .map(|(_, l)| *l)
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
    fn consensus_json_is_found_in_fences_after_prose_and_garbage_is_none() {
        let c = parse_consensus(
            "```json\n{\"consensusScore\": 0.93, \"consensusReached\": true, \"reasoning\": \"same\"}\n```",
        )
        .unwrap();
        assert_eq!(
            (c.score, c.reached, c.reasoning.as_str()),
            (0.93, Some(true), "same")
        );
        let prose = "The plans {mostly} agree. Here is my verdict:\n{\"consensusScore\": \"0.4\", \"consensusReached\": false, \"reasoning\": \"{different} stores\"}\nThanks.";
        let c = parse_consensus(prose).unwrap();
        assert_eq!((c.score, c.reached), (0.4, Some(false)));
        assert_eq!(
            parse_consensus("{\"consensusScore\": 0.5}").unwrap().reached,
            None
        );
        assert!(parse_consensus("I think they agree.").is_none());
        assert!(parse_consensus("{\"consensusScore\": 7}").is_none());
    }

    #[test]
    fn confidence_is_read_in_the_shapes_models_write_it() {
        for (answer, want) in [
            ("Plan\n\nConfidence Score: 0.85", Some(0.85)),
            ("**Confidence score (0-1):** 0.7", Some(0.7)),
            ("Confidence score (0.0 to 1.0): 0.9.", Some(0.9)),
            ("- confidence: 85%", Some(0.85)),
            ("CONFIDENCE SCORE = 1.0", Some(1.0)),
            ("My confidence score is high", None),
            ("Confidence Score: 7", None),
            ("Step 3 raises the confidence score of the cache", None),
        ] {
            assert_eq!(parse_confidence(answer), want, "{answer}");
        }
    }

    #[test]
    fn the_final_plan_keeps_its_own_lines_about_confidence() {
        let answer = "Some words\n## FINAL IMPLEMENTATION PLAN\n1. Compute the confidence score of each match\n## Checklist\n- [ ] Write the parser\n- [ ] Test it\n\n**Confidence Score:** 0.85";
        assert_eq!(parse_confidence(answer), Some(0.85));
        let plan = final_plan(answer);
        assert!(plan.starts_with("## FINAL IMPLEMENTATION PLAN"), "{plan}");
        assert!(
            plan.contains("Compute the confidence score of each match"),
            "{plan}"
        );
        assert!(!plan.contains("0.85"), "{plan}");
        assert_eq!(checklist(&plan), vec!["Write the parser", "Test it"]);
        // Without the heading: the whole answer, not a fragment.
        assert_eq!(final_plan("1. Do it\n2. Test it"), "1. Do it\n2. Test it");
    }

    #[test]
    fn the_checklist_comes_from_the_checklist_section_once_each() {
        let plan = "# Plan\n## Risks\n- [ ] not a step: a risk box\n## Checklist\n- [ ] Parse\n- [ ] parse\n  - [x] Test\n## Perspectives taken\n- Speed\n";
        assert_eq!(checklist(plan), vec!["Parse", "Test"]);
        // No checklist section: every box, once.
        assert_eq!(checklist("- [ ] A\n- [ ] B\n- [ ] A\n"), vec!["A", "B"]);
    }

    #[test]
    fn without_boxes_the_checklist_takes_the_steps_not_the_section_titles() {
        let plan = "# Plan\n1. **Components**\n   - greet.py\n2. **Testing**\n## Implementation steps\n1. Add the flag\n2. Use it\n";
        assert_eq!(checklist(plan), vec!["Add the flag", "Use it"]);
        assert_eq!(
            checklist("# Plan\n1. First\n   1. nested\n2. **Second**\n"),
            vec!["First", "Second"]
        );
    }

    #[test]
    fn each_plan_gets_the_tagged_critique_about_it_or_the_whole_answer() {
        let critiques = vec![
            Entry {
                id: "A".into(),
                model: "m1".into(),
                text: "Intro\n<critique of=\"B\">\n## Strengths\nB is fast\n### Weaknesses\nB is slow\n</critique>\n<Critique of='Plan C'>\n## Strengths\nC is wrong\n</critique>".into(),
            },
            Entry {
                id: "C".into(),
                model: "m3".into(),
                text: "## Critique of Plan B\nPlan B lacks tests\n### Critique of Plan A\nA is fine".into(),
            },
        ];
        let b = critiques_of("B", &critiques);
        assert!(
            b.contains("B is fast") && b.contains("### Weaknesses\nB is slow"),
            "{b}"
        );
        assert!(!b.contains("C is wrong") && !b.contains("Intro"), "{b}");
        // Untagged: the whole answer, headings and all.
        assert!(b.contains("Plan B lacks tests") && b.contains("A is fine"), "{b}");
        let c = critiques_of("C", &critiques);
        assert!(c.contains("C is wrong") && !c.contains("B is fast"), "{c}");
    }
}
