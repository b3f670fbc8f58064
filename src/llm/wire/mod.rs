//! Each model API's request and answer format, pure (no I/O): the request
//! body a [`ChatRequest`](super::ChatRequest) makes, the
//! [`ChatResponse`](super::ChatResponse) a whole answer makes, and the
//! refusals the API's error object names. The clients ([`super::anthropic`],
//! [`super::chat_completions`], [`super::gemini`], [`super::responses`])
//! send the one and the stream folds ([`super::stream`]) read the other;
//! nothing here imports either.

pub mod anthropic;
pub mod chat_completions;
pub mod gemini;
pub mod responses;
