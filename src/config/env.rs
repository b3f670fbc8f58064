//! `${VAR}` and `${VAR:-default}` substitution in every string value of the
//! configuration, before it is deserialized. `$$` writes a literal `$`.

use super::ConfigError;
use yaml_serde::Value;

/// Replaces variable references in every string of `value`, in place.
/// `lookup` returns a variable's value (the process environment in production).
pub fn substitute(
    value: &mut Value,
    key_path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    match value {
        Value::String(text) => *text = substitute_str(text, key_path, lookup)?,
        Value::Sequence(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                substitute(item, &format!("{key_path}[{index}]"), lookup)?;
            }
        }
        Value::Mapping(map) => {
            for (key, item) in map.iter_mut() {
                let name = match key {
                    Value::String(name) => name.clone(),
                    other => yaml_serde::to_string(other).unwrap_or_default().trim().to_owned(),
                };
                let child = if key_path.is_empty() {
                    name
                } else {
                    format!("{key_path}.{name}")
                };
                substitute(item, &child, lookup)?;
            }
        }
        Value::Tagged(tagged) => substitute(&mut tagged.value, key_path, lookup)?,
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
    Ok(())
}

fn substitute_str(
    text: &str,
    key_path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body.find('}').ok_or_else(|| ConfigError::Invalid {
                key: key_path.to_owned(),
                message: format!(r#""{text}" has "${{" without a closing "}}"; write ${{VAR}}, ${{VAR:-default}} or $$ for a literal $"#),
            })?;
            let reference = &body[..end];
            let (name, default) = match reference.split_once(":-") {
                Some((name, default)) => (name, Some(default)),
                None => (reference, None),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ConfigError::Invalid {
                    key: key_path.to_owned(),
                    message: format!(
                        r#""${{{reference}}}" is not a variable reference; names use letters, digits and "_""#
                    ),
                });
            }
            match (lookup(name).filter(|v| !v.is_empty()), default) {
                (Some(found), _) => out.push_str(&found),
                (None, Some(default)) => out.push_str(default),
                (None, None) => {
                    return Err(ConfigError::MissingEnv {
                        key: key_path.to_owned(),
                        var: name.to_owned(),
                    })
                }
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(name: &str) -> Option<String> {
        match name {
            "HOME_DIR" => Some("/home/x".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn substitutes_set_defaulted_and_escaped_references() {
        let sub = |s: &str| substitute_str(s, "k", &lookup);
        assert_eq!(sub("${HOME_DIR}/a").ok(), Some("/home/x/a".into()));
        assert_eq!(sub("${NOPE:-fallback}").ok(), Some("fallback".into()));
        assert_eq!(sub("${EMPTY:-fallback}").ok(), Some("fallback".into()));
        assert_eq!(sub("cost $$5 and $x").ok(), Some("cost $5 and $x".into()));
        assert_eq!(sub("${NOPE:-}").ok(), Some(String::new()));
    }

    #[test]
    fn a_missing_variable_names_the_key_and_the_variable() {
        let err = substitute_str("${NOPE}", "daemon.state_dir", &lookup).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("daemon.state_dir") && text.contains("NOPE"),
            "{text}"
        );
    }

    #[test]
    fn an_unclosed_reference_is_an_error() {
        assert!(substitute_str("${NOPE", "k", &lookup).is_err());
        assert!(substitute_str("${bad name}", "k", &lookup).is_err());
    }
}
