//! Sandbox images: which one a repository gets (language detection, per-repo
//! pins) and building `images/<name>/Dockerfile` through the Docker API.

mod build;
mod catalog;
mod detect;

pub use build::{build_images, image_present, BuildCache, ImageError};
pub use catalog::{catalog, ImageSource};
pub use detect::{detect_language, detect_language_by, Language};

use crate::config::ImagesConfig;

/// The tag forgehand gives the image built from `images/<name>`.
pub fn image_tag(config: &ImagesConfig, name: &str) -> String {
    format!("{}{}:{}", config.tag_prefix, name, config.tag)
}

/// The image a repository's settings name: a forgehand image name
/// (`python`) becomes forgehand's tag for it; any other reference (with a
/// registry, a tag or a digest) is used as written.
pub fn image_reference(config: &ImagesConfig, name: &str) -> String {
    if is_own_image_name(name) {
        image_tag(config, name.trim())
    } else {
        name.trim().to_owned()
    }
}

/// Whether `name` names one of forgehand's own images (`python`, built from
/// the binary or the operator's `images.dir`) rather than any other image reference.
pub fn is_own_image_name(name: &str) -> bool {
    !name.trim().contains(['/', ':', '@'])
}

/// The image a task on `repository`, whose files say it is in `language`,
/// runs in: a pin from `images.pins` when there is one, else the language's.
pub fn image_for_repository(config: &ImagesConfig, repository: &str, language: Language) -> String {
    if let Some(pinned) = config.pins.get(repository) {
        return pinned.clone();
    }
    image_tag(config, language.image_name())
}

/// The image a task on `repository` runs in: a pin from `images.pins`,
/// else the one the repository's settings choose, else the detected one.
pub fn chosen_image(
    config: &ImagesConfig,
    repository: &str,
    chosen: Option<&str>,
    language: Language,
) -> String {
    match (config.pins.get(repository), chosen) {
        (Some(pinned), _) => pinned.clone(),
        (None, Some(chosen)) => image_reference(config, chosen),
        (None, None) => image_for_repository(config, repository, language),
    }
}

/// Names of every image (built in, or from `images.dir`), sorted.
pub fn available_images(config: &ImagesConfig) -> std::io::Result<Vec<String>> {
    Ok(catalog(config)?.into_keys().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn a_pin_wins_over_detection() {
        let mut config = Config::defaults().images;
        config
            .pins
            .insert("acme/api".into(), "registry.local/acme:1".into());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("go.mod"), "module x").unwrap();
        assert_eq!(
            image_for_repository(&config, "acme/api", detect_language(dir.path())),
            "registry.local/acme:1"
        );
        assert_eq!(
            image_for_repository(&config, "acme/web", detect_language(dir.path())),
            "forgehand/go:latest"
        );
    }
}
