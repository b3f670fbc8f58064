//! Picks a sandbox image for a checked-out repository from the files at its
//! root.

use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Python,
    Node,
    Go,
    Rust,
    Java,
    Base,
}

impl Language {
    /// The folder under `images/` (and the image name) for this language.
    pub fn image_name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Node => "node",
            Language::Go => "go",
            Language::Rust => "rust",
            Language::Java => "java",
            Language::Base => "base",
        }
    }
}

/// Marker files, checked in this order; the first language with one wins.
const MARKERS: [(Language, &[&str]); 5] = [
    (
        Language::Python,
        &["pyproject.toml", "requirements.txt", "setup.py"],
    ),
    (Language::Node, &["package.json"]),
    (Language::Go, &["go.mod"]),
    (Language::Rust, &["Cargo.toml"]),
    (Language::Java, &["pom.xml", "build.gradle", "build.gradle.kts"]),
];

pub fn detect_language(checkout: &Path) -> Language {
    detect_language_by(|name| checkout.join(name).is_file())
}

/// The same, asking `has_file` whether the top level holds a file (a
/// work tree, or a commit's tree before its files are written).
pub fn detect_language_by(has_file: impl Fn(&str) -> bool) -> Language {
    MARKERS
        .iter()
        .find(|(_, files)| files.iter().any(|f| has_file(f)))
        .map(|(language, _)| *language)
        .unwrap_or(Language::Base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect_with(files: &[&str]) -> Language {
        let dir = tempfile::tempdir().unwrap();
        for file in files {
            std::fs::write(dir.path().join(file), "").unwrap();
        }
        detect_language(dir.path())
    }

    #[test]
    fn each_marker_picks_its_language() {
        let cases: [(&[&str], Language); 11] = [
            (&["pyproject.toml"], Language::Python),
            (&["requirements.txt"], Language::Python),
            (&["setup.py"], Language::Python),
            (&["package.json"], Language::Node),
            (&["go.mod"], Language::Go),
            (&["Cargo.toml"], Language::Rust),
            (&["pom.xml"], Language::Java),
            (&["build.gradle"], Language::Java),
            (&["build.gradle.kts"], Language::Java),
            (&["README.md"], Language::Base),
            (&[], Language::Base),
        ];
        for (files, expected) in cases {
            assert_eq!(detect_with(files), expected, "files {files:?}");
        }
    }

    #[test]
    fn a_folder_named_like_a_marker_does_not_count() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("go.mod")).unwrap();
        assert_eq!(detect_language(dir.path()), Language::Base);
    }
}
