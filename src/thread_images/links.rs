//! Image links in a thread's markdown: `![alt](url)` (with an optional
//! title, or the URL in angle brackets) and HTML `<img src="..." alt="...">`.
//! Fenced code blocks are skipped: an image there is shown as text.

/// One image link, in the order it appears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageLink {
    pub alt: String,
    pub url: String,
}

/// Every image link in `text`, in order (a URL given twice, once).
pub fn image_links(text: &str) -> Vec<ImageLink> {
    let mut found: Vec<(usize, ImageLink)> = Vec::new();
    let mut offset = 0;
    let mut fenced = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
        } else if !fenced {
            found.extend(markdown_images(line).into_iter().map(|(at, l)| (offset + at, l)));
            found.extend(html_images(line).into_iter().map(|(at, l)| (offset + at, l)));
        }
        offset += line.len();
    }
    found.sort_by_key(|(at, _)| *at);
    let mut out: Vec<ImageLink> = Vec::new();
    for (_, link) in found {
        if !link.url.is_empty() && !out.iter().any(|l| l.url == link.url) {
            out.push(link);
        }
    }
    out
}

/// `![alt](url "title")` and `![alt](<url>)` in one line.
fn markdown_images(line: &str) -> Vec<(usize, ImageLink)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(start) = line[from..].find("![").map(|i| from + i) {
        from = start + 2;
        let Some(close) = line[from..].find("](").map(|i| from + i) else {
            break;
        };
        let alt = &line[from..close];
        let rest = &line[close + 2..];
        let Some(end) = rest.find(')') else {
            break;
        };
        let inside = rest[..end].trim();
        let url = match inside.strip_prefix('<') {
            Some(bracketed) => bracketed.split('>').next().unwrap_or_default(),
            None => inside.split_whitespace().next().unwrap_or_default(),
        };
        out.push((
            start,
            ImageLink {
                alt: alt.trim().to_owned(),
                url: url.to_owned(),
            },
        ));
        from = close + 2 + end;
    }
    out
}

/// `<img ...>` tags in one line, their `src` and `alt` attributes.
fn html_images(line: &str) -> Vec<(usize, ImageLink)> {
    let lower = line.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(start) = lower[from..].find("<img").map(|i| from + i) {
        let end = lower[start..].find('>').map(|i| start + i).unwrap_or(line.len());
        let tag = &line[start..end];
        if let Some(src) = attribute(tag, "src") {
            out.push((
                start,
                ImageLink {
                    alt: attribute(tag, "alt").unwrap_or_default(),
                    url: src.replace("&amp;", "&"),
                },
            ));
        }
        from = end.max(start + 4);
    }
    out
}

/// The value of attribute `name` in `tag`, quoted or bare.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(name).map(|i| from + i) {
        from = at + name.len();
        let before_ok = at > 0 && lower.as_bytes()[at - 1].is_ascii_whitespace();
        let rest = tag[from..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let value = rest[1..].trim_start();
        let quote = value.chars().next()?;
        return Some(if quote == '"' || quote == '\'' {
            value[1..].split(quote).next().unwrap_or_default().to_owned()
        } else {
            value
                .split(|c: char| c.is_whitespace() || c == '/')
                .next()
                .unwrap_or_default()
                .to_owned()
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(alt: &str, url: &str) -> ImageLink {
        ImageLink {
            alt: alt.into(),
            url: url.into(),
        }
    }

    #[test]
    fn markdown_and_html_images_in_order_and_code_is_skipped() {
        let text =
            "The dialog breaks:\n\n![the dialog](https://github.com/user-attachments/assets/1 \"title\")\n\
and <img width=\"300\" alt='the log' src=\"https://example.org/log.png\" />\n\
```\n![not an image](https://github.com/user-attachments/assets/2)\n```\n\
Again ![the dialog](https://github.com/user-attachments/assets/1) and ![](</uploads/ab/x.png>).\n";
        assert_eq!(
            image_links(text),
            vec![
                link("the dialog", "https://github.com/user-attachments/assets/1"),
                link("the log", "https://example.org/log.png"),
                link("", "/uploads/ab/x.png"),
            ]
        );
    }

    #[test]
    fn a_link_that_is_not_an_image_is_not_taken() {
        assert_eq!(
            image_links("[a page](https://github.com/user-attachments/assets/3)"),
            vec![]
        );
        assert_eq!(image_links("<img alt=\"no source\">"), vec![]);
    }
}
