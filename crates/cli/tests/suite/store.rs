//! The database as a user meets it: where it is, who may write it, what happens when
//! it cannot be written.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;

use super::*;

/// Commands that only read, each with the arguments it needs on the demo's database.
const READERS: &[&[&str]] = &[
    &["runs"],
    &["state"],
    &["history"],
    &["handoffs"],
    &["tasks"],
    &["workers"],
    &["compile"],
    &["export"],
    &["jobs"],
    &["outbox"],
];

/// Regression (issue 7, item 9): on a read-only file system even `state`, `history`
/// and `export` failed with "unable to open database file", because opening always
/// switched to WAL and migrated.
///
/// How the test proves the database really is read-only: permission bits stop no
/// write by root, so when the tests run as root the commands run as the unprivileged
/// uid 65534 (nobody), for whom the directory (0555) and the file (0444) are
/// read-only; as any other user the bits alone do it. The test first checks that a
/// writing command in the very same setup is refused, and that the file's bytes never
/// change.
#[test]
fn read_commands_work_on_a_database_nobody_may_write() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    run_ok(d, &["demo"]);
    let db = db(d);
    // Twice: a database closed cleanly (no -wal/-shm beside it: SQLite cannot create
    // its -shm here), then with the -wal/-shm a reader left behind.
    for leftovers in [false, true] {
        if leftovers {
            run_ok(d, &["runs"]);
            assert!(d.join(".baton/baton.db-shm").exists());
        } else {
            assert!(!d.join(".baton/baton.db-shm").exists());
        }
        let before = std::fs::read(&db).unwrap();
        set_mode(d, 0o555);
        set_mode(&d.join(".baton"), 0o555);
        for entry in std::fs::read_dir(d.join(".baton")).unwrap() {
            set_mode(&entry.unwrap().path(), 0o444);
        }

        let out = unprivileged(d)
            .args(["run", "--objective", "o", "--task", "t", "--create-only"])
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "the write went through:\n{}",
            text(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cannot be written"), "{err}");
        assert!(err.contains("commands that only read"), "{err}");
        // A new database where its directory cannot be created: the same, said once.
        let out = unprivileged(d)
            .args(["--db", "elsewhere/baton.db", "demo"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.matches("cannot be written").count() == 1,
            "{}",
            text(&out)
        );
        assert!(!d.join("elsewhere").exists());

        for args in READERS {
            let out = unprivileged(d).args(*args).output().unwrap();
            assert!(
                out.status.success(),
                "baton {args:?} (leftovers: {leftovers}):\n{}",
                text(&out)
            );
        }
        let state = unprivileged(d).args(["state", "--json"]).output().unwrap();
        let state: serde_json::Value = serde_json::from_slice(&state.stdout).unwrap();
        assert_eq!(state["plan"].as_array().unwrap().len(), 5);
        assert_eq!(std::fs::read(&db).unwrap(), before);

        set_mode(d, 0o755);
        set_mode(&d.join(".baton"), 0o755);
        for entry in std::fs::read_dir(d.join(".baton")).unwrap() {
            set_mode(&entry.unwrap().path(), 0o644);
        }
    }
}

/// `baton` as a user who cannot write what root owns (see the test above).
fn unprivileged(dir: &Path) -> std::process::Command {
    let mut cmd = baton(dir);
    let probe = tempfile::NamedTempFile::new().unwrap();
    if probe.as_file().metadata().unwrap().uid() == 0 {
        cmd.uid(65534).gid(65534).env("HOME", "/");
    }
    cmd
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Regression (issue 7, item 16): `runs` and `state` in an empty directory created
/// `.baton/baton.db`. A read on a missing database says so, and creates nothing; so
/// do `step`, `resume` and `judge`, which have nothing to work on without one.
#[test]
fn read_commands_on_a_missing_database_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for args in READERS.iter().filter(|a| a[0] != "workers") {
        let err = run_err(d, args);
        assert!(
            err.contains("there is no baton database at .baton/baton.db yet")
                && err.contains("baton demo"),
            "{args:?}: {err}"
        );
    }
    // Commands that advance or judge what is there have nothing to do either.
    for args in [&["step"][..], &["resume"], &["judge", "g1"]] {
        let err = run_err(d, args);
        assert!(
            err.contains("there is no baton database at .baton/baton.db yet"),
            "{args:?}: {err}"
        );
    }
    // The roster needs no database: shown, still without creating one.
    let workers = run_ok(d, &["workers"]);
    assert!(workers.contains("5 offline mock workers"), "{workers}");
    let err = run_err(d, &["workers", "abc"]);
    assert!(err.contains("no baton database"), "{err}");
    assert_eq!(std::fs::read_dir(d).unwrap().count(), 0);
}

/// Regression (issue 7, item 16): `baton --db app.db runs` wrote baton's tables and
/// triggers into another application's SQLite file.
#[test]
fn another_applications_database_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let app = d.join("app.db");
    let conn = rusqlite::Connection::open(&app).unwrap();
    conn.execute_batch("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total INTEGER); INSERT INTO invoices(total) VALUES (42);")
        .unwrap();
    drop(conn);
    let before = std::fs::read(&app).unwrap();
    for args in [
        &["--db", "app.db", "runs"][..],
        &["--db", "app.db", "state"],
        &["--db", "app.db", "demo"],
        &["--db", "app.db", "run", "--objective", "o", "--task", "t"],
    ] {
        let err = run_err(d, args);
        assert!(
            err.contains("app.db is not a baton database")
                && err.contains("tables baton did not create: invoices"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read(&app).unwrap(), before);
    let files: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, ["app.db"]);
}

/// Regression (issue 7, item 19): `BATON_DB=postgres://…/test baton demo` succeeded
/// by creating an SQLite file named `postgres:/postgres@127.0.0.1:5432/test`. PostgreSQL
/// is a backend now (see the `postgres` suite); a server baton has none for is refused.
#[test]
fn a_database_url_baton_cannot_open_is_refused_and_sqlite_urls_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = baton(d)
        .arg("demo")
        .env("BATON_DB", "mysql://root@127.0.0.1:3306/test")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the mysql:// scheme is not supported")
            && err.contains("sqlite://PATH")
            && err.contains("postgres://"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(d).unwrap().count(), 0, "created a file");

    run_ok(d, &["--db", "sqlite://data/runs.db", "demo"]);
    assert!(d.join("data/runs.db").exists());
    let runs = run_ok(d, &["--db", "file:data/runs.db", "runs"]);
    assert!(runs.contains("finished"), "{runs}");
    let absolute = format!("sqlite://{}", d.join("data/runs.db").display());
    let runs = run_ok(d, &["--db", &absolute, "runs"]);
    assert!(runs.contains("finished"), "{runs}");
}

