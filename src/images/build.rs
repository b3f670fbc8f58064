//! `forgehand images build`: builds `images/<name>/Dockerfile` through the
//! Docker API, streaming the build's output to a progress callback.

use super::image_tag;
use crate::config::ImagesConfig;
use crate::sandbox::helper::{self, EditorBinary};
use crate::sandbox::SandboxError;
use bollard::query_parameters::BuildImageOptionsBuilder;
use bollard::Docker;
use futures_util::StreamExt;
use std::collections::HashMap;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("no image named {name:?} under {dir}; known images: {known}")]
    Unknown {
        name: String,
        dir: PathBuf,
        known: String,
    },
    #[error("cannot read the image folder {dir}: {source}; set images.dir in config.yaml")]
    Folder {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("building image {tag} failed: {message}")]
    BuildFailed { tag: String, message: String },
    #[error(transparent)]
    Docker(#[from] SandboxError),
}

/// How a build treats Docker's layer cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuildCache {
    /// Reuse cached layers: a rebuild of an unchanged Dockerfile is instant.
    Use,
    /// Run every step again, e.g. to pick up package updates.
    Ignore,
}

/// Builds the named images (all of them when `names` is empty) and returns
/// their tags. `progress` receives every line of build output.
pub async fn build_images(
    docker: &Docker,
    config: &ImagesConfig,
    editor: &EditorBinary,
    names: &[String],
    cache: BuildCache,
    progress: &mut (dyn FnMut(&str, &str) + Send),
) -> Result<Vec<String>, ImageError> {
    let known = super::available_images(config).map_err(|source| ImageError::Folder {
        dir: config.dir.clone(),
        source,
    })?;
    let selected: Vec<String> = if names.is_empty() {
        known.clone()
    } else {
        names.to_vec()
    };
    for name in &selected {
        if !known.contains(name) {
            return Err(ImageError::Unknown {
                name: name.clone(),
                dir: config.dir.clone(),
                known: known.join(", "),
            });
        }
    }
    let mut tags = Vec::new();
    for name in &selected {
        tags.push(build_one(docker, config, editor, name, cache, progress).await?);
    }
    Ok(tags)
}

async fn build_one(
    docker: &Docker,
    config: &ImagesConfig,
    editor: &EditorBinary,
    name: &str,
    cache: BuildCache,
    progress: &mut (dyn FnMut(&str, &str) + Send),
) -> Result<String, ImageError> {
    let tag = image_tag(config, name);
    let dir = config.dir.join(name);
    let context = {
        let context_dir = dir.clone();
        let editor = editor.clone();
        tokio::task::spawn_blocking(move || {
            let mut builder = tar::Builder::new(Vec::new());
            builder.follow_symlinks(false);
            builder.append_dir_all(".", &context_dir)?;
            // Every Dockerfile copies the static editor from its context.
            let mut header = tar::Header::new_gnu();
            header.set_size(editor.bytes().len() as u64);
            header.set_mode(0o755);
            header.set_entry_type(tar::EntryType::Regular);
            builder.append_data(&mut header, helper::FILE_NAME, editor.bytes())?;
            builder.into_inner()
        })
        .await
        .map_err(|e| ImageError::Folder {
            dir: dir.clone(),
            source: std::io::Error::other(e),
        })?
        .map_err(|source| ImageError::Folder {
            dir: dir.clone(),
            source,
        })?
    };
    let build_args = HashMap::from([("BASE_IMAGE", config.base_image.as_str())]);
    // The sandbox backend compares this with its own editor to skip the copy.
    let labels = HashMap::from([(helper::IMAGE_LABEL, editor.sha256())]);
    let options = BuildImageOptionsBuilder::default()
        .dockerfile("Dockerfile")
        .t(&tag)
        .rm(true)
        .forcerm(true)
        .nocache(cache == BuildCache::Ignore)
        .buildargs(&build_args)
        .labels(&labels)
        .networkmode(&config.build_network)
        .build();
    progress(name, &format!("building {tag} from {}", dir.display()));
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(line) = info.stream.as_deref().or(info.status.as_deref()) {
                    for line in line.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
                        progress(name, line);
                    }
                }
            }
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                let hint = if error.contains(&config.base_image) || error.contains("pull access denied") {
                    format!("; the base image {} must be present (run scripts/dev-env.sh, or set images.base_image)", config.base_image)
                } else {
                    String::new()
                };
                return Err(ImageError::BuildFailed {
                    tag,
                    message: format!("{error}{hint}"),
                });
            }
            Err(err) => {
                return Err(ImageError::BuildFailed {
                    tag,
                    message: err.to_string(),
                })
            }
        }
    }
    if !image_present(docker, &tag).await? {
        return Err(ImageError::BuildFailed {
            tag,
            message: "the build ended without producing the image".into(),
        });
    }
    progress(name, &format!("built {tag}"));
    Ok(tag)
}

/// Whether the engine has `image` (a tag or id).
pub async fn image_present(docker: &Docker, image: &str) -> Result<bool, SandboxError> {
    match docker.inspect_image(image).await {
        Ok(_) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(false),
        Err(err) => Err(SandboxError::Refused {
            engine: crate::sandbox::docker::ENGINE,
            action: format!("inspect image {image}"),
            detail: err.to_string(),
            retryable: true,
        }),
    }
}
