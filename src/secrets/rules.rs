//! The credential rules (`rules.yaml`), compiled once: a set of all the
//! regexes finds which rules match anywhere in a text, then each of those
//! rules' own regex finds where, and the spans are masked.

use regex::bytes::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use serde::Deserialize;
use std::collections::BTreeSet;

/// Compiled programs may grow this large: the set holds every rule at once.
const SIZE_LIMIT: usize = 64 << 20;
/// The lazy DFA's cache; a larger one keeps the set on its fast path over
/// long logs instead of falling back to the slower engines.
const DFA_SIZE_LIMIT: usize = 32 << 20;

/// Why the rules cannot be used: a defect in `rules.yaml`, caught by its tests.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error("the masking rules cannot be read: {0}")]
    Parse(String),
    #[error("masking rule {id}: {message}")]
    Rule { id: String, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    rules: Vec<RuleSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    id: String,
    /// The published format the rule follows (documentation only).
    #[allow(dead_code)]
    format: String,
    regex: String,
    #[serde(default)]
    allow: Vec<String>,
}

/// One compiled rule.
pub struct Rule {
    pub id: String,
    regex: Regex,
    /// Whether the regex has a `secret` group (only it is masked).
    grouped: bool,
    allow: Vec<Regex>,
}

impl Rule {
    /// The spans this rule masks in `text`.
    fn spans(&self, text: &[u8], out: &mut Vec<(usize, usize)>) {
        let mut keep = |start: usize, end: usize| {
            let value = &text[start..end];
            if !value.is_empty() && !self.allow.iter().any(|a| a.is_match(value)) {
                out.push((start, end));
            }
        };
        if self.grouped {
            for caps in self.regex.captures_iter(text) {
                if let Some(m) = caps.name("secret") {
                    keep(m.start(), m.end());
                }
            }
        } else {
            for m in self.regex.find_iter(text) {
                keep(m.start(), m.end());
            }
        }
    }
}

/// Text with what looked like credentials masked, and which rules masked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Masked {
    pub text: String,
    /// The ids of the rules that masked something, sorted.
    pub rules: BTreeSet<String>,
}

impl Masked {
    pub fn unchanged(text: &str) -> Masked {
        Masked {
            text: text.to_owned(),
            rules: BTreeSet::new(),
        }
    }
}

/// The compiled rule set.
pub struct RuleSet {
    set: RegexSet,
    rules: Vec<Rule>,
}

impl RuleSet {
    /// Reads and compiles the rules in `yaml` (the format of `rules.yaml`).
    pub fn parse(yaml: &str) -> Result<RuleSet, RulesError> {
        let file: RuleFile = yaml_serde::from_str(yaml).map_err(|e| RulesError::Parse(e.to_string()))?;
        let mut rules = Vec::with_capacity(file.rules.len());
        let mut ids = BTreeSet::new();
        for spec in file.rules {
            if !ids.insert(spec.id.clone()) {
                return Err(RulesError::Rule {
                    id: spec.id,
                    message: "comes twice; give each rule an id of its own".into(),
                });
            }
            rules.push(compile(spec)?);
        }
        let set = RegexSetBuilder::new(rules.iter().map(|r| r.regex.as_str()))
            .unicode(false)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(DFA_SIZE_LIMIT)
            .build()
            .map_err(|e| RulesError::Parse(format!("the rules do not compile together: {e}")))?;
        Ok(RuleSet { set, rules })
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// `text` with every span a rule finds replaced by `[masked: <rule id>]`.
    pub fn mask(&self, text: &str) -> Masked {
        let bytes = text.as_bytes();
        let hits = self.set.matches(bytes);
        if !hits.matched_any() {
            return Masked::unchanged(text);
        }
        let mut spans: Vec<(usize, usize, usize)> = Vec::new();
        let mut found = Vec::new();
        for index in hits.iter() {
            found.clear();
            self.rules[index].spans(bytes, &mut found);
            spans.extend(found.iter().map(|&(start, end)| (start, end, index)));
        }
        if spans.is_empty() {
            return Masked::unchanged(text);
        }
        // By start; at one start, the rule listed first names the mask.
        spans.sort_unstable_by_key(|&(start, end, index)| (start, index, end));
        let mut out = String::with_capacity(text.len());
        let mut rules = BTreeSet::new();
        let mut at = 0;
        let mut spans = spans.into_iter().peekable();
        while let Some((start, mut end, index)) = spans.next() {
            // Overlapping finds are one span.
            while let Some(&(next_start, next_end, _)) = spans.peek() {
                if next_start >= end {
                    break;
                }
                end = end.max(next_end);
                spans.next();
            }
            let start = floor_boundary(text, start).max(at);
            let end = ceil_boundary(text, end);
            if end <= start {
                continue;
            }
            let id = &self.rules[index].id;
            out.push_str(&text[at..start]);
            out.push_str("[masked: ");
            out.push_str(id);
            out.push(']');
            rules.insert(id.clone());
            at = end;
        }
        out.push_str(&text[at..]);
        Masked { text: out, rules }
    }
}

fn compile(spec: RuleSpec) -> Result<Rule, RulesError> {
    let build = |pattern: &str| {
        RegexBuilder::new(pattern)
            .unicode(false)
            .size_limit(SIZE_LIMIT)
            .build()
    };
    let failed = |what: &str, e: regex::Error| RulesError::Rule {
        id: spec.id.clone(),
        message: format!("{what} does not compile: {e}"),
    };
    let regex = build(&spec.regex).map_err(|e| failed("regex", e))?;
    let grouped = regex.capture_names().any(|n| n == Some("secret"));
    let allow = spec
        .allow
        .iter()
        .map(|a| build(a).map_err(|e| failed("an allow pattern", e)))
        .collect::<Result<_, _>>()?;
    Ok(Rule {
        id: spec.id,
        regex,
        grouped,
        allow,
    })
}

/// The nearest char boundary at or before `at` (a byte regex may stop
/// inside a multi-byte character).
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}
