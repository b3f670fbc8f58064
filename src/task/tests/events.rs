//! A run's reports through its real subscribers: the progress comment on
//! the forge, the task's line on the status board, the metrics.

use crate::task::report::events::TaskEvent;
use crate::task::report::progress::Step;
use crate::task::tests::World;
use std::time::Duration;

/// The history lines of a progress comment, without their `- `.
fn history(comment: &str) -> Vec<&str> {
    let (_, history) = comment.split_once("<summary>History</summary>").unwrap();
    history.lines().filter_map(|l| l.strip_prefix("- ")).collect()
}

#[tokio::test]
async fn the_board_shows_the_comments_last_line_and_the_metrics_time_each_step() {
    let world = World::new(&[("greet.txt", "hi\n")], Vec::new());
    let item = world.issue();
    let mut run = world.run(&item);
    world.env.journal.begin(&run.key).unwrap();
    run.emit(TaskEvent::Began);
    assert_eq!(world.env.board.snapshot()[0].status, "Claiming");
    run.show_web_url("https://forge.example/acme/app/issues/7");
    run.ensure_comment().await.unwrap();
    run.at(Step::Claim, "Claimed");
    run.at(Step::Prepare, "Preparing the workspace");
    let second = run.attempt("Attempt 2/2".into());
    second.note("done; tests passed");
    second.report().await;

    let comment = world.forge.progress_comment(&item).unwrap();
    let lines = history(&comment);
    let last = *lines.last().unwrap();
    assert!(last.ends_with(" Attempt 2/2: done; tests passed"), "{comment}");
    assert!(
        lines[lines.len() - 2].ends_with(" Preparing the workspace"),
        "{comment}"
    );
    let line = world.env.board.snapshot().remove(0);
    assert_eq!(line.status, last, "the board's line is the comment's last");
    assert_eq!(line.web_url, "https://forge.example/acme/app/issues/7");
    assert!(
        comment.contains("- [x] Claim the task\n- [ ] Prepare the workspace"),
        "{comment}"
    );

    let metrics = world.env.metrics.encode();
    assert!(
        metrics.contains("forgehand_tasks_started_total{forge=\"github\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("forgehand_phase_duration_seconds_count{phase=\"claim\"} 1"),
        "{metrics}"
    );
    assert!(!metrics.contains("phase=\"prepare\""), "not ended yet: {metrics}");
    run.finish(false, "Failed", "**Failed.**".into());
    run.emit(TaskEvent::Ended {
        outcome: "failed",
        detail: "a test".into(),
        took: Duration::from_secs(3),
    });
    let metrics = world.env.metrics.encode();
    assert!(
        metrics.contains("forgehand_phase_duration_seconds_count{phase=\"prepare\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("forgehand_tasks_ended_total{outcome=\"failed\"} 1"),
        "{metrics}"
    );
    assert!(
        world.env.board.snapshot().is_empty(),
        "the line goes when the task ends"
    );
}

#[tokio::test]
async fn a_comment_the_forge_lost_is_only_logged_and_the_board_follows() {
    let world = World::new(&[("greet.txt", "hi\n")], Vec::new());
    let item = world.issue();
    let mut run = world.run(&item);
    world.env.journal.begin(&run.key).unwrap();
    run.emit(TaskEvent::Began);
    // A comment the forge does not have (deleted by someone meanwhile).
    run.use_comment(404).unwrap();
    run.status_now("Testing the change: `make test`");
    run.report().await;
    let status = world.env.board.snapshot().remove(0).status;
    assert!(status.ends_with(" Testing the change: `make test`"), "{status}");
    assert!(world.forge.progress_comment(&item).is_none());
}
