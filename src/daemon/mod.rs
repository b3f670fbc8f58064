//! The long-running daemon, written as a reconcile loop: observe the forges
//! (labelled items, cheaply) and the journal, start or resume tasks up to the
//! concurrency limit, and on shutdown stop claiming, give running tasks a
//! grace period, then checkpoint them for the next start.

mod budget_hold;
mod claims;
pub mod http;
pub mod intake;
pub(crate) mod mentions;
mod requeue;
pub mod scheduler;
pub mod setup;
pub mod systemd;
mod watcher;

use crate::forge::{Forge, ForgeKind, ItemRef};
use crate::journal::Transition;
use crate::journal::WaitKind;
use crate::task::{self, Action, TaskEnv};
use scheduler::{Scheduler, StartReason};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often a running daemon forgets old transcripts and spend.
const PRUNE_EVERY: Duration = Duration::from_secs(6 * 3600);
/// Webhook deliveries waiting for the loop; more wait for the next poll.
const DOORBELLS: usize = 256;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    #[error("cannot clean up leftover sandboxes: {0}")]
    Reap(#[from] crate::sandbox::SandboxError),
    #[error(
        "cannot listen on {address} (daemon.http.listen): {detail}; choose a free address or leave it empty"
    )]
    Listen { address: String, detail: String },
    #[error("the HTTP listener is not started: {0}")]
    Unprotected(String),
    #[error("cannot watch for SIGHUP (config reload): {0}")]
    Signal(String),
    #[error("cluster.mode is kubernetes, but {0}")]
    Cluster(String),
}

pub struct Daemon {
    env: Arc<TaskEnv>,
    forges: BTreeMap<ForgeKind, Arc<dyn Forge>>,
    /// The config file SIGHUP reloads, when reloading is on.
    reload_from: Option<std::path::PathBuf>,
}

impl Daemon {
    pub fn new(env: Arc<TaskEnv>, forges: Vec<Arc<dyn Forge>>) -> Daemon {
        Daemon {
            env,
            forges: forges.into_iter().map(|f| (f.kind(), f)).collect(),
            reload_from: None,
        }
    }

    /// On SIGHUP, loads `path` again: new tasks get the new config (new
    /// repositories, limits, labels); running tasks keep theirs. A config
    /// that does not load is refused with its error and the old one stays.
    pub fn reload_on_hangup(mut self, path: std::path::PathBuf) -> Daemon {
        self.reload_from = Some(path);
        self
    }

    /// The SIGHUP reload: the new environment and forges, or why not.
    async fn reload(&mut self) -> Result<(), String> {
        let Some(path) = &self.reload_from else {
            return Err("reloading is off".into());
        };
        let config = crate::config::Config::load(path).map_err(|e| e.to_string())?;
        let secrets = crate::config::Secrets::from_env();
        let problems = setup::first_run_problems(&config, &secrets);
        if !problems.is_empty() {
            return Err(problems.join("; "));
        }
        if config.cluster != self.env.config.cluster {
            return Err(
                "the cluster settings cannot change while the daemon runs; restart it to change them".into(),
            );
        }
        if config.daemon.state_dir != self.env.config.daemon.state_dir {
            return Err(format!(
                "daemon.state_dir cannot change while the daemon runs (it holds {}); restart it to move",
                self.env.config.daemon.state_dir.display()
            ));
        }
        let kept = setup::Kept {
            owner: self.env.state_owner.clone(),
            board: self.env.board.clone(),
            live: self.env.live.clone(),
            metrics: self.env.metrics.clone(),
        };
        let assembly = setup::assemble_owned(config, secrets, None, kept)
            .await
            .map_err(|e| e.to_string())?;
        self.env = assembly.env;
        self.forges = assembly.forges.into_iter().map(|f| (f.kind(), f)).collect();
        Ok(())
    }

