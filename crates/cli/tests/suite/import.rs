//! `baton export --format archive` and `baton import`: a routed run started on SQLite
//! moves to PostgreSQL byte for byte, is continued there, and comes back; an archive
//! that cannot be imported is refused and writes nothing.
//!
//! PostgreSQL is the server of `BATON_TEST_POSTGRES` (see `postgres.rs`); each test has
//! schemas of its own, dropped when it ends.

use super::postgres::{Schema, baton_on, ok_on, raw_client};
use super::seats::routed_roster;
use super::*;

/// A routed run of two steps (pools, pins) on the SQLite file of `d`, stopped after
/// its first turn; returns its id.
fn routed_run_on_sqlite(d: &Path) -> String {
    std::fs::write(d.join("baton.toml"), routed_roster!()).unwrap();
    run_ok(
        d,
        &[
            "run",
            "--objective",
            "Move a run \"between\" databases: ünïcode\tand all",
            "--task",
            "draft",
            "--task",
            "review",
            "--step-seat",
            "build.step",
            "--step-seat",
            "review.code",
            "--max-turns",
            "1",
        ],
    );
    let json: serde_json::Value = serde_json::from_str(&run_ok(d, &["state", "--json"])).unwrap();
    json["run_id"].as_str().unwrap().to_string()
}

/// `baton` on database `db` (a path or a URL), which must succeed; its stdout.
fn on(d: &Path, db: &str, args: &[&str]) -> String {
    ok_on(d, db, args)
}

/// Every export of `run` from `db` a reader compares: the archive and the reports.
fn exports(d: &Path, db: &str, run: &str) -> Vec<(String, String)> {
    ["archive", "json", "md", "events-jsonl", "events", "script"]
        .into_iter()
        .map(|format| {
            (
                format.to_string(),
                on(d, db, &["export", run, "--format", format]),
            )
        })
        .collect()
}

#[test]
fn a_run_moves_from_sqlite_to_postgres_and_back_byte_for_byte_and_continues_there() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sqlite = db(d).display().to_string();
    let run = routed_run_on_sqlite(d);
    let pg = Schema::new("import");
    let url = pg.url();

    // SQLite → PostgreSQL.
    let archive = d.join("run.archive");
    on(
        d,
        &sqlite,
        &[
            "export",
            &run,
            "--format",
            "archive",
            "--out",
            archive.to_str().unwrap(),
        ],
    );
    let written = std::fs::read_to_string(&archive).unwrap();
    assert!(
        written.starts_with("{\"format\":\"baton-archive/1\""),
        "{written}"
    );
    assert!(written.contains("\"pins\":[\n{"), "a routed run has pins");
    assert!(written.contains("\"pool_calls\":[\n{"), "and pool calls");
    let said = on(d, &url, &["import", archive.to_str().unwrap()]);
    assert!(
        said.contains(&format!("imported run {run} into {url} (active, 1 turn, "))
            && said.contains(&format!("continue it with `baton resume {run}`")),
        "{said}"
    );
    let there = exports(d, &url, &run);
    for ((format, here), (_, then)) in exports(d, &sqlite, &run).iter().zip(&there) {
        assert!(
            here == then,
            "--format {format} differs:\n{here}\n---\n{then}"
        );
    }
    assert_eq!(there[0].1, written);

    // Again: nothing to do, and said so.
    let again = on(d, &url, &["import", archive.to_str().unwrap()]);
    assert!(
        again.contains("is already in") && again.contains("nothing was written"),
        "{again}"
    );

    // Continued on PostgreSQL to its end: the review seat, from the other pool.
    let out = baton_on(d, &url).args(["resume", &run]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(on(d, &url, &["state", &run]).contains("finished"));
    let history = on(d, &url, &["history", &run]);
    assert!(
        history.contains("seat review.code: seated at phase start, pool b"),
        "{history}"
    );
    let seats = on(d, &url, &["seats", &run]);
    assert!(seats.contains("review.code: w2"), "{seats}");

    // The old archive is refused there now, and nothing of it is written.
    let before = on(d, &url, &["export", &run, "--format", "archive"]);
    let out = baton_on(d, &url)
        .args(["import", archive.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("run {run} is already in this database, and not as the archive has it: this database has it finished, 2 turns"))
            && err.contains("the archive active, 1 turn,")
            && err.contains("never overwritten"),
        "{err}"
    );
    assert_eq!(
        on(d, &url, &["export", &run, "--format", "archive"]),
        before
    );

    // PostgreSQL → a new SQLite file, through a pipe.
    let back = d.join("back.db").display().to_string();
    let mut import = baton_on(d, &back)
        .args(["import", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    import
        .stdin
        .take()
        .unwrap()
        .write_all(before.as_bytes())
        .unwrap();
    let out = import.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("finished, 2 turns"),
        "{}",
        text(&out)
    );
    for ((format, here), (_, then)) in exports(d, &url, &run).iter().zip(exports(d, &back, &run)) {
        assert!(
            *here == then,
            "--format {format} differs:\n{here}\n---\n{then}"
        );
    }
    for command in ["state", "history", "seats", "tasks"] {
        assert_eq!(
            on(d, &back, &[command, &run]),
            on(d, &url, &[command, &run])
        );
    }
}

#[test]
fn an_archive_cut_short_changed_or_of_another_version_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sqlite = db(d).display().to_string();
    let run = routed_run_on_sqlite(d);
    let archive_text = on(d, &sqlite, &["export", &run, "--format", "archive"]);
    let pg = Schema::new("refuse");
    let target = d.join("target.db");
    let json_report = on(d, &sqlite, &["export", &run, "--format", "json"]);
    let cases = [
        (
            archive_text[..archive_text.len() / 2].to_string(),
            "the file was cut short",
        ),
        (
            archive_text.replacen("draft", "DRAFT", 1),
            "it was changed or damaged after the export",
        ),
        (
            archive_text.replacen("baton-archive/1", "baton-archive/9", 1),
            "the archive is baton-archive/9, and this baton reads baton-archive/1 only",
        ),
        (json_report, "export the run with `--format archive`"),
    ];
    for (bad, says) in cases {
        let file = d.join("bad.archive");
        std::fs::write(&file, &bad).unwrap();
        for db in [target.display().to_string(), pg.url()] {
            let out = baton_on(d, &db)
                .args(["import", file.to_str().unwrap()])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(1), "{}", text(&out));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(says) && err.contains("Nothing was written")
                    || err.contains(says) && err.contains("nothing was written"),
                "{db}: {err}"
            );
        }
    }
    // Nothing: not even the database.
    assert!(!target.exists());
    let schemas = raw_client()
        .query(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = $1",
            &[&pg.name],
        )
        .unwrap();
    assert!(schemas.is_empty(), "the schema was created");
}
