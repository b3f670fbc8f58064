//! `view`: a file as numbered lines, or a folder two levels deep.

use super::text::{line_count, lines_with_endings, number_lines, read_text_file, Purpose};
use super::{EditorError, Limits};
use std::fs;
use std::path::Path;

pub fn view(
    real: &Path,
    shown: &str,
    range: Option<(i64, i64)>,
    limits: &Limits,
) -> Result<String, EditorError> {
    let meta = fs::metadata(real).map_err(|e| EditorError::io(real, e))?;
    if meta.is_dir() {
        if range.is_some() {
            return Err(EditorError::InvalidArguments(format!(
                "`view_range` only applies to files, and {shown} is a folder. Call `view` on it without `view_range`."
            )));
        }
        return Ok(view_dir(real, shown, limits));
    }
    let bytes = read_text_file(real, shown, limits, Purpose::View)?;
    let lines = lines_with_endings(&bytes);
    let total = line_count(&bytes);
    let (first, last) = match range {
        None => (1, total),
        Some((start, end)) => check_range(start, end, total, shown)?,
    };
    let mut out = format!("Here's the result of running `cat -n` on {shown}:\n");
    if total == 0 {
        out.push_str("(the file is empty)\n");
        return Ok(out);
    }
    let budget = out.len() + limits.max_view_bytes;
    let shown_last = number_lines(&mut out, &lines, first, last, budget);
    if shown_last < last {
        out.push_str(&format!(
            "<response clipped: showed lines {first}-{shown_last} of {total}, the output limit is {} bytes. Use `view_range` to see more, e.g. [{}, {}].>\n",
            limits.max_view_bytes,
            shown_last + 1,
            (shown_last + 200).min(total)
        ));
    }
    Ok(out)
}

fn check_range(start: i64, end: i64, total: usize, shown: &str) -> Result<(usize, usize), EditorError> {
    let total_i = total as i64;
    let end_ok = end == -1 || (end >= start && end <= total_i);
    if start < 1 || start > total_i.max(1) || !end_ok || (total == 0 && start != 1) {
        return Err(EditorError::InvalidArguments(format!(
            "Invalid `view_range` [{start}, {end}]: {shown} has {total} lines. Start must be between 1 and {}, and end between start and {total}, or -1 for the end of the file.",
            total.max(1)
        )));
    }
    let last = if end == -1 { total } else { end as usize };
    Ok((start as usize, last))
}

fn view_dir(real: &Path, shown: &str, limits: &Limits) -> String {
    let shown = shown.trim_end_matches('/');
    let mut entries = Vec::new();
    let mut truncated = false;
    collect(
        real,
        Path::new(""),
        1,
        limits.max_dir_entries,
        &mut entries,
        &mut truncated,
    );
    let mut out = format!("Here's the files and directories up to 2 levels deep in {shown}, excluding hidden items:\n{shown}/\n");
    for (relative, is_dir) in &entries {
        out.push_str(&format!(
            "{shown}/{}{}\n",
            relative,
            if *is_dir { "/" } else { "" }
        ));
    }
    if entries.is_empty() {
        out.push_str("(the folder is empty)\n");
    }
    if truncated {
        out.push_str(&format!(
            "<listing clipped at {} entries; view a subfolder to see the rest>\n",
            limits.max_dir_entries
        ));
    }
    out
}

/// Lists `dir` (and one more level), sorted, hidden entries left out.
/// Symlinked folders are listed but not entered.
fn collect(
    dir: &Path,
    prefix: &Path,
    depth: usize,
    max: usize,
    out: &mut Vec<(String, bool)>,
    truncated: &mut bool,
) {
    let Ok(read) = fs::read_dir(dir) else { return };
    let mut children: Vec<(String, bool, bool)> = read
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                return None;
            }
            let file_type = entry.file_type().ok()?;
            let is_dir = file_type.is_dir() || (file_type.is_symlink() && entry.path().is_dir());
            Some((name, is_dir, file_type.is_symlink()))
        })
        .collect();
    children.sort();
    for (name, is_dir, is_symlink) in children {
        if out.len() >= max {
            *truncated = true;
            return;
        }
        let relative = prefix.join(&name);
        out.push((relative.to_string_lossy().into_owned(), is_dir));
        if is_dir && !is_symlink && depth < 2 {
            collect(&dir.join(&name), &relative, depth + 1, max, out, truncated);
        }
    }
}
