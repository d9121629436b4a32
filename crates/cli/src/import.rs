//! `baton import`: a run's archive (`baton export RUN --format archive`) written into the
//! database, so a run moves between SQLite and PostgreSQL (a laptop's run handed to the
//! fleet, or brought back).

use std::io::Read as _;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use baton_store::{Imported, RunArchive};

use crate::commands::Context_;

pub(crate) fn import(ctx: &Context_, file: &Path) -> Result<ExitCode> {
    let bytes = if file == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading the archive from standard input")?;
        bytes
    } else {
        std::fs::read(file).with_context(|| format!("reading the archive {}", file.display()))?
    };
    // Read and checked whole before the database is opened: an archive that cannot be
    // imported creates nothing, not even the database.
    let archive = RunArchive::from_slice(&bytes)?;
    let store = ctx.store()?;
    let db = ctx.location();
    let run = archive.run_id();
    match store.import_run(&archive)? {
        Imported::AlreadyPresent => {
            println!(
                "run {run} is already in {db}, exactly as the archive has it; nothing was written"
            );
        }
        Imported::Written => {
            println!("imported run {run} into {db} ({})", archive.summary());
            match &archive.job {
                Some(job) => println!(
                    "it is the run of job {} ({}), which came with it (`baton jobs`); `baton work` continues it where the job's repository and worktree are",
                    job.id, job.status
                ),
                None if archive.run.status == "active" => {
                    println!("continue it with `baton resume {run}`")
                }
                None => println!("`baton state {run}` shows it"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
