//! The journal's tables. Each is created if missing, so a newer daemon
//! opens an older journal; a table is never changed in place.

use rusqlite::Connection;

/// Opens the database at `path` for one writer with concurrent readers.
pub(super) fn connect(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let db = Connection::open(path)?;
    db.busy_timeout(std::time::Duration::from_secs(5))?;
    db.pragma_update(None, "journal_mode", "WAL")?;
    // WAL with NORMAL survives a killed process; only a power cut can lose the last commit.
    db.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(db)
}

/// Creates the tables that are missing.
pub(super) fn create_tables(db: &Connection) -> rusqlite::Result<()> {
    db.execute_batch(TABLES)?;
    super::Journal::create_waits(db)?;
    super::Journal::create_check_wait_conversations(db)?;
    super::Journal::create_phase_records(db)?;
    super::Journal::create_automation_runs(db)?;
    super::checkpoints::adopt_agent_checkpoints(db)
}

const TABLES: &str = "CREATE TABLE IF NOT EXISTS tasks (
        key TEXT PRIMARY KEY,
        phase TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        branch TEXT,
        comment_id INTEGER,
        container_id TEXT,
        change_url TEXT,
        outcome TEXT,
        updated_at INTEGER NOT NULL
    );
    -- Finished model calls of a task's planning, so a restart
    -- replays them instead of paying again.
    CREATE TABLE IF NOT EXISTS plan_calls (
        task_key TEXT NOT NULL,
        call_key TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (task_key, call_key)
    );
    -- The context stores (one per conversation: an issue and the
    -- PR/MR opened for it share one). Kept after the task ends, so
    -- a follow-up continues it; pruned when unused for long.
    CREATE TABLE IF NOT EXISTS context_messages (
        store TEXT NOT NULL,
        seq INTEGER NOT NULL,
        record TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (store, seq)
    );
    -- Versions of context messages that were edited or deleted on
    -- the thread: kept for audit, never sent to a model again.
    CREATE TABLE IF NOT EXISTS context_history (
        store TEXT NOT NULL,
        seq INTEGER NOT NULL,
        record TEXT NOT NULL,
        why TEXT NOT NULL,
        retired_at INTEGER NOT NULL
    );
    -- Comments that mention forgehand or review its change, each
    -- heard once; one that starts a task stays pending until its
    -- task begins, so a restart in between loses nothing.
    CREATE TABLE IF NOT EXISTS heard_comments (
        forge TEXT NOT NULL,
        comment TEXT NOT NULL,
        task_key TEXT,
        pending INTEGER NOT NULL,
        heard_at INTEGER NOT NULL,
        -- Milliseconds since the epoch before which its task waits
        -- (a review's quiet period); 0 for at once.
        not_before_ms INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (forge, comment)
    );
    -- What the models cost, per UTC day, repository and model.
    CREATE TABLE IF NOT EXISTS spend (
        day TEXT NOT NULL,
        repo TEXT NOT NULL,
        model TEXT NOT NULL,
        usd REAL NOT NULL,
        PRIMARY KEY (day, repo, model)
    );
    -- Each run of a task, and its transcript's entries (JSON).
    CREATE TABLE IF NOT EXISTS runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        task_key TEXT NOT NULL,
        started_at INTEGER NOT NULL,
        ended_at INTEGER,
        outcome TEXT
    );
    CREATE TABLE IF NOT EXISTS transcript (
        run INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        at_ms INTEGER NOT NULL,
        entry TEXT NOT NULL,
        PRIMARY KEY (run, seq)
    );
    -- What forgehand learned of a repository from the forge's answers
    -- (drafts not supported, workflow files refused), so it does not
    -- ask again.
    CREATE TABLE IF NOT EXISTS repo_facts (
        forge TEXT NOT NULL,
        repo TEXT NOT NULL,
        fact TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (forge, repo, fact)
    );
    -- Where each repository's next listing of comments starts.
    CREATE TABLE IF NOT EXISTS comment_cursors (
        forge TEXT NOT NULL,
        repo TEXT NOT NULL,
        since TEXT NOT NULL,
        PRIMARY KEY (forge, repo)
    );";
