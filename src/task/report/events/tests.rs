//! The sink on its own: what reaches the subscribers, in which order, with
//! which label, and what a failing flush does to the others.

use crate::task::report::events::*;
use std::sync::Mutex;

/// A subscriber that writes what it is told into a log shared with the
/// others, and fails its flushes when told to.
struct Recorder {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    fails: bool,
}

impl Recorder {
    fn shared(name: &'static str, log: &Arc<Mutex<Vec<String>>>, fails: bool) -> Arc<dyn Subscriber> {
        Arc::new(Recorder {
            name,
            log: log.clone(),
            fails,
        })
    }
}

#[async_trait]
impl Subscriber for Recorder {
    fn on(&self, event: &TaskEvent, _at: SystemTime) {
        let said = match event {
            TaskEvent::Step { text, .. } => format!("step {text}"),
            TaskEvent::Status(text) => format!("status {text}"),
            TaskEvent::Note { line, transcript } => format!("note {line} / {transcript:?}"),
            TaskEvent::Finished { phase, outcome, .. } => format!("finished {phase}: {outcome}"),
            other => format!("{other:?}"),
        };
        self.log.lock().unwrap().push(format!("{}: {said}", self.name));
    }

    async fn flush(&self, why: Flush) -> Result<(), FlushError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}: flush {why:?}", self.name));
        if self.fails {
            return Err(FlushError::Comment(ForgeError::Network {
                forge: "github",
                what: "the comment".into(),
                message: "connection reset".into(),
            }));
        }
        Ok(())
    }
}

fn taken(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[tokio::test]
async fn every_event_reaches_every_subscriber_in_the_order_given() {
    let log = Arc::default();
    let sink = EventSink::new(
        "github:acme/app#1",
        vec![
            Recorder::shared("a", &log, false),
            Recorder::shared("b", &log, false),
        ],
    );
    sink.emit(TaskEvent::Step {
        step: Step::Plan,
        text: "Planning".into(),
    });
    sink.emit(TaskEvent::Status("Testing".into()));
    sink.flush(Flush::Report).await;
    assert_eq!(
        taken(&log),
        [
            "a: step Planning",
            "b: step Planning",
            "a: status Testing",
            "b: status Testing",
            "a: flush Report",
            "b: flush Report",
        ]
    );
}

/// The log lines written while `run` runs on this thread.
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_failing_flush_is_logged_and_the_others_are_flushed_all_the_same() {
    let written = Arc::new(Mutex::new(Vec::new()));
    let into = written.clone();
    let logger = tracing_subscriber::fmt()
        .with_writer(move || Captured(into.clone()))
        .with_ansi(false)
        .finish();
    let _logging = tracing::subscriber::set_default(logger);
    let log = Arc::default();
    let sink = EventSink::new(
        "github:acme/app#1",
        vec![
            Recorder::shared("first", &log, true),
            Recorder::shared("second", &log, false),
        ],
    );
    sink.flush(Flush::Live).await;
    assert_eq!(taken(&log), ["first: flush Live", "second: flush Live"]);
    let logged = String::from_utf8(written.lock().unwrap().clone()).unwrap();
    assert!(logged.contains("WARN"), "{logged}");
    assert!(
        logged.contains(
            "cannot update the progress comment: github: cannot reach the comment: connection reset"
        ),
        "{logged}"
    );
    assert!(logged.contains("github:acme/app#1"), "{logged}");
}

#[tokio::test]
async fn an_attempts_lines_carry_its_label_and_the_task_keeps_its_own() {
    let log = Arc::default();
    let task = EventSink::new("github:acme/app#1", vec![Recorder::shared("a", &log, false)]);
    let second = task.labelled(Some("Attempt 2/3".into()));
    second.emit(TaskEvent::Step {
        step: Step::Change,
        text: "Working".into(),
    });
    second.emit(TaskEvent::Status("Testing the change".into()));
    second.emit(TaskEvent::Note {
        line: "done; tests passed".into(),
        transcript: Some("Attempt 2: tests passed".into()),
    });
    second.emit(TaskEvent::Finished {
        all_done: false,
        phase: "Failed".into(),
        outcome: "**Failed.**".into(),
    });
    task.emit(TaskEvent::Note {
        line: "Best of 3: the judge chose attempt 2".into(),
        transcript: None,
    });
    second.labelled(None).emit(TaskEvent::Status("Paused".into()));
    assert_eq!(
        taken(&log),
        [
            "a: step Attempt 2/3: Working",
            "a: status Attempt 2/3: Testing the change",
            "a: note Attempt 2/3: done; tests passed / Some(\"Attempt 2: tests passed\")",
            "a: finished Failed: **Failed.**",
            "a: note Best of 3: the judge chose attempt 2 / None",
            "a: status Paused",
        ]
    );
}
