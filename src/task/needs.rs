//! What each phase is given: its own settings taken from the task's
//! environment, so a phase sees only what it uses. Here rather than in the
//! task's root so the phases that run others (approval, attempts) build
//! them the same way without reaching back up.

use crate::config::Config;
use crate::forge::ItemRef;
use crate::task::{
    phases::change, phases::ci, phases::claim, phases::context, phases::plan, phases::prepare, phases::push,
    phases::verify,
};
use crate::task::{Accounts, TaskEnv};
use std::sync::Arc;

/// `env` whose model's calls go into the run's transcript, for `purpose`
/// (the agent's own turns are recorded by its loop).
pub(super) fn recorded(env: &TaskEnv, accounts: &Accounts, purpose: &'static str) -> TaskEnv {
    let Some(transcript) = &accounts.transcript else {
        return env.clone();
    };
    let recorder = crate::transcript::Recorder::new(
        transcript.clone(),
        purpose,
        crate::llm::router::price_table(&env.config.llm),
    );
    let model = crate::llm::observed::Observed::new(env.model.clone(), recorder);
    TaskEnv {
        model: Arc::new(model),
        ..env.clone()
    }
}

/// The task's own folder under the state folder.
pub(super) fn work_dir(config: &Config, item: &ItemRef) -> std::path::PathBuf {
    config.daemon.state_dir.join("work").join(item.slug())
}

pub(super) fn claim_needs(config: &Config) -> claim::Needs<'_> {
    claim::Needs {
        labels: &config.labels,
        branch_prefix: &config.delivery.branch_prefix,
        label_vouches: config.trust.label_vouches_for_issue_text,
    }
}

pub(super) fn prepare_needs<'a>(env: &'a TaskEnv, item: &ItemRef) -> prepare::Needs<'a> {
    let config = &env.config;
    prepare::Needs {
        work_dir: work_dir(config, item),
        mirrors: crate::git::mirror::Mirrors::new(
            config.daemon.state_dir.join("mirrors"),
            config.git.history_depth,
        ),
        history_depth: config.git.history_depth,
        lfs: &config.git.lfs,
        submodules: &config.git.submodules,
        author: (&config.delivery.author_name, &config.delivery.author_email),
        repositories: &config.repositories,
        images: &config.images,
        sandbox: &config.sandbox,
        planning: &config.planning,
        text_editor: &config.text_editor_mcp,
        backend: env.backend.as_ref(),
        hints: &env.sandbox_hints,
        conversation: context::Needs {
            context: &config.context,
            light_models: &config.planning.light_models,
            branch_prefix: &config.delivery.branch_prefix,
            prices: crate::llm::router::price_table(&config.llm),
            model: env.model.as_ref(),
            prompts: &env.prompts,
        },
    }
}

pub(super) fn plan_needs(env: &TaskEnv) -> plan::Needs<'_> {
    let config = &env.config;
    plan::Needs {
        planning: &config.planning,
        ideas: &config.ideas,
        context: &config.context,
        max_output_tokens: config.llm.max_output_tokens,
        prices: crate::llm::router::price_table(&config.llm),
        model: env.model.as_ref(),
        prompts: &env.prompts,
        pacer: &env.ideas_pacer,
    }
}

pub(super) fn change_needs(
    env: &TaskEnv,
    recorder: Option<Arc<dyn crate::agent::StepRecorder>>,
) -> change::Needs<'_> {
    let config = &env.config;
    change::Needs {
        agent: &config.agent,
        max_output_tokens: config.llm.max_output_tokens,
        context: &config.context,
        mcp_servers: &config.mcp_servers,
        text_editor: &config.text_editor_mcp,
        project_dir: &config.sandbox.project_dir,
        labels: &config.labels,
        poll: config.scheduling.poll_interval,
        prices: crate::llm::router::price_table(&config.llm),
        model: env.model.clone(),
        prompts: &env.prompts,
        metrics: env.metrics.clone(),
        setup: prepare::SetupRules {
            on_failure: config.repositories.on_setup_failure,
            home_dir: &config.sandbox.home_dir,
        },
        recorder,
        journal: Some(env.journal.clone()),
        checkpoints: None,
        copy_out: config.sandbox.copy_out,
        workspace_dir: &config.sandbox.workspace_dir,
    }
}

pub(super) fn verify_needs(env: &TaskEnv) -> verify::Needs<'_> {
    verify::Needs {
        fix_rounds: env.config.agent.test_fix_rounds,
        delivery: &env.config.delivery,
        prompts: &env.prompts,
    }
}

pub(super) fn ci_needs(env: &TaskEnv) -> ci::Needs<'_> {
    ci::Needs {
        ci: &env.config.delivery.ci,
        push: push_needs(&env.config),
    }
}

pub(super) fn push_needs(config: &Config) -> push::Needs<'_> {
    push::Needs {
        delivery: &config.delivery,
        workspace_dir: &config.sandbox.workspace_dir,
        copy_out: config.sandbox.copy_out,
        history_depth: config.git.history_depth,
        checkpoints: None,
    }
}
