//! Reading `.gitmodules` as text. It comes from the repository, which
//! anyone who can push may write, so it is parsed here rather than by
//! libgit2's config reader: no `include.path` is ever followed, nothing on
//! the host's disk is read, and only `path`, `url` and `update` are kept.

/// One `[submodule "name"]` section.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Declared {
    pub name: String,
    pub path: String,
    pub url: String,
    /// `update = none`: git leaves the submodule out by default.
    pub skipped: bool,
}

/// Largest `.gitmodules` read; a larger one is not read at all.
pub const MAX_BYTES: usize = 1 << 20;

/// Most sections read; the rest of the file is not.
pub const MAX_SECTIONS: usize = 256;

/// The submodules `text` declares, in its order; sections without a path
/// or a URL are left out, as git leaves them out. Only the first
/// [`MAX_SECTIONS`] sections are read.
pub fn parse(text: &str) -> Vec<Declared> {
    let mut found: Vec<Declared> = Vec::new();
    let mut current: Option<Declared> = None;
    let mut sections = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            sections += 1;
            if sections > MAX_SECTIONS {
                break;
            }
            found.extend(current.take());
            current = section_name(line).map(|name| Declared {
                name,
                ..Declared::default()
            });
            continue;
        }
        let Some(module) = current.as_mut() else {
            continue;
        };
        let (key, value) = match line.split_once('=') {
            Some((key, value)) => (key.trim(), value_of(value)),
            None => (line, String::new()),
        };
        match key.to_ascii_lowercase().as_str() {
            "path" => module.path = value.trim_end_matches('/').to_owned(),
            "url" => module.url = value,
            "update" => module.skipped = value == "none",
            _ => {}
        }
    }
    found.extend(current);
    found.retain(|m| !m.path.is_empty() && !m.url.is_empty());
    found
}

/// `name` of a `[submodule "name"]` header; `None` for other sections.
fn section_name(line: &str) -> Option<String> {
    let inner = line.strip_prefix('[')?.trim_start();
    let rest = inner.strip_prefix("submodule")?.trim_start();
    let quoted = rest.strip_prefix('"')?;
    let mut name = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => name.push(chars.next()?),
            '"' => return chars.as_str().trim_start().starts_with(']').then_some(name),
            c => name.push(c),
        }
    }
    None
}

/// A value as git reads it: quotes removed, escapes applied, a comment
/// outside quotes cut off, surrounding blanks trimmed.
fn value_of(raw: &str) -> String {
    let mut value = String::new();
    let mut quoted = false;
    let mut chars = raw.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => value.push('\n'),
                Some('t') => value.push('\t'),
                Some(other) => value.push(other),
                None => {}
            },
            '#' | ';' if !quoted => break,
            c => value.push(c),
        }
    }
    value.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_keys_quotes_and_comments_read_as_git_reads_them() {
        let text = "# vendored code\n[submodule \"lib\"]\n\tpath = vendored/lib\n\tURL = ../lib.git ; the forge's\n\
                    [core]\n\tpath = not/a/submodule\n\
                    [submodule \"odd \\\"name\\\"\"]\n\tpath = \"with space/x\"\n\turl = \"https://example.org/a#b.git\"\n\
                    [submodule \"off\"]\n\tpath = off\n\turl = ../off.git\n\tupdate = none\n\
                    [submodule \"no-url\"]\n\tpath = nothing\n";
        let found = parse(text);
        assert_eq!(
            found,
            vec![
                Declared {
                    name: "lib".into(),
                    path: "vendored/lib".into(),
                    url: "../lib.git".into(),
                    skipped: false
                },
                Declared {
                    name: "odd \"name\"".into(),
                    path: "with space/x".into(),
                    url: "https://example.org/a#b.git".into(),
                    skipped: false
                },
                Declared {
                    name: "off".into(),
                    path: "off".into(),
                    url: "../off.git".into(),
                    skipped: true
                },
            ]
        );
    }

    #[test]
    fn only_the_first_sections_are_read() {
        let text: String = (0..MAX_SECTIONS + 50)
            .map(|n| format!("[submodule \"m{n}\"]\n\tpath = m{n}\n\turl = ../m{n}.git\n"))
            .collect();
        assert_eq!(parse(&text).len(), MAX_SECTIONS);
    }

    #[test]
    fn an_include_is_never_followed() {
        let found =
            parse("[include]\n\tpath = /etc/passwd\n[submodule \"a\"]\n\tpath = a\n\turl = ../a.git\n");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].path, "a");
    }
}
