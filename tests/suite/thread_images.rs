//! Images from the thread: screenshots in an issue reach a vision model in
//! each provider's own format (the provider fakes refusing what each API
//! refuses of images), only from the forge's own upload host; a link to any
//! other host is never fetched; a file named .png that is no image is
//! refused with a note; a model without vision reads the alt text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use forgehand_test_support::github_world::{World, DONE, REPO};
use forgehand_test_support::scripted_model::{self, edit_and_commit, image_rules, Format, ScriptedModel};

use base64::Engine;
use forgehand::config::{Api, ProviderKind, Secret};
use forgehand::llm::catalogue;
use forgehand::llm::image::ImagePart;
use forgehand::llm::retry::RetryPolicy;
use forgehand::llm::router::{Route, Router};
use forgehand::llm::{ChatRequest, Message, ModelSpec, Provider};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const PLAN: &str = "# Implementation Plan (Model A)\n\nMake the dialog taller.\n\n## Checklist\n- [ ] Change the dialog\n- [ ] Commit the change\n";

/// A real 2×3 PNG (signature, IHDR, IDAT, IEND).
fn png() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode("iVBORw0KGgoAAAANSUhEUgAAAAIAAAADCAYAAAC56t6BAAAAEUlEQVR4nGP4z8DwH4QZMBgAoXkL9U3EmgcAAAAASUVORK5CYII=")
        .unwrap()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn screenshot() -> ImagePart {
    ImagePart {
        media_type: "image/png".into(),
        data: b64(&png()),
        alt: "the cut-off dialog".into(),
        source: "https://github.com/user-attachments/assets/1".into(),
        size: Some((2, 3)),
        animated: false,
    }
}

fn provider(format: Format, base: &str) -> Arc<dyn Provider> {
    use forgehand::llm::{anthropic::Anthropic, chat_completions::ChatCompletions, gemini::Gemini};
    let (key, timeout) = (Secret::new("test-key"), Duration::from_secs(10));
    match format {
        Format::OpenAi => Arc::new(ChatCompletions::new(base, Some(key), timeout).unwrap()),
        Format::Responses => {
            Arc::new(forgehand::llm::responses::Responses::new(base, Some(key), timeout).unwrap())
        }
        Format::Gemini => Arc::new(Gemini::new(base, key, timeout).unwrap()),
        Format::Anthropic => Arc::new(Anthropic::new(base, key, timeout).unwrap()),
    }
}

fn api(format: Format) -> Api {
    match format {
        Format::OpenAi => Api::ChatCompletions,
        Format::Responses => Api::Responses,
        Format::Gemini => Api::GenerateContent,
        Format::Anthropic => Api::Messages,
    }
}

/// A router with `model` (as the catalogue knows it) on `scripted`.
fn router(scripted: &ScriptedModel, model: &str) -> Router {
    let mut spec = catalogue::lookup(model).unwrap_or_else(|| {
        ModelSpec::plain(model, ProviderKind::OpenAi, api(scripted.format), 128_000, 8192)
    });
    spec.api = api(scripted.format);
    let route = Route {
        spec,
        reasoning_effort: None,
        provider: provider(scripted.format, &scripted.base_url()),
    };
    let retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    Router::new(vec![route], retry, vec![]).with_output_room(4000)
}

fn request(messages: Vec<Message>) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "You fix bugs.".into(),
        messages,
        tools: vec![],
        max_output_tokens: 4_000,
        temperature: None,
        reasoning_effort: None,
        cache_system: false,
        json_output: false,
    }
}

/// The image part of `body` in `format`'s own shape.
fn image_part(format: Format, body: &Value) -> Value {
    match format {
        Format::Anthropic => body["messages"][0]["content"][1].clone(),
        Format::Responses => body["input"][0]["content"][1].clone(),
        Format::OpenAi => body["messages"][2]["content"][0].clone(),
        Format::Gemini => body["contents"][0]["parts"][1].clone(),
    }
}

