//! Comments as triggers: mentions of forgehand's account, and reviews of
//! the PRs/MRs it opened. Each watched repository's recent comments are
//! read after its labels.
//! - A comment that mentions `@login` (not in a quote or in code), written
//!   by someone allowed to trigger, on an open item, is acknowledged with
//!   `eyes` and starts a task on its item, with no label needed.
//! - A comment on a line of a forgehand PR/MR's diff (a review's inline
//!   comment, a GitLab diff note) by someone allowed to trigger is
//!   acknowledged too, and starts the follow-up run once the review has
//!   been quiet for `triggers.review_quiet`: a dozen comments, one run.
//!
//! - A mention on an item whose task's run is in flight reaches that run's
//!   agent at its next step (task/steer.rs), which acknowledges it then;
//!   a run that ends first leaves it to start the next run, as any mention.
//!
//! Every such comment is heard once, in the journal: an edit never runs it
//! again, and a task it asked for that has not begun is started after a
//! restart. An outsider's comment gets no reaction and no model call, only
//! a log line.

use crate::forge::{mentions, CommentPlace, ForgeError, ForgeKind, Intake, ItemKind, ItemRef, RepoComment};
use crate::journal::{Heard, Journal, JournalError};
use std::collections::HashMap;
use std::time::Duration;

/// How far before the daemon's first look at a repository its comments are
/// read (the forge's clock may lag this host's).
const FIRST_LOOK_BACK: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum MentionError {
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// Which comments start tasks (`triggers`).
#[derive(Debug, Clone)]
pub struct Listening {
    /// `triggers.mentions`.
    pub mentions: bool,
    /// Reviews of forgehand's PRs/MRs (`triggers.reviews`): their quiet
    /// period, and `delivery.branch_prefix`, which names forgehand's branches.
    pub reviews: Option<(Duration, String)>,
}

/// What a comment asks of forgehand.
enum Asks {
    Mention,
    Review { quiet: Duration },
}

/// The account forgehand is on each forge, once known.
pub struct Mentions {
    listening: Listening,
    logins: HashMap<ForgeKind, String>,
}

impl Mentions {
    pub fn new(listening: Listening) -> Mentions {
        Mentions {
            listening,
            logins: HashMap::new(),
        }
    }

    /// The items `repo`'s new mentions ask for now, acknowledged (new
    /// review comments are journalled to start after their quiet period).
    pub async fn poll(
        &mut self,
        forge: &dyn Intake,
        repo: &str,
        journal: &Journal,
    ) -> Result<Vec<ItemRef>, MentionError> {
        let login = self.login(forge).await?;
        let kind = forge.kind().as_str();
        let since = match journal.comment_cursor(kind, repo)? {
            Some(since) => since,
            None => {
                let first = humantime::format_rfc3339_seconds(std::time::SystemTime::now() - FIRST_LOOK_BACK)
                    .to_string();
                journal.set_comment_cursor(kind, repo, &first)?;
                first
            }
        };
        let recent = forge.recent_comments(repo, &since).await?;
        let mut asked = Vec::new();
        for said in &recent.comments {
            if said.comment.author.eq_ignore_ascii_case(&login) {
                continue;
            }
            let Some(asks) = self.asks(said, &login) else {
                continue;
            };
            let id = said.comment.heard_id(repo);
            if journal.heard(kind, &id)? {
                continue;
            }
            if let Some(item) = self.hear(forge, journal, said, &id, asks).await? {
                asked.push(item);
            }
        }
        if let Some(next) = recent.next_since.filter(|next| *next > since) {
            journal.set_comment_cursor(kind, repo, &next)?;
        }
        Ok(asked)
    }

    /// What `said` asks, if anything: a line comment on a change is a
    /// review's (when reviews are heard), else a mention may ask.
    fn asks(&self, said: &RepoComment, login: &str) -> Option<Asks> {
        let on_a_line = matches!(said.comment.place, CommentPlace::Line { .. });
        match &self.listening.reviews {
            Some((quiet, _)) if on_a_line && said.item.kind == ItemKind::Change => {
                Some(Asks::Review { quiet: *quiet })
            }
            _ if self.listening.mentions && mentions(&said.comment.body, login) => Some(Asks::Mention),
            _ => None,
        }
    }

    /// Decides one new comment. Nothing is recorded before every question
    /// was answered, so a forge that fails mid-way is asked again.
    async fn hear(
        &self,
        forge: &dyn Intake,
        journal: &Journal,
        said: &RepoComment,
        id: &str,
        asks: Asks,
    ) -> Result<Option<ItemRef>, MentionError> {
        let kind = forge.kind().as_str();
        let author = &said.comment.author;
        let what = match asks {
            Asks::Mention => "a mention",
            Asks::Review { .. } => "a review comment",
        };
        if !forge.may_trigger(&said.item.repo, author).await? {
            tracing::warn!(task = %said.item, by = %author, "ignored: {what} by @{author}, who may not trigger tasks ({} may)", forge.who_may_trigger());
            journal.hear_comment(kind, id, &Heard::Ignored)?;
            return Ok(None);
        }
        let item = forge.item(&said.item).await?;
        if !item.open {
            tracing::info!(task = %said.item, by = %author, "ignored: {what} on a closed item");
            journal.hear_comment(kind, id, &Heard::Ignored)?;
            return Ok(None);
        }
        let heard = match asks {
            Asks::Mention => Heard::Starts(said.item.key()),
            Asks::Review { quiet } => {
                let prefix = self.listening.reviews.as_ref().map_or("", |(_, p)| p.as_str());
                let change = forge.change(&said.item).await?;
                if !change.source_branch.starts_with(prefix) {
                    tracing::debug!(task = %said.item, "a review comment on a change forgehand did not open");
                    journal.hear_comment(kind, id, &Heard::Ignored)?;
                    return Ok(None);
                }
                Heard::Reviews {
                    task: said.item.key(),
                    quiet,
                }
            }
        };
        journal.hear_comment(kind, id, &heard)?;
        // A mention on an item whose run is in flight is told to its agent
        // at its next step, which acknowledges it then (task/steer.rs).
        let steers = matches!(heard, Heard::Starts(_)) && journal.task_unfinished(&said.item.key())?;
        if steers {
            tracing::info!(task = %said.item, by = %author, "a mention while the task's run is in flight: its agent reads it at its next step");
            return Ok(None);
        }
        if let Err(e) = forge.acknowledge(&said.item, Some(&said.comment)).await {
            tracing::warn!(task = %said.item, "cannot acknowledge {what}: {e}");
        }
        match heard {
            Heard::Reviews { quiet, .. } => {
                tracing::info!(task = %said.item, by = %author, "a review comment; the follow-up starts after {} s without another", quiet.as_secs());
                Ok(None)
            }
            _ => {
                tracing::info!(task = %said.item, by = %author, "a mention asks for a task");
                Ok(Some(said.item.clone()))
            }
        }
    }

    async fn login(&mut self, forge: &dyn Intake) -> Result<String, ForgeError> {
        if let Some(login) = self.logins.get(&forge.kind()) {
            return Ok(login.clone());
        }
        let login = forge.identity().await?;
        tracing::info!(forge = forge.kind().as_str(), "mentions of @{login} start tasks");
        self.logins.insert(forge.kind(), login.clone());
        Ok(login)
    }
}
