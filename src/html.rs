//! Text in HTML pages (the status page, a run's transcript).

/// `text` safe inside an element or a double-quoted attribute.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