#[tokio::test]
async fn each_provider_gets_the_screenshot_in_its_own_format_and_takes_it() {
    let data = b64(&png());
    let url = format!("data:image/png;base64,{data}");
    for (format, model, expected) in [
        (
            Format::Anthropic,
            "claude-opus-5-5",
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}),
        ),
        (
            Format::Responses,
            "gpt-5.6",
            json!({"type": "input_image", "image_url": url, "detail": "auto"}),
        ),
        (
            Format::OpenAi,
            "gpt-4.1",
            json!({"type": "image_url", "image_url": {"url": url}}),
        ),
        (
            Format::Gemini,
            "gemini-2.5-pro",
            json!({"inlineData": {"mimeType": "image/png", "data": data}}),
        ),
    ] {
        let scripted = ScriptedModel::start(format).await;
        scripted
            .push(scripted_model::text("The dialog's height is fixed."))
            .await;
        let answer = router(&scripted, model)
            .chat(&request(vec![
                Message::User("The dialog is cut off.".into()),
                Message::Image(screenshot()),
            ]))
            .await
            .unwrap_or_else(|e| panic!("{format:?}: {e}; refused: {:?}", scripted.refused()));
        assert_eq!(answer.text, "The dialog's height is fixed.");
        let (_, body) = scripted.requests().await.pop().unwrap();
        assert_eq!(image_part(format, &body), expected, "{format:?}: {body}");
    }
}

#[tokio::test]
async fn a_model_without_vision_reads_the_alt_text_and_a_note() {
    let scripted = ScriptedModel::start(Format::Responses).await;
    scripted.push(scripted_model::text("I cannot see it.")).await;
    router(&scripted, "o3-mini")
        .chat(&request(vec![
            Message::User("The dialog is cut off.".into()),
            Message::Image(screenshot()),
        ]))
        .await
        .unwrap();
    let (_, body) = scripted.requests().await.pop().unwrap();
    assert_eq!(
        body["input"][0]["content"],
        json!([{"type": "input_text", "text": "The dialog is cut off.\n\n[image: the cut-off dialog, not shown: this model does not take images]"}]),
        "{body}"
    );
}

#[tokio::test]
async fn a_gif_reaches_gemini_as_a_note_and_claude_as_an_image() {
    let gif = ImagePart {
        media_type: "image/gif".into(),
        data: b64(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
        ..screenshot()
    };
    let gemini = ScriptedModel::start(Format::Gemini).await;
    gemini.push(scripted_model::text("ok")).await;
    let messages = vec![Message::User("Look.".into()), Message::Image(gif)];
    router(&gemini, "gemini-2.5-pro")
        .chat(&request(messages.clone()))
        .await
        .unwrap();
    let (_, body) = gemini.requests().await.pop().unwrap();
    let parts = body["contents"][0]["parts"].to_string();
    assert!(
        parts.contains("not shown: this model does not take GIF images") && !parts.contains("inlineData"),
        "{parts}"
    );
    let claude = ScriptedModel::start(Format::Anthropic).await;
    claude.push(scripted_model::text("ok")).await;
    router(&claude, "claude-opus-5-5")
        .chat(&request(messages))
        .await
        .unwrap();
    let (_, body) = claude.requests().await.pop().unwrap();
    assert_eq!(
        body["messages"][0]["content"][1]["source"]["media_type"],
        "image/gif"
    );
}

/// A Messages body with one image block.
fn anthropic_image(media_type: &str, data: &str) -> Value {
    json!({"model": "claude-opus-5-5", "max_tokens": 100, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "Look."},
        {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    ]}]})
}

