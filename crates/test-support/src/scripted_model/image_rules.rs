//! What each model API refuses of an image, as it refuses it (checked on
//! every request by [`super::provider_rules`]):
//! - Anthropic Messages (API reference: Vision; SDK types ImageBlockParam,
//!   Base64ImageSource): `media_type` one of image/jpeg, image/png,
//!   image/gif, image/webp; at most 5 MB of base64 per image; the data must
//!   be the type it says.
//! - OpenAI Responses (`input_image`: `image_url` and a required `detail`
//!   of low, high or auto) and Chat Completions (`image_url.url`), images
//!   and vision guide: PNG, JPEG, WEBP, non-animated GIF; data URLs with an
//!   image MIME type; 20 MB per image, 50 MB of images per request; models
//!   without vision refuse image parts.
//! - Gemini generateContent (API reference: Part, Blob; image
//!   understanding guide): image/png, image/jpeg, image/webp, image/heic,
//!   image/heif (no GIF); a request with inline data at most 20 MB.

use super::error_shapes::{anthropic_error, gemini_error, openai_error_coded as openai_error};
use base64::Engine;
use serde_json::Value;

const ANTHROPIC_MAX_BASE64: usize = 5 * 1024 * 1024;
const OPENAI_MAX_IMAGE: usize = 20 * 1024 * 1024;
const OPENAI_MAX_TOTAL: usize = 50 * 1024 * 1024;
const GEMINI_MAX_REQUEST: usize = 20 * 1024 * 1024;

/// The image type `bytes` are, read from their signature.
fn sniffed(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0x89, b'P', b'N', b'G']) {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF8") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn decoded(data: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(data).ok()
}