    /// Runs until `shutdown` is cancelled, then winds down (see module docs).
    pub async fn run(&mut self, shutdown: CancellationToken) -> Result<(), DaemonError> {
        let mut hangups = match &self.reload_from {
            Some(_) => Some(
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
                    .map_err(|e| DaemonError::Signal(e.to_string()))?,
            ),
            None => None,
        };
        let mut state = self.start().await?;
        let listener_stop = CancellationToken::new();
        let (doorbells, mut rung) = tokio::sync::mpsc::channel(DOORBELLS);
        let _listener = self
            .start_listener(state.health.clone(), doorbells, listener_stop.clone())
            .await?;
        // Wake at least this often, so the watchdog is fed between polls.
        let heartbeat = state
            .systemd
            .watchdog()
            .map(|w| w / 3)
            .unwrap_or(state.scheduling.poll_interval)
            .max(Duration::from_millis(200));
        loop {
            self.tick(&mut state);
            self.start_ready(&mut state).await;
            if shutdown.is_cancelled() {
                break;
            }
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = tokio::time::sleep(self.next_wake(heartbeat)) => {}
                Some(()) = async { hangups.as_mut()?.recv().await }, if hangups.is_some() => {
                    self.on_hangup(&mut state).await;
                }
                Some(done) = state.scheduler.join_next(), if state.scheduler.running() > 0 => {
                    if let Some((key, action)) = state.settle(done, &self.env.journal).await {
                        state.scheduler.apply(&key, action, state.scheduling.poll_interval);
                    }
                    give_back_memory();
                }
                _ = tokio::time::sleep_until(state.next_poll) => {
                    self.poll(&mut state, &shutdown).await;
                }
                _ = tokio::time::sleep_until(state.next_checks_look) => {
                    self.look_at_checks(&mut state).await;
                }
                _ = tokio::time::sleep_until(state.next_automations_look), if !state.automations.is_empty() => {
                    let openers = self.forges.iter().map(|(k, f)| (*k, f.clone() as Arc<dyn crate::forge::Opener>)).collect();
                    state.automations.look(&openers, &self.env.journal).await;
                    state.next_automations_look = tokio::time::Instant::now() + state.automations.next_look_in();
                }
                Some(doorbell) = rung.recv() => {
                    self.answer_doorbell(&mut state, doorbell).await;
                }
            }
        }
        self.wind_down(&mut state).await;
        listener_stop.cancel();
        tracing::info!("stopped");
        Ok(())
    }

    /// Before the loop: the replicas' coordinator, leftovers reaped, and
    /// the journal's unfinished tasks queued to resume.
    async fn start(&self) -> Result<LoopState, DaemonError> {
        self.prune_journal();
        let coordinator = match self.env.config.cluster.mode {
            crate::config::ClusterMode::Single => None,
            crate::config::ClusterMode::Kubernetes => Some(
                claims::Coordinator::connect(&self.env.config.cluster, self.env.config.labels.clone())
                    .await
                    .map_err(DaemonError::Cluster)?,
            ),
        };
        // Nothing runs yet, so every sandbox of this daemon is an orphan.
        let removed = self.env.backend.reap(&[]).await?;
        if !removed.is_empty() {
            tracing::info!(
                count = removed.len(),
                "removed sandboxes left by an earlier run: {}",
                removed.join(", ")
            );
        }
        let mut resumed = Vec::new();
        for record in self.env.journal.unfinished()? {
            // A task waiting while holding nothing has no Lease: its wait is
            // in this journal alone, so this replica goes on with it.
            if coordinator.is_some() && !self.env.journal.holds_a_wait(&record.key)? {
                // Among replicas the Leases say who resumes what: this
                // replica's unfinished work is taken over through them.
                tracing::info!(key = %record.key, "unfinished in this replica's journal; left to the Leases");
                self.env.journal.transition(
                    &record.key,
                    Transition::ended(crate::journal::Phase::Stopped, "left to the replicas' Leases"),
                )?;
                continue;
            }
            match ItemRef::parse_key(&record.key) {
                Some(item) if self.forges.contains_key(&item.forge) => {
                    tracing::info!(task = %item, phase = record.phase.as_str(), "resuming an unfinished task");
                    resumed.push(item);
                }
                Some(item) => tracing::warn!(
                    task = %item,
                    "unfinished task of a forge that is no longer configured; it stays in the journal"
                ),
                None => tracing::warn!(key = %record.key, "unreadable journal key; ignored"),
            }
        }
        let keys: HashSet<String> = resumed.iter().map(ItemRef::key).collect();
        let mut scheduler = Scheduler::new(self.env.journal.clone(), &keys);
        for item in resumed {
            scheduler.push(item, StartReason::Resume);
        }
        // What no unfinished task will resume from (nothing runs yet).
        task::sweep_checkpoints(&self.env.config, &self.env.journal);
        tracing::info!(
            instance = %self.env.config.daemon.instance_id,
            forges = %self.forges.keys().map(|k| k.as_str()).collect::<Vec<_>>().join(", "),
            resuming = scheduler.queued(),
            "forgehand started"
        );
        let scheduling = self.env.config.scheduling.clone();
        let health = Arc::new(http::Health::new(scheduling.poll_interval));
        health.tick();
        let automations = self.automations(coordinator.as_ref());
        Ok(LoopState {
            automations,
            next_automations_look: tokio::time::Instant::now(),
            scheduler,
            coordinator,
            intake: self.intake(),
            health,
            systemd: systemd::Notifier::from_env(),
            next_poll: tokio::time::Instant::now(),
            next_checks_look: tokio::time::Instant::now(),
            low_space: None,
            tasks_stop: CancellationToken::new(),
            scheduling,
            budget_holds: Default::default(),
            pruned_at: tokio::time::Instant::now(),
        })
    }

    /// Each pass of the loop: health, requeued tasks now due, reviews
    /// whose quiet period is over, free space, systemd.
    fn tick(&self, state: &mut LoopState) {
        state.health.tick();
        state.scheduler.requeue_due();
        self.offer_pending_mentions(state);
        let now_low = self.space_problem();
        // Logged when it changes (the free space itself moves all the time).
        if now_low.is_some() != state.low_space.is_some() {
            match &now_low {
                Some(why) => tracing::warn!("not claiming new tasks: {why}"),
                None => tracing::info!("free space is back; claiming again"),
            }
        }
        state.health.set_not_claiming(now_low.clone());
        state.low_space = now_low;
        state.systemd.alive(&systemd::status_line(
            state.scheduler.running(),
            state.scheduler.waiting(),
            state
                .next_poll
                .saturating_duration_since(tokio::time::Instant::now()),
        ));
    }

    /// Starts what may start: up to the concurrency limit, under a claim
    /// among replicas; begun work goes on while new claims wait for space.
    /// A task that may not start yet is requeued by its [`Action`].
    async fn start_ready(&self, state: &mut LoopState) {
        let limit = state.scheduling.max_concurrent_tasks;
        let first_wait = state.scheduling.poll_interval;
        while let Some((item, why)) = state.scheduler.next(limit, state.low_space.is_some()) {
            let Some(forge) = self.forges.get(&item.forge).cloned() else {
                state.scheduler.not_started(&item);
                continue;
            };
            // Work not begun waits while a money cap is reached.
            if matches!(why, StartReason::New | StartReason::Retry) {
                let budget = &self.env.config.budget;
                if let Some(held) = state
                    .budget_holds
                    .hold(budget, &self.env.journal, forge.as_ref(), &item)
                    .await
                {
                    state.scheduler.apply(&item.key(), held, first_wait);
                    continue;
                }
                state.budget_holds.started(&item.key());
            }
            let (forge, stop) = match state.claim(&item, forge).await {
                Ok(go) => go,
                Err(Some(later)) => {
                    state.scheduler.apply(&item.key(), later, first_wait);
                    continue;
                }
                Err(None) => {
                    state.scheduler.not_started(&item);
                    continue;
                }
            };
            tracing::info!(task = %item, "starting ({})", why.as_str());
            let env = self.env.clone();
            state.scheduler.spawn(
                item.key(),
                async move { task::run(&env, forge, item, stop).await },
            );
        }
    }

    /// SIGHUP: the new config for new tasks, or the old one kept.
    async fn on_hangup(&mut self, state: &mut LoopState) {
        match self.reload().await {
            Ok(()) => {
                state.scheduling = self.env.config.scheduling.clone();
                state.intake = self.intake();
                state.automations = self.automations(state.coordinator.as_ref());
                state.next_automations_look = tokio::time::Instant::now();
                if let Some(claims) = state.coordinator.as_mut() {
                    claims.set_labels(self.env.config.labels.clone());
                }
                state.next_poll = tokio::time::Instant::now();
                tracing::info!(
                    forges = %self.forges.keys().map(|k| k.as_str()).collect::<Vec<_>>().join(", "),
                    running = state.scheduler.running(),
                    "config reloaded; running tasks keep the config they started with"
                );
            }
            Err(e) => tracing::error!("config reload refused, the running config stays: {e}"),
        }
    }

    /// One poll of every forge (and, among replicas, of the Leases):
    /// what it finds is queued; orphaned sandboxes go.
    async fn poll(&self, state: &mut LoopState, shutdown: &CancellationToken) {
        let mut found = Vec::new();
        let poll_started = std::time::Instant::now();
        let intake = &mut state.intake;
        let poll_all = async {
            for forge in self.forges.values() {
                found.extend(intake.poll(forge.as_ref()).await);
            }
        };
        // A slow forge must not hold up a shutdown.
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = poll_all => {}
        }
        self.env.metrics.poll_took(poll_started.elapsed());
        if let Some(claims) = state.coordinator.as_mut() {
            let room = state
                .scheduling
                .max_concurrent_tasks
                .saturating_sub(state.scheduler.active().len() + state.scheduler.queued());
            let forges = &self.forges;
            for item in claims
                .sweep(room, state.scheduler.active(), |i| forges.contains_key(&i.forge))
                .await
            {
                state.scheduler.push(item, StartReason::Takeover);
            }
        }
        self.reap_orphans(state.scheduler.active()).await;
        let answered = state.intake.answered();
        // The first reconcile is done when a forge answered a whole poll.
        if answered.iter().any(|(_, a)| a.is_ok()) {
            state.systemd.ready();
        }
        for (kind, answered) in answered {
            state.health.set_forge(kind.as_str(), answered);
        }
        for item in found {
            state.scheduler.push(item, StartReason::New);
        }
        self.watch(state, &[WaitKind::Approval, WaitKind::Paused]).await;
        // Mentions heard whose task has not begun (one was running, or the
        // daemon stopped in between) are offered again until it does.
        self.offer_pending_mentions(state);
        let jitter = if state.scheduling.poll_jitter.is_zero() {
            Duration::ZERO
        } else {
            Duration::from_millis(fastrand::u64(0..=state.scheduling.poll_jitter.as_millis() as u64))
        };
        state.next_poll = tokio::time::Instant::now() + state.scheduling.poll_interval + jitter;
        if state.pruned_at.elapsed() >= PRUNE_EVERY {
            self.prune_journal();
            state.pruned_at = tokio::time::Instant::now();
        }
    }

    /// The tasks waiting on checks that ended, started again.
    async fn look_at_checks(&self, state: &mut LoopState) {
        self.watch(state, &[WaitKind::Checks]).await;
        state.next_checks_look = tokio::time::Instant::now() + self.env.config.delivery.ci.poll;
    }

    /// The tasks whose wait of one of `kinds` ended, started again.
    async fn watch(&self, state: &mut LoopState, kinds: &[WaitKind]) {
        let (journal, active) = (&self.env.journal, state.scheduler.active());
        let ended = watcher::ended(&self.forges, journal, active, kinds, &self.env.config).await;
        for (item, why) in ended {
            state.scheduler.push(item, why);
        }
    }

    /// A webhook delivery: its repository's items polled now, or the
    /// tasks waiting on its checks told to look again.
    async fn answer_doorbell(&self, state: &mut LoopState, doorbell: crate::webhooks::Doorbell) {
        use crate::webhooks::Topic;
        let Some(forge) = self.forges.get(&doorbell.forge) else {
            tracing::debug!(
                forge = doorbell.forge.as_str(),
                "a delivery from a forge that is not configured"
            );
            return;
        };
        // Polled and rung under the watched spelling, never the payload's.
        let repo = match state.intake.watched(forge.as_ref(), &doorbell.repo).await {
            intake::Watch::Watched(repo) => repo,
            intake::Watch::NotWatched => {
                tracing::info!(
                    repo = %doorbell.repo,
                    "a webhook delivery for a repository forgehand does not watch; ignored"
                );
                return;
            }
            // The forge's error is noted for /readyz; the next poll sees
            // the change. Tasks waiting on CI may look again all the same
            // (their bell matches a name in any case).
            intake::Watch::CannotTell => match (&doorbell.topic, &doorbell.repo) {
                (Topic::Checks, crate::webhooks::RepoName::Path(path)) => path.clone(),
                _ => return,
            },
        };
        match doorbell.topic {
            Topic::Items => {
                for item in state.intake.poll_one(forge.as_ref(), &repo).await {
                    state.scheduler.push(item, StartReason::New);
                }
                self.offer_pending_mentions(state);
            }
            // The tasks waiting on checks are looked at now, not at the next look.
            Topic::Checks => {
                tracing::debug!(repo = %repo, "checks changed; looking at the tasks waiting on them now");
                state.next_checks_look = tokio::time::Instant::now();
            }
        }
    }

    /// Forgets what the journal keeps no longer: spend older than about a
    /// year, transcripts older than `daemon.transcript_retention`; and the
    /// mirrors no task used for `git.mirror_retention`.
    fn prune_journal(&self) {
        let journal = &self.env.journal;
        if let Err(e) = journal.prune_spend(&crate::budget::Period::now().kept_from()) {
            tracing::warn!("cannot prune the spend ledger: {e}");
        }
        crate::transcript::prune(journal, self.env.config.daemon.transcript_retention);
        let config = &self.env.config;
        let mirrors = crate::git::mirror::Mirrors::for_config(config);
        let retention = config.git.mirror_retention;
        tokio::task::spawn_blocking(move || {
            if let Err(e) = mirrors.prune(retention) {
                tracing::warn!("cannot prune the repositories' mirrors: {e}");
            }
        });
    }

    /// The running config's automations; among replicas each time is
    /// taken through the Leases the task claims use.
    fn automations(&self, coordinator: Option<&claims::Coordinator>) -> crate::automations::Automations {
        let slots = coordinator.map(claims::Coordinator::slot_leases);
        let automations = crate::automations::Automations::new(
            &self.env.config,
            crate::automations::clock::from_env(),
            slots,
        );
        if !automations.is_empty() {
            tracing::info!(
                count = self.env.config.automations.len(),
                "scheduled automations on"
            );
        }
        automations
    }

    /// The intake for the running config.
    fn intake(&self) -> intake::Intake {
        let config = &self.env.config;
        let intake = intake::Intake::new(config.labels.clone());
        let listening = mentions::Listening {
            mentions: config.triggers.mentions,
            reviews: config.triggers.reviews.then(|| {
                (
                    config.triggers.review_quiet,
                    config.delivery.branch_prefix.clone(),
                )
            }),
        };
        match listening.mentions || listening.reviews.is_some() {
            true => intake.with_comments(listening, self.env.journal.clone()),
            false => intake,
        }
    }

    /// The loop's longest sleep: `heartbeat`, or less when a heard review's
    /// quiet period ends sooner.
    fn next_wake(&self, heartbeat: Duration) -> Duration {
        match self.env.journal.next_pending_in() {
            Ok(Some(due)) => heartbeat.min(due.max(Duration::from_millis(50))),
            Ok(None) => heartbeat,
            Err(e) => {
                tracing::error!("cannot read the comments heard: {e}");
                heartbeat
            }
        }
    }

    /// Queues the tasks of heard mentions that have not begun.
    fn offer_pending_mentions(&self, state: &mut LoopState) {
        match self.env.journal.pending_mentions() {
            Ok(keys) => {
                for key in keys {
                    match ItemRef::parse_key(&key) {
                        Some(item) if self.forges.contains_key(&item.forge) => {
                            state.scheduler.push(item, StartReason::New)
                        }
                        _ => {
                            tracing::warn!(key = %key, "a mention asked for a task of a forge that is not configured")
                        }
                    }
                }
            }
            Err(e) => tracing::error!("cannot read the mentions heard: {e}"),
        }
    }

    /// No new tasks; running ones get the grace period, then are
    /// checkpointed; claims among replicas are handed over.
    async fn wind_down(&self, state: &mut LoopState) {
        state.systemd.stopping();
        if state.scheduler.running() > 0 {
            tracing::info!(
                running = state.scheduler.running(),
                "shutting down: no new tasks; running tasks get {} s to finish",
                state.scheduling.shutdown_grace.as_secs()
            );
            let grace = tokio::time::sleep(state.scheduling.shutdown_grace);
            tokio::pin!(grace);
            loop {
                tokio::select! {
                    _ = &mut grace => break,
                    done = state.scheduler.join_next() => match done {
                        Some(done) => {
                            state.settle(done, &self.env.journal).await;
                        }
                        None => break,
                    },
                }
            }
            if state.scheduler.running() > 0 {
                tracing::info!(
                    running = state.scheduler.running(),
                    "grace period over; checkpointing running tasks"
                );
                state.tasks_stop.cancel();
                while let Some(done) = state.scheduler.join_next().await {
                    state.settle(done, &self.env.journal).await;
                }
            }
        }
        if let Some(claims) = state.coordinator.as_mut() {
            claims.shutdown().await;
        }
    }

    /// Removes this instance's sandboxes that no running task owns: ones a
    /// task could not remove while the Docker engine was away. An engine
    /// that does not answer now is tried again at the next poll.
    async fn reap_orphans(&self, active: &HashSet<String>) {
        let owners: Vec<String> = active
            .iter()
            .filter_map(|key| ItemRef::parse_key(key))
            .flat_map(|item| task::sandbox_owners(&item.slug()))
            .collect();
        match self.env.backend.reap(&owners).await {
            Ok(removed) if !removed.is_empty() => tracing::info!(
                count = removed.len(),
                "removed sandboxes no running task owns: {}",
                removed.join(", ")
            ),
            Ok(_) => {}
            Err(e) => tracing::debug!("cannot look for orphaned sandboxes now: {e}"),
        }
    }

    /// Why the state folder's disk is too full to claim a task, if it is.
    fn space_problem(&self) -> Option<String> {
        let dir = &self.env.config.daemon.state_dir;
        let min = self.env.config.daemon.min_free_space;
        match rustix::fs::statvfs(dir) {
            Ok(stat) => {
                let free = stat.f_bavail.saturating_mul(stat.f_frsize);
                (free < min).then(|| {
                    format!(
                        "{} has {} MiB free, under daemon.min_free_space ({} MiB); free some space (old work folders, logs) or raise the disk",
                        dir.display(),
                        free >> 20,
                        min >> 20
                    )
                })
            }
            Err(e) => Some(format!("cannot tell the free space of {}: {e}", dir.display())),
        }
    }

    /// Starts the HTTP listener when `daemon.http.listen` is set; it stops
    /// when `stop` is cancelled (after the tasks, so probes answer during
    /// the grace period).
    async fn start_listener(
        &self,
        health: Arc<http::Health>,
        doorbells: tokio::sync::mpsc::Sender<crate::webhooks::Doorbell>,
        stop: CancellationToken,
    ) -> Result<Option<tokio_util::task::AbortOnDropHandle<()>>, DaemonError> {
        let Some(address) = self.env.config.daemon.http_listen else {
            return Ok(None);
        };
        // `run` refused this already; a daemon assembled some other way
        // still never serves transcripts to anyone without the token.
        if let Some(problem) = setup::http_token_problem(&self.env.config, &self.env.secrets) {
            return Err(DaemonError::Unprotected(problem));
        }
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| DaemonError::Listen {
                address: address.to_string(),
                detail: e.to_string(),
            })?;
        let bound = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        tracing::info!(address = %bound, "serving /healthz, /readyz, /metrics and the status page");
        let webhooks = self.env.config.daemon.webhooks.then(|| {
            tracing::info!(address = %bound, "taking webhook deliveries at /webhooks/github and /webhooks/gitlab");
            let secrets = &self.env.secrets;
            http::Webhooks {
                receiver: crate::webhooks::Receiver::new(crate::webhooks::WebhookSecrets {
                    github: secrets.github_webhook_secret.clone(),
                    gitlab: secrets.gitlab_webhook_secret.clone(),
                }),
                doorbells,
            }
        });
        let state = Arc::new(http::HttpState {
            health,
            journal: self.env.journal.clone(),
            backend: self.env.backend.clone(),
            token: self.env.secrets.http_token.clone(),
            instance: self.env.config.daemon.instance_id.clone(),
            board: self.env.board.clone(),
            metrics: self.env.metrics.clone(),
            live: self.env.live.clone(),
            webhooks,
        });
        let task = tokio::spawn(async move {
            if let Err(e) = http::serve(listener, state, stop).await {
                tracing::error!("{e}");
            }
        });
        Ok(Some(tokio_util::task::AbortOnDropHandle::new(task)))
    }
}

