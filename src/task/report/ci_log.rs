//! A failed check's log cut to what a model needs: escape codes and
//! GitHub's per-line timestamps removed ([`clean`]), the lines that name
//! errors kept from anywhere, then the tail ([`useful_tail`]). The caller
//! masks secrets between the two, over the whole cleaned log: a key block
//! spans lines, and a token cut at the edge of what is kept would no
//! longer read as one.

/// Most characters of one check's log given to the model.
pub(in crate::task) const LOG_CHARS: usize = 12_000;
/// Lines of the tail kept.
const TAIL_LINES: usize = 150;
/// Earlier lines that name an error, kept before the tail.
const ERROR_LINES: usize = 30;

/// `log` without terminal escape codes, carriage returns or leading
/// timestamps, line by line.
pub(in crate::task) fn clean(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    for line in log.lines() {
        out.push_str(&clean_line(line));
        out.push('\n');
    }
    out
}

/// The useful part of a [`clean`]ed log.
pub(in crate::task) fn useful_tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let tail_from = lines.len().saturating_sub(TAIL_LINES);
    let mut out = String::new();
    let earlier: Vec<&&str> = lines[..tail_from]
        .iter()
        .filter(|l| names_an_error(l))
        .take(ERROR_LINES)
        .collect();
    if !earlier.is_empty() {
        out.push_str("[lines naming errors earlier in the log]\n");
        for line in earlier {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("[the log's last lines]\n");
    } else if tail_from > 0 {
        out.push_str(&format!("[{tail_from} earlier lines left out]\n"));
    }
    for line in &lines[tail_from..] {
        out.push_str(line);
        out.push('\n');
    }
    keep_last_chars(&out, LOG_CHARS)
}

/// A line without terminal escape codes or a leading RFC 3339 timestamp.
fn clean_line(line: &str) -> String {
    let mut text = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte.
            if chars.peek() == Some(&'[') {
                chars.next();
                for next in chars.by_ref() {
                    if ('@'..='~').contains(&next) {
                        break;
                    }
                }
            }
            continue;
        }
        if c != '\r' {
            text.push(c);
        }
    }
    strip_timestamp(&text).to_owned()
}

/// `2026-11-26T10:00:00.1234567Z rest` -> `rest`.
fn strip_timestamp(line: &str) -> &str {
    let Some((first, rest)) = line.split_once(' ') else {
        return line;
    };
    let looks_like_time = first.len() >= 20
        && first.as_bytes().get(4) == Some(&b'-')
        && first.as_bytes().get(10) == Some(&b'T')
        && first.ends_with('Z');
    if looks_like_time {
        rest
    } else {
        line
    }
}

fn names_an_error(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    ["error", "failed", "failure", "panicked", "assert", "traceback"]
        .iter()
        .any(|w| lower.contains(w))
}

fn keep_last_chars(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let kept: String = text.chars().skip(count - max).collect();
    format!("[… {} characters left out]\n{kept}", count - max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_keeps_its_error_lines_and_tail_without_escapes_or_timestamps() {
        let mut log = String::new();
        log.push_str("2026-11-26T10:00:00.1234567Z \u{1b}[36;1mcargo build\u{1b}[0m\r\n");
        for i in 0..400 {
            log.push_str(&format!("2026-11-26T10:00:01.0000000Z line {i}\n"));
            if i == 10 {
                log.push_str("error[E0308]: mismatched types\n");
            }
        }
        log.push_str("test greet::says_hello ... FAILED\n");
        let tail = useful_tail(&clean(&log));
        assert!(tail.contains("error[E0308]: mismatched types"), "{tail}");
        assert!(
            tail.contains("line 399\ntest greet::says_hello ... FAILED"),
            "{tail}"
        );
        assert!(!tail.contains("line 100\n"));
        assert!(!tail.contains('\u{1b}') && !tail.contains("2026-11-26T"));
        assert_eq!(clean_line("\u{1b}[31mred\u{1b}[0m"), "red");
        let long = useful_tail(&clean(&"x".repeat(50_000)));
        assert!(long.chars().count() < LOG_CHARS + 100);
    }
}