/// Regression (issue 7, item 9): a full disk printed SQLite's "database or disk is
/// full" three times and never said what to do. A 200 KiB tmpfs fills for real; it
/// needs `mount` (root), so elsewhere the store's own test (`max_page_count`) stands in.
#[test]
fn a_full_disk_is_reported_once_with_what_to_do_next() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=200k", "tmpfs"])
        .arg(d)
        .output()
        .is_ok_and(|o| o.status.success());
    if !mounted {
        eprintln!("skipped: cannot mount a tmpfs here (not root?)");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(d);
    // Three 100 KiB tasks: more than the disk holds, each under the argument limit.
    let task = "x".repeat(100 * 1024);
    let out = baton(d)
        .args(["run", "--objective", "o", "--create-only"])
        .args(["--task", &task, "--task", &task, "--task", &task])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("full").count(), 1, "{err}");
    assert!(
        err.contains("the disk holding the database .baton/baton.db is full")
            && err.contains("Free space on that disk"),
        "{err}"
    );
}

/// A database written by an older baton is upgraded once by a reading command (the
/// one write a read makes), and read.
#[test]
fn a_reading_command_upgrades_a_database_from_an_older_baton_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    run_ok(d, &["demo"]);
    // Back to schema 3: runs had no lease columns before migration 4, there were no
    // provider holds before migration 5, no cancel requests before 6, events had no
    // per-run number before 7, no delete triggers before 8, no judgement history before 9,
    // no pool usage or benches before 10, and an index on (run_id, seq) until 11, no pins before 12,
    // no spend outside committed turns before 13, no pin exclusions before 14 (the pins
    // table is dropped whole), no reservations of headroom before 16.
    let conn = rusqlite::Connection::open(db(d)).unwrap();
    conn.execute_batch(
        "ALTER TABLE runs DROP COLUMN lease_token; ALTER TABLE runs DROP COLUMN lease_owner;
         ALTER TABLE runs DROP COLUMN lease_expires_at; DROP TABLE worker_holds;
         DROP TABLE cancel_requests;
         DROP INDEX events_by_run_seq; ALTER TABLE events DROP COLUMN run_seq;
         DROP TRIGGER turns_never_vanish; DROP TRIGGER record_changes_never_change;
         DROP TRIGGER record_changes_never_vanish; DROP TRIGGER call_outputs_never_change;
         DROP TRIGGER call_outputs_never_vanish; DROP TRIGGER runs_never_vanish;
         DROP TABLE judgements;
         DROP TABLE pool_calls; DROP TABLE pool_usage; DROP TABLE benches; DROP TABLE pins;
         DROP TABLE pool_spend; DROP TABLE pool_reservations;
         CREATE INDEX events_by_run ON events(run_id, seq);
         PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(conn);
    let out = baton(d).arg("runs").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("from schema version 3 to 16"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("finished"));
    // The old events were numbered in the order they were written, from 1.
    let jsonl = run_ok(d, &["export", "--format", "events-jsonl"]);
    let seqs: Vec<u64> = jsonl
        .lines()
        .map(|l| {
            serde_json::from_str::<baton_protocol::Envelope>(l)
                .unwrap()
                .seq
                .unwrap()
        })
        .collect();
    assert!(seqs.len() > 20);
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let out = baton(d).arg("runs").output().unwrap();
    assert!(out.stderr.is_empty(), "{}", text(&out));
}
