//! Whether a comment mentions an account: the one rule both the mention
//! triggers and a task's claim and approval read comments by.

/// Whether `body` mentions `@login`: as a word of its own (not an e-mail
/// address, not a longer name), outside quoted lines and code.
pub fn mentions(body: &str, login: &str) -> bool {
    let wanted = format!("@{}", login.to_ascii_lowercase());
    let mut in_fence = false;
    for line in body.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || trimmed.starts_with('>') {
            continue;
        }
        let prose = strip_code_spans(line).to_ascii_lowercase();
        let mut from = 0;
        while let Some(at) = prose[from..].find(&wanted) {
            let start = from + at;
            let end = start + wanted.len();
            let before = prose[..start].chars().next_back();
            let after = prose[end..].chars().next();
            let word_before = before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
            let word_after = after.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == '[');
            if !word_before && !word_after {
                return true;
            }
            from = end;
        }
    }
    false
}

/// `line` without its `inline code` spans.
fn strip_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::mentions;

    #[test]
    fn a_mention_is_a_word_of_its_own_outside_quotes_and_code() {
        assert!(mentions(
            "@forgehand-bot please fix the greeting",
            "forgehand-bot"
        ));
        assert!(mentions("Could you look, @Forgehand-Bot?", "forgehand-bot"));
        assert!(mentions("cc @forgehand-bot.", "forgehand-bot"));
        assert!(mentions("@fh[bot] do it", "fh[bot]"));
        assert!(!mentions("@forgehand-bot2 do it", "forgehand-bot"));
        assert!(!mentions("write to me@forgehand-bot.example", "forgehand-bot"));
        assert!(!mentions("> @forgehand-bot please fix\nI agree", "forgehand-bot"));
        assert!(!mentions("see `@forgehand-bot run`", "forgehand-bot"));
        assert!(!mentions("```\n@forgehand-bot\n```", "forgehand-bot"));
        assert!(!mentions("nothing here", "forgehand-bot"));
        assert!(mentions("```\ncode\n```\nthen @forgehand-bot", "forgehand-bot"));
    }
}
