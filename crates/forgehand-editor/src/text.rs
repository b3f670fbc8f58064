//! Line handling shared by `view` and the edit commands. Files are handled as
//! bytes, so any encoding survives an edit; text is decoded lossily only for
//! display.

use super::{EditorError, Limits};
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

/// Bytes looked at to decide whether a file is binary.
const SNIFF_BYTES: usize = 8192;

/// A NUL byte in the first few KiB marks a binary file (as git and grep do).
pub fn is_binary(bytes: &[u8]) -> bool {
    memchr::memchr(0, &bytes[..bytes.len().min(SNIFF_BYTES)]).is_some()
}

/// Why a file is read; it decides the advice given when it is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    View,
    Edit,
}

/// Reads a text file for `view` or an edit, refusing files that are too big
/// or binary with advice that fits what the model was trying to do.
pub fn read_text_file(
    real: &Path,
    shown: &str,
    limits: &Limits,
    purpose: Purpose,
) -> Result<Vec<u8>, EditorError> {
    let meta = fs::metadata(real).map_err(|e| EditorError::io(real, e))?;
    if meta.len() > limits.max_file_bytes {
        let advice = match purpose {
            Purpose::View => format!("Use the command executor for it, e.g. `sed -n '1,100p' {shown}` or `grep -n PATTERN {shown}`."),
            Purpose::Edit => "Change it with the command executor (e.g. `sed -i`).".to_owned(),
        };
        return Err(EditorError::Refused(format!(
            "{shown} is {} bytes, more than the editor handles ({} bytes). {advice}",
            meta.len(),
            limits.max_file_bytes
        )));
    }
    let bytes = fs::read(real).map_err(|e| EditorError::io(real, e))?;
    if is_binary(&bytes) {
        let advice = match purpose {
            Purpose::View => {
                format!("Inspect it with the command executor (e.g. `file {shown}` or `xxd {shown} | head`).")
            }
            Purpose::Edit => "The editor only edits text.".to_owned(),
        };
        return Err(EditorError::Refused(format!(
            "{shown} is a binary file ({} bytes); the editor only handles text. {advice}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// The lines of `bytes`, each with its line ending.
pub fn lines_with_endings(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split_inclusive(|b| *b == b'\n').collect()
}

pub fn line_count(bytes: &[u8]) -> usize {
    let newlines = memchr::memchr_iter(b'\n', bytes).count();
    if bytes.last().is_some_and(|b| *b != b'\n') {
        newlines + 1
    } else {
        newlines
    }
}

/// 1-based number of the line holding byte `offset`.
pub fn line_of_offset(bytes: &[u8], offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &bytes[..offset.min(bytes.len())]).count() + 1
}

/// The file's line ending: CRLF when it has any, else LF.
pub fn line_ending(bytes: &[u8]) -> &'static str {
    if memchr::memmem::find(bytes, b"\r\n").is_some() {
        "\r\n"
    } else {
        "\n"
    }
}

/// Turns bare `\n` into `\r\n`, leaving existing `\r\n` alone.
pub fn to_crlf(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut previous = '\0';
    for c in text.chars() {
        if c == '\n' && previous != '\r' {
            out.push('\r');
        }
        out.push(c);
        previous = c;
    }
    out
}

/// Appends lines `first..=last` (1-based) as `cat -n` prints them, stopping
/// before `budget` bytes. Returns the last line number written.
pub fn number_lines(out: &mut String, lines: &[&[u8]], first: usize, last: usize, budget: usize) -> usize {
    let mut written = first.saturating_sub(1);
    for number in first..=last {
        let Some(line) = lines.get(number - 1) else { break };
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let before = out.len();
        let _ = writeln!(out, "{number:>6}\t{}", String::from_utf8_lossy(line));
        if out.len() > budget && number > first {
            out.truncate(before);
            break;
        }
        written = number;
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_with_or_without_a_final_newline() {
        assert_eq!(line_count(b""), 0);
        assert_eq!(line_count(b"a"), 1);
        assert_eq!(line_count(b"a\n"), 1);
        assert_eq!(line_count(b"a\nb"), 2);
        assert_eq!(line_count(b"a\r\nb\r\n"), 2);
    }

    #[test]
    fn crlf_conversion_leaves_existing_pairs() {
        assert_eq!(to_crlf("a\nb\r\nc"), "a\r\nb\r\nc");
    }

    #[test]
    fn numbering_is_cat_n_style() {
        let mut out = String::new();
        let last = number_lines(&mut out, &lines_with_endings(b"x\r\ny\n"), 1, 2, 1000);
        assert_eq!(out, "     1\tx\n     2\ty\n");
        assert_eq!(last, 2);
    }
}