/// What the daemon's loop keeps between passes.
struct LoopState {
    scheduler: Scheduler,
    /// Claims among replicas (`cluster.mode: kubernetes`).
    coordinator: Option<claims::Coordinator>,
    intake: intake::Intake,
    health: Arc<http::Health>,
    systemd: systemd::Notifier,
    next_poll: tokio::time::Instant,
    /// When the tasks waiting on checks are looked at next.
    next_checks_look: tokio::time::Instant,
    /// The scheduled automations, and when they are looked at next.
    automations: crate::automations::Automations,
    next_automations_look: tokio::time::Instant,
    /// Why new claims wait (the state folder's disk is low), if they do.
    low_space: Option<String>,
    /// Cancelled only after the grace period: tasks stop separately.
    tasks_stop: CancellationToken,
    scheduling: crate::config::SchedulingConfig,
    /// What new items held back by a budget's cap were told.
    budget_holds: budget_hold::BudgetHolds,
    /// When the journal's old transcripts and spend were last forgotten.
    pruned_at: tokio::time::Instant,
}

impl LoopState {
    /// The scheduler's bookkeeping for a task that returned, then among
    /// replicas the claim's: released, kept for a retry, or handed over
    /// (see [`claims::Coordinator::ended`]); the task's next [`Action`].
    async fn settle(
        &mut self,
        done: scheduler::Finished,
        journal: &crate::journal::Journal,
    ) -> Option<(String, Action)> {
        let (key, end) = self.scheduler.finished(done)?;
        let action = end.action();
        if let Some(claims) = self.coordinator.as_mut() {
            claims.ended(&key, action, journal).await;
        }
        Some((key, action))
    }

