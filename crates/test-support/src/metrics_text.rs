//! A strict reader of the Prometheus text format 0.0.4 (the "Exposition
//! formats" page of the Prometheus documentation), written apart from
//! the product's encoder so the two cannot share a mistake. Stricter than
//! Prometheus itself: every family must have `# HELP` and `# TYPE` before
//! its samples, each once; a family's samples come together; sample names
//! are the family's name (with `_bucket`, `_sum`, `_count` for histograms
//! and summaries); no OpenMetrics-only line (`# UNIT`, `# EOF`) and no
//! other comment.

use std::collections::{BTreeMap, HashSet};

#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub kind: String,
    pub help: String,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The families of `text`, in order, or what is wrong (with the line).
pub fn parse(text: &str) -> Result<Vec<Family>, String> {
    let mut families: Vec<Family> = Vec::new();
    let mut helped: HashSet<String> = HashSet::new();
    let mut pending_help: BTreeMap<String, String> = BTreeMap::new();
    let mut ended: HashSet<String> = HashSet::new();
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the text does not end with a line feed".into());
    }
    for (n, line) in text.lines().enumerate() {
        let at = |why: String| format!("line {}: {why}: {line:?}", n + 1);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            check_name(name).map_err(at)?;
            if !helped.insert(name.to_owned()) {
                return Err(at(format!("a second HELP for {name}")));
            }
            unescape(help, false).map_err(at)?;
            pending_help.insert(name.to_owned(), help.to_owned());
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest
                .split_once(' ')
                .ok_or_else(|| at("a TYPE without a type".into()))?;
            check_name(name).map_err(at)?;
            if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                return Err(at(format!("{kind:?} is not a type of the text format")));
            }
            if families.iter().any(|f| f.name == name) {
                return Err(at(format!("a second TYPE for {name}")));
            }
            let Some(help) = pending_help.remove(name) else {
                return Err(at(format!("no HELP for {name} before its TYPE")));
            };
            if let Some(open) = families.last() {
                ended.insert(open.name.clone());
            }
            families.push(Family {
                name: name.to_owned(),
                kind: kind.to_owned(),
                help,
                samples: Vec::new(),
            });
            continue;
        }
        if line.starts_with('#') {
            return Err(at("a comment that is not HELP or TYPE".into()));
        }
        let sample = parse_sample(line).map_err(at)?;
        let Some(family) = families.last_mut() else {
            return Err(at("a sample before any TYPE".into()));
        };
        if !belongs(&sample.name, family) {
            let owner = families.iter().find(|f| belongs(&sample.name, f));
            return Err(at(match owner {
                Some(f) if ended.contains(&f.name) => format!("a sample of {} after its group ended", f.name),
                _ => format!("{} has no HELP and TYPE of its own", sample.name),
            }));
        }
        family.samples.push(sample);
    }
    if let Some(name) = pending_help.keys().next() {
        return Err(format!("HELP for {name} but no TYPE"));
    }
    for family in &families {
        check_histogram(family)?;
    }
    Ok(families)
}

/// Whether a sample named `name` is one of `family`'s.
fn belongs(name: &str, family: &Family) -> bool {
    match family.kind.as_str() {
        "histogram" => ["_bucket", "_sum", "_count"]
            .iter()
            .any(|suffix| name.strip_suffix(suffix) == Some(family.name.as_str())),
        "summary" => {
            name == family.name
                || ["_sum", "_count"]
                    .iter()
                    .any(|suffix| name.strip_suffix(suffix) == Some(family.name.as_str()))
        }
        _ => name == family.name,
    }
}

