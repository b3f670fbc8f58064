//! A follow-up run's review threads: each shown to the model under a tag
//! (`[T1]`, `[T2]`, …), answered in its thread from the line the model's
//! summary gives it (what changed, with the commit, or why not), and
//! resolved when it was addressed by a pushed commit. The tag lines are
//! taken out of the summary that describes the change.

use super::run::TaskRun;
use crate::forge::{CommentPlace, ReviewThread};

/// What the model said of one thread.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Answer {
    Changed(String),
    Unchanged(String),
}

/// The request's section listing the threads, with how to answer them.
pub(super) fn request_section(threads: &[ReviewThread]) -> String {
    if threads.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n\n## Review threads to answer\nReviewers left these threads on the change. Address each one that \
asks for a change. At the end of your summary, add one line per thread, in this form:\n\
[T1] changed: <what you changed for it>\n\
[T2] unchanged: <why you changed nothing for it>\n",
    );
    for (n, thread) in threads.iter().enumerate() {
        let place = match thread.comments.first().map(|c| &c.place) {
            Some(CommentPlace::Line {
                path,
                line: Some(line),
            }) => format!(" on {path}, line {line}"),
            Some(CommentPlace::Line { path, line: None }) => format!(" on {path}"),
            _ => String::new(),
        };
        out.push_str(&format!("\n### [T{}]{place}\n", n + 1));
        for comment in &thread.comments {
            let quoted: Vec<String> = comment.body.lines().map(|l| format!("> {l}")).collect();
            out.push_str(&format!("{}:\n{}\n", comment.author, quoted.join("\n")));
        }
    }
    out
}

/// `summary` without its thread lines, and each thread's answer by its
/// index (the first thread is 0).
pub(super) fn split_summary(summary: &str) -> (String, Vec<(usize, Answer)>) {
    let mut kept = Vec::new();
    let mut answers = Vec::new();
    for line in summary.lines() {
        match answer_line(line) {
            Some(answer) => answers.push(answer),
            None => kept.push(line),
        }
    }
    (kept.join("\n").trim().to_owned(), answers)
}

/// `[T2] changed: …` (any case, bullets and bold allowed) as (1, Changed).
fn answer_line(line: &str) -> Option<(usize, Answer)> {
    let line = line
        .trim()
        .trim_start_matches(['-', '*', ' '])
        .trim_start_matches("**");
    let rest = line.strip_prefix("[T").or_else(|| line.strip_prefix("[t"))?;
    let (number, rest) = rest.split_once(']')?;
    let index = number.trim().parse::<usize>().ok()?.checked_sub(1)?;
    let rest = rest.trim_start_matches("**").trim();
    let (verdict, text) = rest.split_once(':')?;
    let text = text
        .trim()
        .trim_start_matches("**")
        .trim_end_matches("**")
        .trim()
        .to_owned();
    match verdict.trim().to_ascii_lowercase().as_str() {
        "changed" => Some((index, Answer::Changed(text))),
        "unchanged" | "not changed" => Some((index, Answer::Unchanged(text))),
        _ => None,
    }
}

/// Where the answers point: the pushed commit, when there is one.
pub(super) struct Pushed<'a> {
    pub branch: &'a str,
    /// The commit now at the branch's head, when this run pushed it.
    pub commit: Option<String>,
    /// Whether this run pushed anything.
    pub any: bool,
}

/// Replies in each thread and resolves the ones a pushed commit
/// addressed; a line for the progress comment. A thread that cannot be
/// answered (the forge refused) is logged and left for the next run.
pub(super) async fn answer(
    run: &TaskRun<'_>,
    threads: &[ReviewThread],
    answers: &[(usize, Answer)],
    pushed: &Pushed<'_>,
) -> Option<String> {
    if threads.is_empty() {
        return None;
    }
    let (mut resolved, mut replied) = (0, 0);
    for (index, thread) in threads.iter().enumerate() {
        let answer = answers.iter().rev().find(|(i, _)| *i == index).map(|(_, a)| a);
        let addressed = pushed.any && matches!(answer, Some(Answer::Changed(_)));
        let body = run.secrets.scrub(&reply(answer, pushed));
        match run.forge.reply_in_thread(&run.item, thread, &body).await {
            Ok(()) => replied += 1,
            Err(e) => {
                tracing::warn!(task = %run.item, thread = %thread.id, "cannot reply in the review thread: {e}");
                continue;
            }
        }
        if addressed {
            match run.forge.resolve_thread(&run.item, thread).await {
                Ok(true) => resolved += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(task = %run.item, thread = %thread.id, "cannot resolve the review thread: {e}")
                }
            }
        }
    }
    tracing::info!(task = %run.item, threads = threads.len(), replied, resolved, "review threads answered");
    Some(format!(
        "Review: {replied} of {} thread(s) answered, {resolved} resolved",
        threads.len()
    ))
}

fn reply(answer: Option<&Answer>, pushed: &Pushed<'_>) -> String {
    let at = match &pushed.commit {
        Some(sha) => format!("in {sha}"),
        None => format!("on `{}`", pushed.branch),
    };
    match answer {
        Some(Answer::Changed(text)) if pushed.any => format!("{text}\n\nChanged {at}."),
        Some(Answer::Changed(text)) => {
            format!("{text}\n\n(No commit came of it in this run, so the thread stays open.)")
        }
        Some(Answer::Unchanged(text)) => format!("Not changed: {text}"),
        None => "forgehand changed nothing for this thread in this run (its summary says nothing about it); \
the thread stays open."
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_lines_are_read_and_taken_out_of_the_summary() {
        let summary = "Renamed the helper.\n\n[T1] changed: renamed `greet` to `hello`\n- **[T2] unchanged:** the name is public API\n[T3] maybe: later\n";
        let (kept, answers) = split_summary(summary);
        assert_eq!(kept, "Renamed the helper.\n\n[T3] maybe: later");
        assert_eq!(
            answers,
            vec![
                (0, Answer::Changed("renamed `greet` to `hello`".into())),
                (1, Answer::Unchanged("the name is public API".into())),
            ]
        );
        assert_eq!(answer_line("[T0] changed: x"), None);
    }

    #[test]
    fn a_reply_names_the_commit_or_says_why_the_thread_stays_open() {
        let pushed = Pushed {
            branch: "forgehand/issue-4",
            commit: Some("abc1234".into()),
            any: true,
        };
        assert_eq!(
            reply(Some(&Answer::Changed("Renamed it.".into())), &pushed),
            "Renamed it.\n\nChanged in abc1234."
        );
        assert_eq!(
            reply(Some(&Answer::Unchanged("public API".into())), &pushed),
            "Not changed: public API"
        );
        assert!(reply(None, &pushed).contains("stays open"));
    }
}
