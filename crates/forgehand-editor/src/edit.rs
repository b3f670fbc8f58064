//! `create`, `str_replace`, `insert` and `undo_edit`.

use super::history::History;
use super::text::{
    line_count, line_ending, line_of_offset, lines_with_endings, number_lines, read_text_file, to_crlf,
    Purpose,
};
use super::{EditorError, Limits};
use std::fs;
use std::path::Path;

/// Lines of context shown around an edit.
const SNIPPET_CONTEXT: usize = 4;

pub fn create(
    real: &Path,
    shown: &str,
    file_text: &str,
    history: &mut History,
) -> Result<String, EditorError> {
    if let Ok(meta) = fs::symlink_metadata(real) {
        let what = if meta.is_dir() { "a folder" } else { "a file" };
        return Err(EditorError::Refused(format!(
            "Cannot create {shown}: {what} already exists there, and `create` never overwrites. Use `view` to read it, then `str_replace` or `insert` to change it."
        )));
    }
    if let Some(parent) = real.parent() {
        fs::create_dir_all(parent).map_err(|e| EditorError::io(parent, e))?;
    }
    fs::write(real, file_text).map_err(|e| EditorError::io(real, e))?;
    history.record(real, None);
    Ok(format!("File created successfully at: {shown}"))
}

/// Reads a file that is about to be edited, refusing what cannot be edited.
fn read_editable(real: &Path, shown: &str, limits: &Limits) -> Result<Vec<u8>, EditorError> {
    let meta = fs::metadata(real).map_err(|e| EditorError::io(real, e))?;
    if meta.is_dir() {
        return Err(EditorError::Refused(format!(
            "{shown} is a folder; only files can be edited. Use `view` to list it."
        )));
    }
    read_text_file(real, shown, limits, Purpose::Edit)
}

fn write_edit(
    real: &Path,
    before: Vec<u8>,
    after: &[u8],
    history: &mut History,
) -> Result<bool, EditorError> {
    fs::write(real, after).map_err(|e| EditorError::io(real, e))?;
    Ok(history.record(real, Some(before)))
}

fn edited_message(shown: &str, after: &[u8], first_line: usize, last_line: usize, undoable: bool) -> String {
    let lines = lines_with_endings(after);
    let from = first_line.saturating_sub(SNIPPET_CONTEXT).max(1);
    let to = (last_line + SNIPPET_CONTEXT).min(lines.len());
    let mut out = format!(
        "The file {shown} has been edited. Here's the result of running `cat -n` on a snippet of {shown}:\n"
    );
    number_lines(&mut out, &lines, from, to, usize::MAX);
    out.push_str("Review the changes and make sure they are as expected. Edit the file again if necessary.");
    if !undoable {
        out.push_str(" (This edit is too large to be undone with `undo_edit`.)");
    }
    out
}

pub fn str_replace(
    real: &Path,
    shown: &str,
    old_str: &str,
    new_str: &str,
    limits: &Limits,
    history: &mut History,
) -> Result<String, EditorError> {
    if old_str.is_empty() {
        return Err(EditorError::InvalidArguments(
            "`old_str` is empty; give the exact text to replace (use `insert` to add text at a line).".into(),
        ));
    }
    let bytes = read_editable(real, shown, limits)?;
    let (mut old, mut new) = (old_str.to_owned(), new_str.to_owned());
    let mut offsets = find_all(&bytes, old.as_bytes());
    // A model usually writes `\n`; match a CRLF file anyway, keeping its endings.
    if offsets.is_empty() && line_ending(&bytes) == "\r\n" && old.contains('\n') && !old.contains("\r\n") {
        old = to_crlf(&old);
        new = to_crlf(&new);
        offsets = find_all(&bytes, old.as_bytes());
    }
    match offsets.len() {
        0 => Err(EditorError::Refused(format!(
            "No replacement was performed: `old_str` does not appear verbatim in {shown}. View the file (with `view_range` around the place) and copy the exact text, including indentation and whitespace."
        ))),
        1 => {
            let at = offsets[0];
            let mut after = Vec::with_capacity(bytes.len() + new.len());
            after.extend_from_slice(&bytes[..at]);
            after.extend_from_slice(new.as_bytes());
            after.extend_from_slice(&bytes[at + old.len()..]);
            let first = line_of_offset(&after, at);
            let last = line_of_offset(&after, at + new.len().saturating_sub(1)).max(first);
            let undoable = write_edit(real, bytes, &after, history)?;
            Ok(edited_message(shown, &after, first, last, undoable))
        }
        count => {
            let lines: Vec<String> = offsets.iter().map(|o| line_of_offset(&bytes, *o).to_string()).collect();
            Err(EditorError::Refused(format!(
                "No replacement was performed: `old_str` appears {count} times in {shown}, on lines {}. Include more of the surrounding lines in `old_str` so that it matches exactly once.",
                lines.join(", ")
            )))
        }
    }
}

/// Non-overlapping occurrences of `needle`, as byte offsets.
fn find_all(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = memchr::memmem::find(&haystack[from..], needle) {
        found.push(from + at);
        from += at + needle.len();
    }
    found
}

pub fn insert(
    real: &Path,
    shown: &str,
    insert_line: i64,
    new_str: &str,
    limits: &Limits,
    history: &mut History,
) -> Result<String, EditorError> {
    let bytes = read_editable(real, shown, limits)?;
    let total = line_count(&bytes);
    if insert_line < 0 || insert_line as u64 > total as u64 {
        return Err(EditorError::InvalidArguments(format!(
            "Invalid `insert_line` {insert_line}: it must be between 0 and {total} (the number of lines in {shown}). 0 inserts at the top; N inserts after line N."
        )));
    }
    let at_line = insert_line as usize;
    let eol = line_ending(&bytes);
    let mut text = if eol == "\r\n" {
        to_crlf(new_str)
    } else {
        new_str.to_owned()
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push_str(eol);
    }
    let lines = lines_with_endings(&bytes);
    let mut after = Vec::with_capacity(bytes.len() + text.len() + 2);
    for line in &lines[..at_line] {
        after.extend_from_slice(line);
    }
    // Inserting after a last line that has no line ending: give it one.
    if at_line == total && at_line > 0 && !bytes.ends_with(b"\n") {
        after.extend_from_slice(eol.as_bytes());
    }
    after.extend_from_slice(text.as_bytes());
    for line in &lines[at_line..] {
        after.extend_from_slice(line);
    }
    let inserted = line_count(text.as_bytes());
    let undoable = write_edit(real, bytes, &after, history)?;
    Ok(edited_message(
        shown,
        &after,
        at_line + 1,
        at_line + inserted.max(1),
        undoable,
    ))
}

pub fn undo(real: &Path, shown: &str, history: &mut History) -> Result<String, EditorError> {
    match history.pop(real) {
        None => Err(EditorError::Refused(format!(
            "No edit to undo for {shown}: `undo_edit` reverts the last `create`, `str_replace` or `insert` made to this file in this session, and there is none left."
        ))),
        Some(None) => {
            fs::remove_file(real).map_err(|e| EditorError::io(real, e))?;
            Ok(format!("Last edit to {shown} undone: the file it created was removed."))
        }
        Some(Some(before)) => {
            fs::write(real, &before).map_err(|e| EditorError::io(real, e))?;
            Ok(format!(
                "Last edit to {shown} undone successfully. Use `view` to see the file as it is now."
            ))
        }
    }
}