/// Every histogram series has a `+Inf` bucket equal to its `_count`.
fn check_histogram(family: &Family) -> Result<(), String> {
    if family.kind != "histogram" {
        return Ok(());
    }
    for count in family.samples.iter().filter(|s| s.name.ends_with("_count")) {
        let infinite = family.samples.iter().find(|s| {
            s.name.ends_with("_bucket")
                && s.labels.get("le").map(String::as_str) == Some("+Inf")
                && s.labels
                    .iter()
                    .filter(|(k, _)| *k != "le")
                    .eq(count.labels.iter())
        });
        match infinite {
            Some(bucket) if bucket.value == count.value => {}
            _ => {
                return Err(format!(
                    "{}: no +Inf bucket equal to _count for {:?}",
                    family.name, count.labels
                ))
            }
        }
    }
    Ok(())
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if first_ok && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
        Ok(())
    } else {
        Err(format!("{name:?} is not a metric name"))
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
    let name = &line[..name_end];
    check_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(inner)?;
        labels = parsed;
        rest = after;
    }
    let rest = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let mut fields = rest.split(' ');
    let value = parse_value(fields.next().unwrap_or_default())?;
    if let Some(timestamp) = fields.next() {
        timestamp
            .parse::<i64>()
            .map_err(|_| format!("{timestamp:?} is not a timestamp in milliseconds"))?;
    }
    if fields.next().is_some() {
        return Err("more than a value and a timestamp".into());
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// `name="value",...}` and what follows the closing brace.
fn parse_labels(mut text: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    loop {
        if let Some(after) = text.strip_prefix('}') {
            return Ok((labels, after));
        }
        let (name, after) = text.split_once("=\"").ok_or("a label without =\"")?;
        if name.is_empty()
            || name.starts_with(|c: char| c.is_ascii_digit())
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format!("{name:?} is not a label name"));
        }
        let (value, after) = label_value(after)?;
        if labels.insert(name.to_owned(), value).is_some() {
            return Err(format!("label {name} twice"));
        }
        text = after.strip_prefix(',').unwrap_or(after);
        if !after.starts_with([',', '}']) {
            return Err("labels not separated by commas".into());
        }
    }
}

/// A label value up to its closing quote, unescaped, and what follows.
fn label_value(text: &str) -> Result<(String, &str), String> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return Ok((unescape(&text[..i], true)?, &text[i + 1..])),
            (false, '\n') => return Err("a line feed in a label value".into()),
            _ => {}
        }
    }
    Err("a label value without its closing quote".into())
}

/// `\\` and `\n` (and, in label values, `\"`) are the only escapes.
fn unescape(text: &str, label: bool) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if label => out.push('"'),
            other => {
                return Err(format!(
                    "the escape \\{} is not in the text format",
                    other.unwrap_or(' ')
                ))
            }
        }
    }
    Ok(out)
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => text
            .parse::<f64>()
            .map_err(|_| format!("{text:?} is not a value")),
    }
}

/// `promtool check metrics` (Debian's `prometheus`, which
/// scripts/dev-env.sh installs) on `text`: `Err` with its complaints. When
/// promtool is missing this fails under `CI=true` and is skipped (with a
/// note) elsewhere.
pub fn promtool_check(text: &str) -> Result<(), String> {
    use std::io::Write as _;
    let spawned = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let how = "promtool is missing: install Debian's prometheus package (scripts/dev-env.sh does)";
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{how}");
            eprintln!("skipping the promtool check: {how}");
            return Ok(());
        }
        Err(e) => return Err(format!("cannot run promtool: {e}")),
    };
    let mut stdin = child.stdin.take().ok_or("promtool's stdin")?;
    stdin.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    drop(stdin);
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    match output.status.success() && said.trim().is_empty() {
        true => Ok(()),
        false => Err(format!("promtool check metrics ({}): {said}", output.status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_text_reads_and_every_rule_refuses_its_breach() {
        let good = "# HELP a_total Things.\n# TYPE a_total counter\na_total{k=\"v \\\"q\\\"\"} 3\n\
                    # HELP h Times.\n# TYPE h histogram\nh_bucket{le=\"1.0\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3.5\nh_count 2\n";
        let families = parse(good).unwrap();
        assert_eq!(families.len(), 2);
        assert_eq!(families[0].samples[0].labels["k"], "v \"q\"");
        for bad in [
            "# TYPE a counter\na 1\n",
            "# HELP a A.\na 1\n",
            "# HELP a_total A.\n# TYPE a_total counter\na 1\n",
            "# HELP a A.\n# TYPE a counter\na 1\n# EOF\n",
            "# HELP a A.\n# TYPE a gauge\n# UNIT a seconds\na 1\n",
            "# HELP a A.\n# TYPE a gauge\na{1x=\"v\"} 1\n",
            "# HELP a A.\n# TYPE a gauge\na one\n",
            "# HELP a A.\n# TYPE a gauge\na 1\n# HELP b B.\n# TYPE b gauge\nb 1\na 2\n",
            "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1.0\"} 1\nh_count 1\n",
            "# HELP a A.\n# TYPE a info\na 1\n",
            "# HELP a A.\n# TYPE a gauge\na 1",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
