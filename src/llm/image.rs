//! An image in a user turn (a screenshot from the thread), and what each
//! API accepts of one. The bytes travel base64-encoded with their media
//! type, which forgehand read from the bytes themselves, never from a name.
//!
//! Limits, from each provider's documentation:
//! - Anthropic Messages: image/jpeg, image/png, image/gif, image/webp; at
//!   most 5 MB of base64 data per image.
//! - OpenAI (Responses and Chat Completions): PNG, JPEG, WebP and
//!   non-animated GIF; 20 MB per image, 50 MB of images per request.
//!   (A GIF counts as animated when it has the looping extension,
//!   `NETSCAPE2.0`, that animated GIFs carry.)
//! - Gemini generateContent: image/png, image/jpeg, image/webp, image/heic,
//!   image/heif (no GIF); a whole request with inline data at most 20 MB.

use super::catalogue::{Api, ModelSpec};
use serde::{Deserialize, Serialize};

/// Anthropic's cap on one image's base64 data.
pub const ANTHROPIC_MAX_BASE64: usize = 5 * 1024 * 1024;
/// OpenAI's cap on one image.
pub const OPENAI_MAX_IMAGE: usize = 20 * 1024 * 1024;
/// OpenAI's cap on a request's images together.
pub const OPENAI_MAX_TOTAL: usize = 50 * 1024 * 1024;
/// Gemini's cap on a whole request with inline data; images are kept to
/// this less room for the text.
pub const GEMINI_MAX_INLINE: usize = 20 * 1024 * 1024 - 2 * 1024 * 1024;

/// Tokens an image is counted as when its size is not known: about what a
/// large screenshot costs at Anthropic (which scales images down to about
/// 1.15 megapixels, 1,600 tokens) and at OpenAI (a high-detail 2048 px
/// image is 1,105 tokens); Gemini counts 258 per 768 px tile.
pub const UNKNOWN_IMAGE_TOKENS: u64 = 1_600;

/// One image as the model gets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePart {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The bytes, base64 (standard alphabet, padded).
    pub data: String,
    /// The alt text the thread gave it (may be empty).
    pub alt: String,
    /// Where it was downloaded from, for notes and the transcript.
    pub source: String,
    /// Width and height in pixels, when the header says.
    #[serde(default)]
    pub size: Option<(u32, u32)>,
    /// An animated GIF (OpenAI takes only still ones).
    #[serde(default)]
    pub animated: bool,
}

impl ImagePart {
    /// Its `data:` URL (OpenAI's `image_url` and `input_image`).
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.data)
    }

    /// About how many input tokens it costs: Anthropic's documented
    /// `width * height / 750`, at most [`UNKNOWN_IMAGE_TOKENS`] (larger
    /// images are scaled down first), at least OpenAI's 85 base tokens.
    pub fn estimated_tokens(&self) -> u64 {
        match self.size {
            Some((w, h)) => (u64::from(w) * u64::from(h) / 750).clamp(85, UNKNOWN_IMAGE_TOKENS),
            None => UNKNOWN_IMAGE_TOKENS,
        }
    }

    /// What a model that is not shown the image reads instead.
    pub fn note(&self, why: &str) -> String {
        let alt = self.alt.trim();
        let alt = if alt.is_empty() { "no alt text" } else { alt };
        format!("[image: {alt}, not shown: {why}]")
    }
}

/// Why `model` cannot be shown `image`, with `sent_so_far` bytes of base64
/// image data already in the request; `None` when it can.
pub fn refused_by(model: &ModelSpec, image: &ImagePart, sent_so_far: usize) -> Option<String> {
    if !model.vision {
        return Some("this model does not take images".to_owned());
    }
    let bytes = image.data.len();
    match model.api {
        Api::Messages if bytes > ANTHROPIC_MAX_BASE64 => Some(format!(
            "it is over the 5 MB the model's API takes per image ({bytes} bytes as base64)"
        )),
        Api::Responses | Api::ChatCompletions if bytes > OPENAI_MAX_IMAGE => Some(format!(
            "it is over the 20 MB the model's API takes per image ({bytes} bytes as base64)"
        )),
        Api::Responses | Api::ChatCompletions if image.animated => {
            Some("this model does not take animated GIF images".to_owned())
        }
        Api::Responses | Api::ChatCompletions if sent_so_far + bytes > OPENAI_MAX_TOTAL => {
            Some("the request's images would pass the 50 MB the model's API takes".to_owned())
        }
        Api::GenerateContent if image.media_type == "image/gif" => {
            Some("this model does not take GIF images".to_owned())
        }
        Api::GenerateContent if sent_so_far + bytes > GEMINI_MAX_INLINE => {
            Some("the request would pass the 20 MB the model's API takes with inline images".to_owned())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ProviderKind;

    fn image(media_type: &str, bytes: usize) -> ImagePart {
        ImagePart {
            media_type: media_type.into(),
            data: "A".repeat(bytes),
            alt: "the broken dialog".into(),
            source: "https://github.com/user-attachments/assets/1".into(),
            size: Some((1280, 800)),
            animated: false,
        }
    }

    fn model(api: Api, vision: bool) -> ModelSpec {
        let mut spec = ModelSpec::plain("m", ProviderKind::OpenAi, api, 100_000, 1_000);
        spec.vision = vision;
        spec
    }

    #[test]
    fn each_api_refuses_what_its_documentation_says() {
        let png = image("image/png", 1_000);
        assert_eq!(
            refused_by(&model(Api::Messages, false), &png, 0).as_deref(),
            Some("this model does not take images")
        );
        for api in [
            Api::Messages,
            Api::Responses,
            Api::ChatCompletions,
            Api::GenerateContent,
        ] {
            assert_eq!(refused_by(&model(api, true), &png, 0), None, "{api:?}");
        }
        let big = image("image/png", ANTHROPIC_MAX_BASE64 + 1);
        assert!(refused_by(&model(Api::Messages, true), &big, 0).is_some());
        assert_eq!(refused_by(&model(Api::Responses, true), &big, 0), None);
        assert!(refused_by(&model(Api::Responses, true), &big, OPENAI_MAX_TOTAL - 10).is_some());
        let mut gif = image("image/gif", 100);
        assert!(refused_by(&model(Api::GenerateContent, true), &gif, 0).is_some());
        assert_eq!(refused_by(&model(Api::Messages, true), &gif, 0), None);
        assert_eq!(refused_by(&model(Api::Responses, true), &gif, 0), None);
        gif.animated = true;
        assert!(refused_by(&model(Api::Responses, true), &gif, 0).is_some());
        assert_eq!(refused_by(&model(Api::Messages, true), &gif, 0), None);
    }

    #[test]
    fn an_image_costs_about_what_the_providers_document() {
        assert_eq!(image("image/png", 1).estimated_tokens(), 1280 * 800 / 750);
        let mut tiny = image("image/png", 1);
        tiny.size = Some((16, 16));
        assert_eq!(tiny.estimated_tokens(), 85);
        tiny.size = None;
        assert_eq!(tiny.estimated_tokens(), UNKNOWN_IMAGE_TOKENS);
        assert_eq!(
            tiny.note("this model does not take images"),
            "[image: the broken dialog, not shown: this model does not take images]"
        );
    }
}