/// Image blocks of Messages, in user turns and in tool results.
pub fn messages(body: &Value) -> Result<(), Value> {
    for (i, m) in body["messages"].as_array().into_iter().flatten().enumerate() {
        for (j, b) in m["content"].as_array().into_iter().flatten().enumerate() {
            if b["type"] != "image" {
                continue;
            }
            let at = format!("messages.{i}.content.{j}.image.source");
            if b["source"]["type"] != "base64" {
                continue;
            }
            let media_type = b["source"]["media_type"].as_str().unwrap_or_default();
            if !["image/jpeg", "image/png", "image/gif", "image/webp"].contains(&media_type) {
                return Err(anthropic_error(format!("{at}.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'")));
            }
            let data = b["source"]["data"].as_str().unwrap_or_default();
            if data.len() > ANTHROPIC_MAX_BASE64 {
                return Err(anthropic_error(format!(
                    "{at}.base64: image exceeds 5 MB maximum: {} bytes > {ANTHROPIC_MAX_BASE64} bytes",
                    data.len()
                )));
            }
            match decoded(data).as_deref().and_then(sniffed) {
                None => return Err(anthropic_error(format!("{at}.base64.data: Could not process image"))),
                Some(actual) if actual != media_type => {
                    return Err(anthropic_error(format!("{at}.base64.data: The image was specified using the {media_type} media type, but the image appears to be a {actual} image")))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// OpenAI models that take no images.
fn openai_blind(model: &str) -> bool {
    model.starts_with("gpt-3.5")
        || model.starts_with("o3-mini")
        || model == "gpt-4"
        || model.starts_with("gpt-4-0")
}

/// One OpenAI image URL at `at`; returns its decoded size.
fn openai_image(url: &str, at: &str, model: &str) -> Result<usize, Value> {
    if openai_blind(model) {
        return Err(openai_error(
            "Invalid content type. image_url is only supported by certain models.".into(),
            Some(at),
            "invalid_value",
        ));
    }
    let Some(rest) = url.strip_prefix("data:") else {
        // A remote URL: OpenAI downloads it; the fake has no Internet.
        return Ok(0);
    };
    let (mime, data) = rest
        .split_once(";base64,")
        .unwrap_or((rest.split(',').next().unwrap_or_default(), ""));
    if !["image/png", "image/jpeg", "image/gif", "image/webp"].contains(&mime) {
        return Err(openai_error(
            format!("Invalid '{at}'. Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got unsupported MIME type '{mime}'."),
            Some(at),
            "invalid_value",
        ));
    }
    // Only still GIFs: an animation carries the NETSCAPE2.0 looping extension.
    let animated = |b: &[u8]| b.starts_with(b"GIF8") && b.windows(11).any(|w| w == b"NETSCAPE2.0");
    let Some(bytes) = decoded(data).filter(|b| sniffed(b).is_some() && !animated(b)) else {
        return Err(openai_error(
            "You uploaded an unsupported image. Please make sure your image has of one the following formats: ['png', 'jpeg', 'gif', 'webp'].".into(),
            None,
            "invalid_image_format",
        ));
    };
    if bytes.len() > OPENAI_MAX_IMAGE {
        return Err(openai_error(
            format!(
                "Invalid '{at}'. Image too large: {} bytes; the maximum is {OPENAI_MAX_IMAGE} bytes.",
                bytes.len()
            ),
            Some(at),
            "image_too_large",
        ));
    }
    Ok(bytes.len())
}

fn openai_total(total: usize) -> Result<(), Value> {
    if total > OPENAI_MAX_TOTAL {
        return Err(openai_error(
            format!("The images in this request total {total} bytes, over the {OPENAI_MAX_TOTAL} bytes allowed per request."),
            None,
            "request_too_large",
        ));
    }
    Ok(())
}

/// `image_url` parts of Chat Completions messages.
pub fn chat_completions(body: &Value) -> Result<(), Value> {
    let model = body["model"].as_str().unwrap_or_default();
    let mut total = 0;
    for (i, m) in body["messages"].as_array().into_iter().flatten().enumerate() {
        for (j, part) in m["content"].as_array().into_iter().flatten().enumerate() {
            if part["type"] == "image_url" {
                let at = format!("messages[{i}].content[{j}].image_url");
                total += openai_image(part["image_url"]["url"].as_str().unwrap_or_default(), &at, model)?;
            }
        }
    }
    openai_total(total)
}

/// `input_image` parts of Responses input messages.
pub fn responses(body: &Value) -> Result<(), Value> {
    let model = body["model"].as_str().unwrap_or_default();
    let mut total = 0;
    for (i, item) in body["input"].as_array().into_iter().flatten().enumerate() {
        for (j, part) in item["content"].as_array().into_iter().flatten().enumerate() {
            if part["type"] != "input_image" {
                continue;
            }
            let at = format!("input[{i}].content[{j}]");
            if !["low", "high", "auto"].contains(&part["detail"].as_str().unwrap_or_default()) {
                return Err(openai_error(
                    format!("Missing required parameter: '{at}.detail'."),
                    Some(&format!("{at}.detail")),
                    "missing_required_parameter",
                ));
            }
            let url = part["image_url"].as_str().unwrap_or_default();
            total += openai_image(url, &format!("{at}.image_url"), model)?;
        }
    }
    openai_total(total)
}

/// `inlineData` parts of generateContent, and the request's size.
pub fn generate_content(body: &Value) -> Result<(), Value> {
    let size = body.to_string().len();
    if size > GEMINI_MAX_REQUEST {
        return Err(gemini_error(format!(
            "Request payload size exceeds the limit: {GEMINI_MAX_REQUEST} bytes."
        )));
    }
    for c in body["contents"].as_array().into_iter().flatten() {
        for p in c["parts"].as_array().into_iter().flatten() {
            let blob = p.get("inlineData").or_else(|| p.get("inline_data"));
            let Some(blob) = blob else { continue };
            let mime = blob
                .get("mimeType")
                .or_else(|| blob.get("mime_type"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            if mime.starts_with("image/")
                && ![
                    "image/png",
                    "image/jpeg",
                    "image/webp",
                    "image/heic",
                    "image/heif",
                ]
                .contains(&mime)
            {
                return Err(gemini_error(format!("Unsupported MIME type: {mime}")));
            }
            let data = blob["data"].as_str().unwrap_or_default();
            if mime.starts_with("image/") && decoded(data).as_deref().and_then(sniffed).is_none() {
                return Err(gemini_error(
                    "Unable to process input image. Please retry or report in https://developers.generativeai.google/guide/troubleshooting".into(),
                ));
            }
        }
    }
    Ok(())
}
