//! A run that ended in an error, settled: each kind of error gets its one
//! ending on the forge and in the journal, and the scheduler's next step.

use crate::forge::{ForgeError, ItemRef};
use crate::journal::Phase;
use crate::task::report::ending::settle;
use crate::task::state::error::TaskError;
use crate::task::tests::{World, MAINTAINER};
use crate::task::{Action, TaskEnd};

fn issue(world: &World, number: u64) -> ItemRef {
    let trigger = world.env.config.labels.trigger.clone();
    world
        .forge
        .open_issue(number, MAINTAINER, "Greet", "Say hello.", &[trigger.as_str()])
}

/// `item`'s run, claimed, settled after `err`.
async fn settled(world: &World, item: &ItemRef, err: TaskError) -> TaskEnd {
    let mut run = world.run(item);
    world.claimed(&mut run).await;
    settle(&mut run, &world.env, &err).await
}

#[tokio::test]
async fn a_failure_is_labelled_advised_and_journalled_as_the_end() {
    let world = World::new(&[("greet.txt", "hi\n")], Vec::new());
    let item = issue(&world, 1);
    let end = settled(&world, &item, TaskError::Other("the model gave up".into())).await;
    assert_eq!(
        end,
        TaskEnd::Failed {
            reason: "the model gave up".into()
        }
    );
    assert_eq!(end.action(), Action::Done);
    let labels = &world.env.config.labels;
    let now = world.forge.labels(&item);
    assert!(
        now.contains(&labels.failed) && !now.contains(&labels.processing),
        "{now:?}"
    );
    let comment = world.forge.progress_comment(&item).unwrap();
    assert!(
        comment.contains("**Failed.** the model gave up") && comment.contains("What you can do"),
        "{comment}"
    );
    assert_eq!(world.record(&item.key()).phase, Phase::Failed);
}

#[tokio::test]
async fn an_outage_defers_the_task_and_gives_its_attempt_back() {
    let world = World::new(&[("greet.txt", "hi\n")], Vec::new());
    let item = issue(&world, 2);
    let busy = ForgeError::Api {
        forge: "github",
        what: "a comment".into(),
        status: 503,
        message: "busy".into(),
    };
    let end = settled(&world, &item, TaskError::Forge(busy)).await;
    assert!(matches!(end, TaskEnd::Deferred { .. }), "{end:?}");
    assert!(matches!(end.action(), Action::RequeueAfter(..)));
    let record = world.record(&item.key());
    assert!(!record.phase.is_final(), "{:?}", record.phase);
    assert_eq!(record.attempts, 0, "the attempt is given back");
    let comment = world.forge.progress_comment(&item).unwrap();
    assert!(comment.contains("Waiting:"), "{comment}");
    let labels = &world.env.config.labels;
    assert!(!world.forge.labels(&item).contains(&labels.failed));
}

#[tokio::test]
async fn a_stop_a_shutdown_and_a_lost_claim_end_without_a_failure() {
    let world = World::new(&[("greet.txt", "hi\n")], Vec::new());
    let stopped = issue(&world, 3);
    let end = settled(
        &world,
        &stopped,
        TaskError::Stopped("paused by a maintainer".into()),
    )
    .await;
    assert_eq!((end.clone(), end.action()), (TaskEnd::Stopped, Action::Done));
    assert_eq!(world.record(&stopped.key()).phase, Phase::Stopped);

    let shut = issue(&world, 4);
    let end = settled(&world, &shut, TaskError::Shutdown).await;
    assert_eq!(
        (end.clone(), end.action()),
        (TaskEnd::Interrupted, Action::Suspended)
    );
    assert!(!world.record(&shut.key()).phase.is_final());
    let comment = world.forge.progress_comment(&shut).unwrap();
    assert!(comment.contains("Paused:"), "{comment}");

    let lost = issue(&world, 5);
    let fenced = ForgeError::Fenced {
        forge: "github",
        message: "another replica holds the task".into(),
    };
    let end = settled(&world, &lost, TaskError::Forge(fenced)).await;
    assert_eq!(end, TaskEnd::Interrupted);
    assert!(!world.record(&lost.key()).phase.is_final());
    let comment = world.forge.progress_comment(&lost).unwrap();
    assert!(!comment.contains("Paused:"), "nothing more is written: {comment}");
    let labels = &world.env.config.labels;
    for item in [&stopped, &shut, &lost] {
        assert!(!world.forge.labels(item).contains(&labels.failed));
    }
}
