//! A run's transcript as a web page (`/tasks/ID` on the status page's
//! listener): one collapsed block per step with the model's answer, its
//! tool calls and their results; diffs coloured; long outputs folded. Plain
//! HTML and a little CSS; a run in flight gets a small script that follows
//! it (`/tasks/ID/events`, server-sent events): each entry as it is
//! written, the model's text as it streams, the tool running now.

use super::Entry;
use crate::html::escape;
use crate::journal::RunRecord;
use std::fmt::Write as _;

/// Outputs longer than this many lines are folded.
const FOLD_LINES: usize = 30;

const STYLE: &str = r#"
body { font: 15px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #1f2328; }
h1 { font-size: 1.4rem; margin-bottom: .2rem; } .sub { color: #59636e; margin-top: 0; }
details.step { border: 1px solid #d1d9e0; border-radius: .4rem; margin: .5rem 0; }
details.step > summary { cursor: pointer; padding: .45rem .7rem; background: #f6f8fa; list-style-position: inside; }
details.step[open] > summary { border-bottom: 1px solid #d1d9e0; }
.body { padding: .5rem .8rem; }
.meta { color: #59636e; font-size: .9em; }
.call { font-family: ui-monospace, monospace; font-size: .88em; color: #0550ae; }
.tool { margin: .6rem 0; } .tool h3 { font-size: .95rem; margin: .3rem 0; }
.ok { color: #1a7f37; } .err { color: #cf222e; }
pre { background: #f6f8fa; padding: .5rem .7rem; overflow-x: auto; font-size: .85em; margin: .3rem 0; white-space: pre-wrap; }
pre.diff .add { background: #dafbe1; color: #116329; display: block; }
pre.diff .del { background: #ffebe9; color: #82071e; display: block; }
pre.diff .hunk { color: #8250df; display: block; }
.egress { margin: .2rem 0 .2rem 1.2rem; font-family: ui-monospace, monospace; font-size: .85rem; color: #57606a; }
.egress.err { color: #cf222e; }
.note { margin: .8rem 0; padding: .4rem .7rem; border-left: 3px solid #0969da; background: #ddf4ff; }
.text { white-space: pre-wrap; }
#live p { margin: .4rem 0; } #live .streaming { white-space: pre-wrap; color: #59636e; } #live .running { font-family: ui-monospace, monospace; font-size: .88em; color: #9a6700; }
.thumb { max-width: 160px; max-height: 120px; vertical-align: middle; border: 1px solid #d0d7de; }
"#;

/// Follows a run in flight: appends each entry the server sends where the
/// page would have put it, shows the streaming text and the running tool.
const FOLLOW: &str = r#"
(function () {
  var main = document.getElementById('entries'), live = document.getElementById('live');
  var streaming = live.querySelector('.streaming'), running = live.querySelector('.running');
  var next = Number(main.dataset.next);
  var events = new EventSource(location.pathname.replace(/\/$/, '') + '/events?from=' + next);
  function openStep() {
    var last = main.lastElementChild;
    return last && last.matches('details.step:not(.call-side)') ? last.querySelector('.body') : null;
  }
  events.onmessage = function (message) {
    var e = JSON.parse(message.data);
    if (e.kind === 'entry') {
      if (e.seq < next) return;
      next = e.seq + 1;
      ((e.in_step && openStep()) || main).insertAdjacentHTML('beforeend', e.html);
      if (e.of === 'model') streaming.textContent = '';
      if (e.of === 'tool') running.textContent = '';
    } else if (e.kind === 'text') {
      streaming.textContent = e.text ? '#' + e.step + ' ' + e.text + ' …' : '';
    } else if (e.kind === 'tool_started') {
      running.textContent = 'running ' + e.name + ' ' + e.arguments;
    } else if (e.kind === 'ended') {
      events.close();
      streaming.textContent = '';
      running.textContent = 'The run ended; reload the page for its outcome.';
    }
  };
})();
"#;

/// The page of run `run` with its `entries` in order.
pub fn render_page(run: &RunRecord, entries: &[Entry]) -> String {
    let mut html = String::with_capacity(entries.len() * 1_500 + 4_000);
    let started = super::render::when(run.started_at);
    let steps = entries
        .iter()
        .filter(|e| matches!(e, Entry::Model { .. }))
        .count();
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>Run {id} · forgehand</title><style>{STYLE}</style></head><body>\n\
<h1>Run {id}: {task}</h1><p class=\"sub\">started {started} · {outcome} · {steps} model answer(s) · <a href=\"/\">status page</a></p>\n",
        id = run.id,
        task = escape(&run.task_key),
        outcome = escape(run.outcome.as_deref().unwrap_or("still running")),
    );
    let running = run.outcome.is_none();
    let _ = writeln!(html, "<main id=\"entries\" data-next=\"{}\">", entries.len());
    let mut open_step = false;
    for entry in entries {
        match entry {
            Entry::Model { .. } => {
                if open_step {
                    html.push_str("</div></details>\n");
                }
                model_step(&mut html, entry);
                open_step = true;
            }
            Entry::Tool { .. } => tool_result(&mut html, entry),
            Entry::Call { .. } => {
                if open_step {
                    html.push_str("</div></details>\n");
                    open_step = false;
                }
                side_call(&mut html, entry);
            }
            Entry::Egress { .. } => egress_line(&mut html, entry),
            Entry::Note { text } => {
                if open_step {
                    html.push_str("</div></details>\n");
                    open_step = false;
                }
                let _ = writeln!(html, "<div class=\"note\">{}</div>", escape(text));
            }
            Entry::Image { .. } => {
                if open_step {
                    html.push_str("</div></details>\n");
                    open_step = false;
                }
                image(&mut html, entry);
            }
        }
    }
    if open_step {
        html.push_str("</div></details>\n");
    }
    html.push_str("</main>\n");
    if running {
        let _ = writeln!(
            html,
            "<div id=\"live\"><p class=\"streaming\"></p><p class=\"running\"></p></div><script>{FOLLOW}</script>"
        );
    }
    html.push_str("</body></html>\n");
    html
}

/// What a live reader is sent for `entry`: its block as the page shows it,
/// and whether it goes in the body of the step before it.
pub fn entry_block(entry: &Entry) -> (String, bool) {
    let mut html = String::new();
    let in_step = match entry {
        Entry::Model { .. } => {
            model_step(&mut html, entry);
            html.push_str("</div></details>\n");
            false
        }
        Entry::Tool { .. } => {
            tool_result(&mut html, entry);
            true
        }
        Entry::Call { .. } => {
            side_call(&mut html, entry);
            false
        }
        Entry::Egress { .. } => {
            egress_line(&mut html, entry);
            true
        }
        Entry::Note { text } => {
            let _ = writeln!(html, "<div class=\"note\">{}</div>", escape(text));
            false
        }
        Entry::Image { .. } => {
            image(&mut html, entry);
            false
        }
    };
    (html, in_step)
}

fn egress_line(html: &mut String, entry: &Entry) {
    let Entry::Egress { denied, .. } = entry else {
        return;
    };
    let class = if denied.is_some() { "egress err" } else { "egress" };
    let line = entry.egress_line().unwrap_or_default();
    let _ = writeln!(html, "<div class=\"{class}\">{}</div>", escape(&line));
}

/// An image from the thread: its thumbnail (a `data:` URL only an image
/// type ever gets here) and what it is.
fn image(html: &mut String, entry: &Entry) {
    let Entry::Image {
        source, thumbnail, ..
    } = entry
    else {
        return;
    };
    let line = entry.image_line().unwrap_or_default();
    html.push_str("<div class=\"note image\">");
    if let Some(data_url) = thumbnail.as_deref().filter(|u| is_image_data_url(u)) {
        let _ = write!(
            html,
            "<img class=\"thumb\" src=\"{}\" alt=\"\"> ",
            escape(data_url)
        );
    }
    let _ = writeln!(
        html,
        "{} <span class=\"meta\">{}</span></div>",
        escape(&line),
        escape(source)
    );
}

/// Whether `url` is a base64 `data:` URL of one of the image types taken.
fn is_image_data_url(url: &str) -> bool {
    ["png", "jpeg", "gif", "webp"]
        .iter()
        .any(|t| url.starts_with(&format!("data:image/{t};base64,")))
        && url["data:image/".len()..]
            .split_once(',')
            .is_some_and(|(_, data)| {
                data.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
            })
}

/// A model call outside the loop (reading the thread, planning), collapsed.
fn side_call(html: &mut String, entry: &Entry) {
    let Entry::Call { purpose, text, .. } = entry else {
        return;
    };
    let _ = writeln!(
        html,
        "<details class=\"step call-side\"><summary><b>{purpose}</b> <span class=\"meta\">· {meta}</span></summary><div class=\"body\"><p class=\"text\">{text}</p></div></details>",
        purpose = escape(purpose),
        meta = escape(&entry.answer_meta(" · ").unwrap_or_default()),
        text = escape(text),
    );
}

fn model_step(html: &mut String, entry: &Entry) {
    let Entry::Model { text, tool_calls, .. } = entry else {
        return;
    };
    let gist = match (text.lines().find(|l| !l.trim().is_empty()), tool_calls.first()) {
        (Some(line), _) => line.chars().take(100).collect::<String>(),
        (None, Some(call)) => format!("→ {}", call.name),
        (None, None) => "(no text)".to_owned(),
    };
    let _ = writeln!(
        html,
        "<details class=\"step\"><summary><b>{step}</b> {gist} <span class=\"meta\">· {meta}</span></summary><div class=\"body\">",
        step = escape(&entry.step_label()),
        gist = escape(&gist),
        meta = escape(&entry.answer_meta(" · ").unwrap_or_default()),
    );
    if !text.trim().is_empty() {
        let _ = writeln!(html, "<p class=\"text\">{}</p>", escape(text));
    }
    for call in tool_calls {
        let _ = writeln!(
            html,
            "<div class=\"call\">→ {} {}</div>",
            escape(&call.name),
            escape(&call.arguments)
        );
    }
}

fn tool_result(html: &mut String, entry: &Entry) {
    let Entry::Tool {
        name,
        ok,
        exit_code,
        output,
        output_tail,
        output_chars,
        diff,
        ms,
        attempt,
        ..
    } = entry
    else {
        return;
    };
    let name = match attempt {
        Some(n) => format!("{name} (attempt {n})"),
        None => name.clone(),
    };
    let status = match (ok, exit_code) {
        (_, Some(0)) | (true, None) => "<span class=\"ok\">ok</span>".to_owned(),
        (_, Some(code)) => format!("<span class=\"err\">exit code {code}</span>"),
        (false, None) => "<span class=\"err\">error</span>".to_owned(),
    };
    let _ = writeln!(
        html,
        "<div class=\"tool\"><h3>{} {status} <span class=\"meta\">· {ms} ms · {output_chars} characters</span></h3>",
        escape(&name)
    );
    match diff {
        Some(diff) => diff_block(html, diff),
        None => {
            let mut shown = output.clone();
            if let Some(tail) = output_tail {
                shown.push_str("\n[… the middle of the output is left out …]\n");
                shown.push_str(tail);
            }
            folded(html, &shown);
        }
    }
    html.push_str("</div>\n");
}

fn diff_block(html: &mut String, diff: &str) {
    html.push_str("<pre class=\"diff\">");
    for line in diff.lines() {
        let class = match line.chars().next() {
            _ if line.starts_with("---") || line.starts_with("+++") || line.starts_with("@@") => "hunk",
            Some('+') => "add",
            Some('-') => "del",
            _ => "",
        };
        let _ = write!(html, "<span class=\"{class}\">{}</span>", escape(line));
    }
    html.push_str("</pre>\n");
}

/// `text` in a block, folded behind a summary when it is long.
fn folded(html: &mut String, text: &str) {
    let lines = text.lines().count();
    if lines > FOLD_LINES {
        let _ = writeln!(
            html,
            "<details><summary>output ({lines} lines)</summary><pre>{}</pre></details>",
            escape(text)
        );
    } else if !text.is_empty() {
        let _ = writeln!(html, "<pre>{}</pre>", escape(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_outputs_fold_and_text_is_escaped() {
        let run = RunRecord {
            id: 7,
            task_key: "github:acme/app:issue:4".into(),
            started_at: 0,
            ended_at: None,
            outcome: None,
        };
        let entries = [
            Entry::Model {
                step: 1,
                model: "gpt-5.6".into(),
                text: "Run <the> tests".into(),
                tool_calls: vec![],
                input_tokens: 10,
                cached_input_tokens: 0,
                output_tokens: 2,
                cost_usd: None,
                ms: 5,
                attempt: None,
            },
            Entry::Tool {
                step: 1,
                name: "command_executor_execute_command".into(),
                arguments: "{}".into(),
                ok: false,
                exit_code: Some(1),
                output: "line\n".repeat(50),
                output_tail: None,
                output_chars: 250,
                diff: None,
                ms: 3,
                attempt: None,
            },
        ];
        let html = render_page(&run, &entries);
        assert!(
            html.contains("<details><summary>output (50 lines)</summary>"),
            "{html}"
        );
        assert!(html.contains("<span class=\"err\">exit code 1</span>"), "{html}");
        assert!(
            html.contains("Run &lt;the&gt; tests") && !html.contains("<the>"),
            "{html}"
        );
        assert!(html.contains("still running"));
    }

    #[test]
    fn an_image_shows_as_a_thumbnail_and_a_refused_one_as_a_line() {
        let run = RunRecord {
            id: 8,
            task_key: "github:acme/app:issue:5".into(),
            started_at: 0,
            ended_at: None,
            // Ended: a run in flight's page carries the script that follows it.
            outcome: Some("delivered".into()),
        };
        let image = |thumbnail: Option<&str>, refused: Option<&str>| Entry::Image {
            source: "https://github.com/user-attachments/assets/1".into(),
            alt: "the <dialog>".into(),
            media_type: refused.is_none().then(|| "image/png".to_owned()),
            bytes: 70,
            size: refused.is_none().then_some((2, 3)),
            thumbnail: thumbnail.map(Into::into),
            refused: refused.map(Into::into),
        };
        let entries = [
            image(Some("data:image/png;base64,iVBORw0KGgo="), None),
            image(None, Some("the file is not a PNG, JPEG, GIF or WebP image")),
            // Only an image type's base64 data URL is ever put in a page.
            image(Some("data:text/html;base64,PHNjcmlwdD4="), None),
            image(Some("data:image/png;base64,\"><script>"), None),
        ];
        let html = render_page(&run, &entries);
        assert_eq!(html.matches("<img class=\"thumb\"").count(), 1, "{html}");
        assert!(
            html.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""),
            "{html}"
        );
        assert!(
            html.contains(
                "image &quot;the &lt;dialog&gt;&quot;: image/png, 2×3, 70 bytes, shown to the models"
            ),
            "{html}"
        );
        assert!(html.contains("not shown: the file is not a PNG"), "{html}");
        assert!(
            !html.contains("<script>") && !html.contains("text/html"),
            "{html}"
        );
    }
}