fn message_of(error: Value) -> String {
    error["error"]["message"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn the_provider_fakes_refuse_what_each_api_refuses_of_images() {
    let good = b64(&png());
    let jpeg = b64(&[0xFF, 0xD8, 0xFF, 0xE0, 0, 16]);
    let huge = "A".repeat(5 * 1024 * 1024 + 4);
    // Anthropic: the four types, 5 MB of base64, data of the type it says.
    assert!(image_rules::messages(&anthropic_image("image/png", &good)).is_ok());
    let wrong = message_of(image_rules::messages(&anthropic_image("image/bmp", &good)).unwrap_err());
    assert!(
        wrong.contains("media_type: Input should be 'image/jpeg'"),
        "{wrong}"
    );
    let large = message_of(image_rules::messages(&anthropic_image("image/png", &huge)).unwrap_err());
    assert!(large.contains("image exceeds 5 MB maximum"), "{large}");
    let mislabelled = message_of(image_rules::messages(&anthropic_image("image/png", &jpeg)).unwrap_err());
    assert!(
        mislabelled.contains("appears to be a image/jpeg image"),
        "{mislabelled}"
    );

    // OpenAI: image MIME types, real image bytes, 20 MB, models with vision, `detail`.
    let chat = |model: &str, url: &str| json!({"model": model, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]});
    let png_url = format!("data:image/png;base64,{good}");
    assert!(image_rules::chat_completions(&chat("gpt-4.1", &png_url)).is_ok());
    let pdf = message_of(
        image_rules::chat_completions(&chat("gpt-4.1", &format!("data:application/pdf;base64,{good}")))
            .unwrap_err(),
    );
    assert!(pdf.contains("unsupported MIME type 'application/pdf'"), "{pdf}");
    let text_as_png = format!("data:image/png;base64,{}", b64(b"<html>not found</html>"));
    let bad = image_rules::chat_completions(&chat("gpt-4.1", &text_as_png)).unwrap_err();
    assert_eq!(bad["error"]["code"], "invalid_image_format");
    let big = format!(
        "data:image/png;base64,{}",
        b64(&[png(), vec![0; 21 * 1024 * 1024]].concat())
    );
    let big = image_rules::chat_completions(&chat("gpt-4.1", &big)).unwrap_err();
    assert_eq!(big["error"]["code"], "image_too_large");
    let looping = b64(b"GIF89a\x01\x00\x01\x00\x80\x00\x00!\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00;");
    let animated =
        image_rules::chat_completions(&chat("gpt-4.1", &format!("data:image/gif;base64,{looping}")));
    assert_eq!(animated.unwrap_err()["error"]["code"], "invalid_image_format");
    let blind = message_of(image_rules::chat_completions(&chat("gpt-3.5-turbo", &png_url)).unwrap_err());
    assert!(
        blind.contains("image_url is only supported by certain models"),
        "{blind}"
    );
    let responses = |part: Value| json!({"model": "gpt-5.6", "input": [{"type": "message", "role": "user", "content": [part]}]});
    assert!(image_rules::responses(&responses(
        json!({"type": "input_image", "image_url": png_url, "detail": "auto"})
    ))
    .is_ok());
    let no_detail =
        image_rules::responses(&responses(json!({"type": "input_image", "image_url": png_url}))).unwrap_err();
    assert_eq!(no_detail["error"]["code"], "missing_required_parameter");

    // Gemini: no GIF, 20 MB a request.
    let gemini = |mime: &str, data: &str| json!({"contents": [{"role": "user", "parts": [{"text": "Look."}, {"inlineData": {"mimeType": mime, "data": data}}]}]});
    assert!(image_rules::generate_content(&gemini("image/png", &good)).is_ok());
    let gif = b64(b"GIF89a\x01\x00\x01\x00");
    let gif = message_of(image_rules::generate_content(&gemini("image/gif", &gif)).unwrap_err());
    assert_eq!(gif, "Unsupported MIME type: image/gif");
    let over = "A".repeat(21 * 1024 * 1024);
    let over = message_of(image_rules::generate_content(&gemini("image/png", &over)).unwrap_err());
    assert!(
        over.starts_with("Request payload size exceeds the limit"),
        "{over}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issues_screenshot_on_the_forge_reaches_the_model_and_nothing_else_is_fetched() {
    // Another host with an image, recording every request it gets.
    let elsewhere = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::any())
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_raw(png(), "image/png"))
        .mount(&elsewhere)
        .await;
    let world = World::with_planning(edit_and_commit(Duration::ZERO), PLAN).await;
    let shot = world.github.upload(png(), "dialog.png");
    let fake = world
        .github
        .upload(b"<html><body>Sign in</body></html>".to_vec(), "log.png");
    let design = format!("{}/design.png", elsewhere.uri());
    let body = format!(
        "The dialog is cut off:\n\n![the cut-off dialog]({shot})\n\nThe design: ![the design]({design})\n\n\
<img width=\"200\" alt=\"the log\" src=\"{fake}\">\n"
    );
    let issue = world
        .github
        .open_issue(REPO, "maya", "The dialog is cut off", &body);
    world.github.add_label(REPO, issue, "coding agent", "maya");
    let _daemon = world.start();
    world.wait_for_end(issue).await;
    assert!(
        world.github.issue(REPO, issue).labels.contains(&DONE.to_owned()),
        "{}",
        world.progress_comment(issue)
    );

    // The screenshot reached the model in the agent's first turn, the
    // other host's link stayed text, the text file got a note.
    let requests = world.model.requests().await;
    let first = requests.first().expect("the agent asked the model").to_string();
    assert!(first.contains(&b64(&png())), "the screenshot's bytes: {first}");
    assert!(first.contains(&design), "the other host's link stays in the text");
    assert!(
        first.contains("[image: the log, not shown: the file is not a PNG, JPEG, GIF or WebP image"),
        "{first}"
    );
    assert!(world.model.refused().is_empty(), "{:?}", world.model.refused());
    // The planners were shown it too, after the request.
    let all = world.model.all_requests().await;
    let planning = all
        .iter()
        .find(|r| {
            r["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with(scripted_model::SAGE_SYSTEM))
        })
        .expect("a planning call");
    assert!(planning.to_string().contains(&b64(&png())), "{planning}");
    assert_eq!(
        elsewhere.received_requests().await.unwrap().len(),
        0,
        "a link to another host is never fetched"
    );
    // The uploads were asked for with the token, then by the signed address.
    let asked = world.github.upload_requests();
    assert!(
        asked
            .iter()
            .any(|(path, token)| path.starts_with("/user-attachments/assets/") && *token),
        "{asked:?}"
    );
    assert!(
        asked
            .iter()
            .any(|(path, _)| path.starts_with("/private-user-images/")),
        "{asked:?}"
    );

    let comment = world.progress_comment(issue);
    assert!(
        comment.contains("Images from the thread: 1 given to the models that take images")
            && comment.contains("1 link(s) to other hosts not fetched"),
        "{comment}"
    );
    let transcript = world.transcript(issue);
    assert!(
        transcript.contains("image \"the cut-off dialog\": image/png, 2×3,")
            && transcript.contains("shown to the models"),
        "{transcript}"
    );
    assert!(transcript.contains("image \"the log\":") && transcript.contains("not shown: the file is not"));
}

fn images_config(max_count: usize, max_bytes: u64) -> forgehand::config::ThreadImagesConfig {
    forgehand::config::ThreadImagesConfig {
        enabled: true,
        max_count,
        max_bytes,
    }
}

#[tokio::test]
async fn gitlab_uploads_are_fetched_with_the_token_and_other_hosts_never() {
    use forgehand::thread_images::{gather, UploadSite};
    let gitlab = forgehand_test_support::fake_gitlab::FakeGitLab::start("glpat-uploads").await;
    gitlab.add_project("acme/app", "http://127.0.0.1:9/unused.git");
    let shot = gitlab.upload("acme/app", png(), "dialog.png");
    let elsewhere = wiremock::MockServer::start().await;
    let other = format!("{}/uploads/0123/x.png", elsewhere.uri());
    let text = format!("The dialog: ![dialog]({shot})\nAnd ![other]({other})");
    let site = UploadSite::gitlab(&gitlab.url(), "acme/app").unwrap();
    let gathered = gather(
        &[&text],
        &site,
        &Secret::new("glpat-uploads"),
        &images_config(8, 5 << 20),
    )
    .await;
    assert_eq!(gathered.images.len(), 1, "{gathered:?}");
    let image = &gathered.images[0];
    assert_eq!(
        (
            image.media_type.as_str(),
            image.size,
            image.alt.as_str(),
            image.data.clone()
        ),
        ("image/png", Some((2, 3)), "dialog", b64(&png()))
    );
    assert_eq!(gathered.elsewhere, vec![other]);
    assert_eq!(gitlab.upload_requests(), vec![(format!("/acme/app{shot}"), true)]);
    assert!(elsewhere.received_requests().await.unwrap().is_empty());
}

#[tokio::test]
async fn uploads_past_the_caps_are_left_out_and_a_wrong_token_fetches_nothing() {
    use forgehand::thread_images::fetch::FetchError;
    use forgehand::thread_images::{gather, UploadSite};
    let github = forgehand_test_support::fake_github::FakeGitHub::start("ghp_caps").await;
    let big = github.upload([png(), vec![0; 4096]].concat(), "big.png");
    let small = github.upload(png(), "small.png");
    let third = github.upload(png(), "third.png");
    let text = format!("![big]({big}) ![small]({small}) ![third]({third})");
    let site = UploadSite::github(&github.api_url()).unwrap();
    let gathered = gather(&[&text], &site, &Secret::new("ghp_caps"), &images_config(2, 2048)).await;
    assert_eq!(gathered.images.len(), 1);
    assert_eq!(gathered.refused.len(), 1);
    assert_eq!(gathered.refused[0].why, FetchError::TooLarge { max: 2048 });
    assert_eq!(gathered.over_count, 1);
    let wrong = gather(
        &[&text],
        &site,
        &Secret::new("ghp_wrong"),
        &images_config(8, 5 << 20),
    )
    .await;
    assert!(wrong.images.is_empty());
    assert_eq!(wrong.refused[0].why, FetchError::Status { status: 404 });
}

/// Opens Maya's issue with a screenshot uploaded to the fake GitHub, labels
/// it and runs the daemon until the task ends; returns the agent's first
/// request.
async fn first_request_for_a_screenshot(world: &World) -> Value {
    let shot = world.github.upload(png(), "dialog.png");
    let body = format!("The dialog is cut off:\n\n![the cut-off dialog]({shot})\n");
    let issue = world
        .github
        .open_issue(REPO, "maya", "The dialog is cut off", &body);
    world.github.add_label(REPO, issue, "coding agent", "maya");
    let _daemon = world.start();
    world.wait_for_end(issue).await;
    assert!(
        world.github.issue(REPO, issue).labels.contains(&DONE.to_owned()),
        "{}",
        world.progress_comment(issue)
    );
    assert!(world.model.refused().is_empty(), "{:?}", world.model.refused());
    world
        .model
        .requests()
        .await
        .into_iter()
        .next()
        .expect("the agent asked the model")
}

const FILES: [(&str, &str); 1] = [("greet.py", "print('Hello')\n")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_and_gemini_get_the_issues_screenshot_in_their_own_blocks() {
    let data = b64(&png());
    for (format, model) in [
        (Format::Anthropic, "claude-opus-5-5"),
        (Format::Gemini, "gemini-2.5-pro"),
    ] {
        let world = World::on_models(&[(format, model)], edit_and_commit(Duration::ZERO), &FILES).await;
        let first = first_request_for_a_screenshot(&world).await;
        let parts = match format {
            Format::Anthropic => first["messages"][0]["content"].clone(),
            _ => first["contents"][0]["parts"].clone(),
        };
        // Claude's block may carry the moving cache breakpoint as well.
        let (key, expected) = match format {
            Format::Anthropic => (
                "source",
                json!({"type": "base64", "media_type": "image/png", "data": data}),
            ),
            _ => ("inlineData", json!({"mimeType": "image/png", "data": data})),
        };
        assert!(
            parts.as_array().unwrap().iter().any(|p| p[key] == expected),
            "{format:?}: {parts}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_without_vision_gets_the_screenshots_alt_text() {
    let world = World::on_models(
        &[(Format::Responses, "o3-mini")],
        edit_and_commit(Duration::ZERO),
        &FILES,
    )
    .await;
    let first = first_request_for_a_screenshot(&world).await.to_string();
    assert!(
        first.contains("[image: the cut-off dialog, not shown: this model does not take images]"),
        "{first}"
    );
    assert!(
        !first.contains(&b64(&png())) && !first.contains("input_image"),
        "{first}"
    );
}
