//! `agent.images`: screenshots and diagrams from the thread, downloaded
//! from the forge's own upload hosts and shown to models that take images.

use super::units::ByteSize;
use super::ConfigError;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadImagesConfig {
    /// Off: image links stay text and nothing is downloaded.
    pub enabled: bool,
    /// Images taken from one thread, in the order they appear.
    pub max_count: usize,
    /// The largest image downloaded; a larger one is left out with a note.
    pub max_bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RawThreadImages {
    pub enabled: bool,
    pub max_count: usize,
    pub max_bytes: ByteSize,
}

impl Default for RawThreadImages {
    fn default() -> Self {
        RawThreadImages {
            enabled: true,
            max_count: 8,
            max_bytes: ByteSize(5 << 20),
        }
    }
}

/// The most an operator may allow per image: OpenAI's and Gemini's 20 MB.
const MOST_BYTES: u64 = 20 << 20;

pub(super) fn resolve(raw: RawThreadImages) -> Result<ThreadImagesConfig, ConfigError> {
    let bytes = raw.max_bytes.bytes();
    if !(1024..=MOST_BYTES).contains(&bytes) {
        return Err(ConfigError::invalid(
            "agent.images.max_bytes",
            r#"use a size from "1k" to "20m" (default "5m"; Anthropic takes at most 5 MB of base64 per image)"#,
        ));
    }
    if raw.max_count > 100 {
        return Err(ConfigError::invalid(
            "agent.images.max_count",
            "use at most 100 (default 8; Anthropic takes at most 100 images per request)",
        ));
    }
    Ok(ThreadImagesConfig {
        enabled: raw.enabled && raw.max_count > 0,
        max_count: raw.max_count,
        max_bytes: bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bad_sizes() {
        let config = resolve(RawThreadImages::default()).unwrap();
        assert_eq!(
            config,
            ThreadImagesConfig {
                enabled: true,
                max_count: 8,
                max_bytes: 5 << 20
            }
        );
        let too_big = RawThreadImages {
            max_bytes: ByteSize(50 << 20),
            ..RawThreadImages::default()
        };
        let err = resolve(too_big).unwrap_err().to_string();
        assert!(err.contains("agent.images.max_bytes"), "{err}");
    }
}