    /// The forge and stop signal `item`'s task runs with: among replicas,
    /// under its claim. Otherwise the action that puts it off, or `None`
    /// when another replica has it (or it asks for no work).
    async fn claim(
        &mut self,
        item: &ItemRef,
        forge: Arc<dyn Forge>,
    ) -> Result<(Arc<dyn Forge>, CancellationToken), Option<Action>> {
        let Some(claims) = self.coordinator.as_mut() else {
            return Ok((forge, self.tasks_stop.clone()));
        };
        match claims.acquire(item, forge).await {
            claims::Acquired::Go(go) => {
                // The task stops when the daemon does, or the moment its claim is lost.
                let stop = self.tasks_stop.child_token();
                let (lost, on_lost) = (go.lost, stop.clone());
                tokio::spawn(async move {
                    lost.cancelled().await;
                    on_lost.cancel();
                });
                Ok((go.forge, stop))
            }
            claims::Acquired::Elsewhere => Err(None),
            claims::Acquired::Later => Err(Some(Action::RequeueAfter(
                task::Wait::Growing,
                task::Why::ClaimLater,
            ))),
        }
    }
}

/// What a task freed goes back to the system once it has ended, so a daemon
/// that runs for months stays at its level (see [`crate::memory::give_back`]).
fn give_back_memory() {
    let started = std::time::Instant::now();
    if let Some(released) = crate::memory::give_back() {
        tracing::debug!(
            released,
            ms = started.elapsed().as_millis() as u64,
            "a task ended: malloc's free memory given back"
        );
    }
}
