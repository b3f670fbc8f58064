//! How a sage call is laid out (its texts: [`crate::prompts::SagePrompts`])
//! laid out so the providers' prompt caches hit: the system text, then the
//! packed code, then the request, and only then the phase's own part. Every
//! call of a debate starts with the same bytes up to the end of the request.

use crate::llm::image::ImagePart;
use crate::llm::{ChatRequest, Message};

pub use crate::prompts::fill;
use crate::prompts::Prompts;
use std::sync::Arc;

/// The shared beginning of every sage call: the system text and the packed
/// code, in the system slot (marked for caching).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub system: String,
    /// Tokens of `system` (the packed code's count plus the system text).
    pub tokens: u64,
    /// The texts of the calls' phases.
    pub prompts: Arc<Prompts>,
    /// The thread's images, shown after the request in every call.
    pub images: Vec<ImagePart>,
}

impl Context {
    pub fn new(prompts: Arc<Prompts>, packed_xml: &str, packed_tokens: u64) -> Context {
        let head = format!("{}\n", prompts.sage.system.trim());
        let tokens = crate::llm::tokens::count_text(&head) + packed_tokens;
        Context {
            system: format!("{head}{packed_xml}"),
            tokens,
            prompts,
            images: Vec::new(),
        }
    }

    /// The same context with the thread's `images` after each call's request.
    pub fn with_images(mut self, images: Vec<ImagePart>) -> Context {
        self.tokens += images.iter().map(ImagePart::estimated_tokens).sum::<u64>();
        self.images = images;
        self
    }

    /// The request as every call states it, right after the context.
    pub fn request_block(&self, request: &str) -> String {
        fill(&self.prompts.sage.request, &[("request", request.trim())])
    }
}

/// A call: the shared context and request, then `phase`. The thread's
/// images, when there are any, come between the request and the phase.
pub fn call(context: &Context, request: &str, phase: &str, max_output_tokens: u32) -> ChatRequest {
    let messages = if context.images.is_empty() {
        vec![Message::User(format!(
            "{}\n{}",
            context.request_block(request),
            phase.trim()
        ))]
    } else {
        let mut messages = vec![Message::User(context.request_block(request))];
        messages.extend(context.images.iter().cloned().map(Message::Image));
        messages.push(Message::User(phase.trim().to_owned()));
        messages
    };
    ChatRequest {
        model: String::new(),
        system: context.system.clone(),
        messages,
        tools: Vec::new(),
        max_output_tokens,
        temperature: None,
        reasoning_effort: None,
        cache_system: true,
        json_output: false,
    }
}

/// Plans under `## PLAN X` headings, for critique, consensus and judgement.
pub fn plans_section<'a>(plans: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    plans
        .into_iter()
        .map(|(id, text)| format!("## PLAN {id}\n\n{}\n", text.trim()))
        .collect::<Vec<_>>()
        .join("\n")
}
