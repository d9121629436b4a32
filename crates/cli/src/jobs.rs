//! Job commands: enqueue, work, jobs, outbox, judge, gc.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use baton_engine::config::Roster;
use baton_engine::jobs::runner::{Progress, WorkOptions};
use baton_engine::jobs::{self as engine_jobs, JobSpec, decode_outbox};
use baton_engine::ops::{self, OpOutcome, Started};
use baton_engine::{Clock, SystemClock};
use baton_protocol::Op;
use baton_store::{JobInfo, JobStatus};
use clap::Args;

use crate::BudgetArgs;
use crate::commands::Context_;

#[derive(Args, Debug)]
pub struct EnqueueArgs {
    #[command(flatten)]
    text: crate::input::WorkText,
    /// A gate: `name=command` or just `command` (repeat); runs in the worktree at the end
    #[arg(long = "gate")]
    gates: Vec<String>,
    /// Also run the gates after every turn
    #[arg(long)]
    gate_each_turn: bool,
    /// Turns given to fixing gates that still fail when the tasks are done (each runs
    /// the gates again); 0 ends the job with its gates failing
    #[arg(long, default_value_t = baton_engine::jobs::DEFAULT_FIX_TURNS)]
    fix_turns: u32,
    // The help names the gateway's presets: only the gateway knows the agents (so a
    // preset added there is offered here without a second list to keep in step).
    #[arg(long = "worker", required = true, help = worker_help())]
    workers: Vec<String>,
    /// Confine every command worker of these jobs: `bwrap` (bubblewrap: the worktree
    /// writable, the rest read-only, the checkout and baton's database hidden) or
    /// `none`; a worker's own `options.sandbox` wins
    #[arg(long, value_enum)]
    sandbox: Option<Sandbox>,
    /// The repository [default: the current directory]
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// The branch, tag or commit the jobs start from [default: HEAD]
    #[arg(long)]
    base: Option<String>,
    /// Where the worktrees go [default: <repo>/.baton/worktrees]
    #[arg(long)]
    worktrees: Option<PathBuf>,
    /// What the judge scores candidates against (fixed now, for every candidate)
    #[arg(long)]
    rubric: Option<String>,
    /// Each step's budget, seat, tags and scope, as `baton run` takes them
    #[command(flatten)]
    steps: crate::input::StepArgs,
    #[command(flatten)]
    budget: BudgetArgs,
}

fn worker_help() -> String {
    format!(
        "A candidate: a roster worker id, or `a+b` for a team taking turns (repeat: one job \
         per candidate, judged blind against each other). A preset name ({}) works without \
         a roster entry",
        baton_gateway::command::preset_names()
    )
}

/// How `--sandbox` confines command workers (the values of `options.sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sandbox {
    /// bubblewrap
    Bwrap,
    /// no confinement
    #[value(name = "none")]
    Unconfined,
}

impl From<Sandbox> for baton_protocol::Sandbox {
    fn from(s: Sandbox) -> Self {
        match s {
            Sandbox::Bwrap => baton_protocol::Sandbox::Bwrap,
            Sandbox::Unconfined => baton_protocol::Sandbox::None,
        }
    }
}

/// The command workers of `roster` that run unconfined, when baton runs as root: such
/// an agent can change the whole machine (aider once installed system packages).
fn unconfined_as_root(roster: &Roster) -> Vec<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Vec::new();
    }
    roster
        .workers
        .iter()
        .filter(|w| w.model.starts_with("command/"))
        .filter(|w| w.options.get("sandbox").and_then(|v| v.as_str()) != Some("bwrap"))
        .map(|w| w.id.to_string())
        .collect()
}

fn warn_root(agents: &[String], when: &str) {
    if agents.is_empty() {
        return;
    }
    eprintln!(
        "WARNING: baton runs as root, so {when} the coding agent(s) {} run as root with no sandbox: \
         anything they or the model decide to run can change the whole machine (install packages, \
         edit system files). Confine them with `baton enqueue --sandbox bwrap` (or options.sandbox = \
         \"bwrap\" in baton.toml; needs bubblewrap), or run baton as an ordinary user.",
        agents.join(", ")
    );
}

pub fn enqueue(ctx: &Context_, args: EnqueueArgs) -> Result<ExitCode> {
    // Check the repository before anything is created on disk (the database included).
    baton_workspace::Repo::open(&args.repo)?;
    let (objective, tasks) = args.text.read()?;
    let steps = args.steps.read(tasks.len())?;
    let op = Op::Enqueue {
        objective,
        tasks,
        candidates: args.workers,
        gates: args.gates,
        gate_each_turn: args.gate_each_turn,
        fix_turns: Some(args.fix_turns),
        sandbox: args.sandbox.map(Into::into),
        repo: Some(args.repo),
        base: args.base,
        worktrees: args.worktrees,
        rubric: args.rubric,
        step_budgets: steps.budgets,
        step_seats: steps.seats,
        step_tags: steps.tags,
        step_scopes: steps.scopes,
        roster: None,
        settings: args.budget.settings(),
    };
    let store = ctx.store()?;
    let engine = baton_engine::Engine::new(store);
    let (queued, candidates) = match ops::apply(&engine, &ctx.op_context(), op, &mut |_| {})? {
        OpOutcome::Enqueued { queued, candidates } => (queued, candidates),
        other => return Err(unexpected(&other)),
    };
    let mut unconfined: Vec<String> = Vec::new();
    for roster in &candidates {
        for id in unconfined_as_root(roster) {
            if !unconfined.contains(&id) {
                unconfined.push(id);
            }
        }
    }
    warn_root(&unconfined, "when these jobs are worked,");
    println!(
        "queued {} job(s) in group {} from {}: {}",
        queued.jobs.len(),
        queued.group,
        &queued.base[..12.min(queued.base.len())],
        queued.jobs.join(", ")
    );
    println!("run them with `baton work` (add --concurrency N to run several at once)");
    Ok(ExitCode::SUCCESS)
}

/// An outcome of another op than the one applied: a bug.
fn unexpected(outcome: &OpOutcome) -> anyhow::Error {
    baton_engine::Error::Internal {
        place: "the CLI's op",
        detail: format!("unexpected outcome {outcome:?}"),
    }
    .into()
}

/// The store for `baton work`. With `--follow`, a database that cannot be reached yet
/// (a server still starting, a network not up) is waited for, backing off, instead of
/// ending a process meant to run unattended. `None` when interrupted while waiting.
fn open_following(
    ctx: &Context_,
    follow: bool,
    cancel: &baton_gateway::Cancel,
) -> Result<Option<Arc<dyn baton_store::Store>>> {
    let mut backoff = Duration::from_millis(500);
    let mut said = false;
    loop {
        match ctx.store() {
            Ok(store) => {
                if said {
                    eprintln!("baton work: the database answers; claiming jobs");
                }
                return Ok(Some(store));
            }
            Err(e)
                if follow
                    && e.downcast_ref::<baton_store::Error>()
                        .is_some_and(baton_store::Error::is_transient) =>
            {
                if !said {
                    eprintln!(
                        "baton work: {e:#}\nbaton work: retrying in {:.1} s and backing off, up to every 30 s (Ctrl-C stops)",
                        backoff.as_secs_f64()
                    );
                    said = true;
                }
                if cancel.sleep(backoff) {
                    return Ok(None);
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
            Err(e) => return Err(e),
        }
    }
}

pub fn work(
    ctx: &Context_,
    concurrency: usize,
    lease_s: u64,
    follow: bool,
    poll_ms: u64,
) -> Result<ExitCode> {
    if lease_s < 3 {
        return Err(crate::exit::usage(
            "--lease-s must be at least 3 (the heartbeat renews at a third of it)",
        ));
    }
    let cancel = baton_gateway::Cancel::on_interrupt();
    let Some(store) = open_following(ctx, follow, &cancel)? else {
        return Ok(crate::signals::exit_code().unwrap_or(ExitCode::FAILURE));
    };
    let options = WorkOptions {
        concurrency: concurrency.max(1),
        lease: Duration::from_secs(lease_s),
        follow,
        poll: Duration::from_millis(poll_ms.max(10)),
        keys: ctx.keys().cloned(),
        cancel,
        // `-v`: every agent's output as it comes, each line under its job.
        agent_output: ctx.verbose.then(|| {
            baton_engine::jobs::runner::AgentOutput(Arc::new(
                |job: &str, l: baton_gateway::OutputLine<'_>| {
                    eprintln!("  {job} {} {}", if l.stderr { "!" } else { "|" }, l.line)
                },
            ))
        }),
        ..WorkOptions::default()
    };
    // Every job's turns, gates and lease as they happen, rendered from the event stream.
    options
        .publisher
        .subscribe(crate::live::progress(ctx.verbose));
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let reader = store.clone();
    let cancel = options.cancel.clone();
    if follow {
        // A process meant to run for long: say how to stop it from elsewhere.
        eprintln!(
            "baton work: following the queue as {owner}; `baton cancel --worker-process {owner}` stops it from another shell",
            owner = options.owner
        );
    }
    let reports = engine_jobs::runner::work(store, clock, &options, &|p| match p {
        // The claim itself is said by the event stream (see `live`).
        Progress::Claimed { job, .. } => {
            if let Ok(info) = reader.job(&job)
                && let Ok(spec) = engine_jobs::decode_spec(&info)
            {
                warn_root(&unconfined_as_root(&spec.roster), &format!("in job {job}"));
            }
        }
        // Said by the event stream (see `live`).
        Progress::Turn { .. } => {}
        Progress::Finished {
            job,
            status,
            detail,
        } => eprintln!("job {job}: {} — {detail}", status.as_str()),
        // Said by its event, unless no run could carry one.
        Progress::LeaseLost {
            job,
            reason,
            announced: false,
        } => eprintln!("job {job}: lease lost ({reason})"),
        Progress::LeaseLost { .. } => {}
        Progress::StoreUnavailable { error, retry_in } => eprintln!(
            "baton work: {error}\nbaton work: retrying in {:.1} s and backing off, up to every 30 s; jobs resume from their last committed turn once it answers (Ctrl-C stops)",
            retry_in.as_secs_f64()
        ),
        Progress::StoreBack { after } => eprintln!(
            "baton work: the database answers again after {:.1} s; claiming jobs",
            after.as_secs_f64()
        ),
        Progress::Released { job, turn } => eprintln!(
            "job {job}: interrupted{}; the job is queued again",
            turn.map(|t| format!(" (turn {t} discarded, nothing of it committed)"))
                .unwrap_or_default()
        ),
    })?;
    for r in reports.iter().filter(|r| r.unrecorded.is_some()) {
        eprintln!(
            "job {}: {} — {}",
            r.job,
            r.detail,
            r.unrecorded.as_deref().unwrap_or_default()
        );
    }
    if let Some(code) = crate::signals::exit_code() {
        let released = reports
            .iter()
            .filter(|r| r.status == JobStatus::Queued)
            .count();
        println!(
            "interrupted: {released} job(s) given back to the queue; `baton work` continues them from their last committed turn"
        );
        return Ok(code);
    }
    if cancel.is_cancelled() {
        let released = reports
            .iter()
            .filter(|r| r.status == JobStatus::Queued)
            .count();
        println!(
            "cancelled (`baton cancel --worker-process {}`): {released} job(s) given back to the queue; `baton work` continues them from their last committed turn",
            options.owner
        );
        return Ok(ExitCode::from(crate::cancel::EXIT_CANCELLED));
    }
    if reports.is_empty() {
        let running = ctx
            .store()?
            .list_jobs()?
            .into_iter()
            .filter(|j| j.status == JobStatus::Running)
            .count();
        if running > 0 {
            println!(
                "no job to run: nothing is queued, and {running} running job(s) are held by other workers' leases (`baton jobs` shows who, and until when)"
            );
        } else {
            println!("no job to run: the queue is empty (`baton jobs` lists every job)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mine = |r: &&engine_jobs::runner::JobReport| !r.lost && r.unrecorded.is_none();
    let failed = reports
        .iter()
        .filter(mine)
        .filter(|r| r.status == JobStatus::Failed)
        .count();
    let unrecorded = reports.iter().filter(|r| r.unrecorded.is_some()).count();
    let lost = reports.iter().filter(|r| r.lost).count();
    let mut extra = String::new();
    if unrecorded > 0 {
        let _ = write!(
            extra,
            ", {unrecorded} whose end could not be recorded (still running until the lease expires)"
        );
    }
    if lost > 0 {
        let _ = write!(extra, ", {lost} taken over by another worker");
    }
    let cancelled = reports
        .iter()
        .filter(mine)
        .filter(|r| r.status == JobStatus::Cancelled)
        .count();
    if cancelled > 0 {
        let _ = write!(
            extra,
            ", {cancelled} cancelled (`baton requeue` continues one)"
        );
    }
    println!(
        "ran {} job(s): {} in the outbox, {failed} failed{extra}. See `baton outbox`.",
        reports.len(),
        reports
            .iter()
            .filter(mine)
            .filter(|r| r.status == JobStatus::Outbox)
            .count()
    );
    Ok(if failed == 0 && unrecorded == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// How long a running job has been at it, and where its agent's output is going now.
fn running_notes(store: &dyn baton_store::Store, job: &JobInfo, spec: &JobSpec) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(run) = &job.run_id else {
        return notes;
    };
    let Ok(info) = store.run_info(run) else {
        return notes;
    };
    let now = SystemClock.now().0;
    notes.push(format!(
        "running {}",
        human_duration(Duration::from_millis(
            u64::try_from(now - info.created_at.0).unwrap_or(0)
        ))
    ));
    if let Ok(repo) = baton_workspace::Repo::open(&spec.repo)
        && let Ok(worktree) = repo.job_worktree_path(&job.id, &spec.worktree_root)
    {
        // The turn in flight is the next after the committed ones.
        let out = worktree.join(format!(".baton/output/turn-{}-execute", info.turns));
        if out.is_dir() {
            notes.push(format!("output {}", out.display()));
        } else {
            notes.push(format!("worktree {}", worktree.display()));
        }
    }
    notes
}

fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

fn progress_of(store: &dyn baton_store::Store, job: &JobInfo) -> String {
    let Some(run) = &job.run_id else {
        return "not started".into();
    };
    match store.load_state(run) {
        Ok(s) => format!(
            "steps {}/{} · {} turns",
            s.steps_done(),
            s.plan.len(),
            s.turns
        ),
        Err(_) => "run unreadable".into(),
    }
}

pub fn list(ctx: &Context_, json: bool) -> Result<ExitCode> {
    let store = ctx.reader()?;
    let jobs = store.list_jobs()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&jobs)?);
        return Ok(ExitCode::SUCCESS);
    }
    if jobs.is_empty() {
        println!(
            "no jobs; queue one with `baton enqueue --objective \"…\" --task \"…\" --worker ID`"
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = format!(
        "{:<13} {:<11} {:<9} {:<22} {:<26} {}\n",
        "job", "group", "status", "candidate", "progress", "notes"
    );
    for job in &jobs {
        let spec: Option<JobSpec> = serde_json::from_value(job.spec.clone()).ok();
        let mut notes = Vec::new();
        if job.attempts > 1 {
            notes.push(format!("claimed {} times", job.attempts));
        }
        if job.status == JobStatus::Running
            && let (Some(owner), Some(until)) = (&job.lease_owner, job.lease_expires_at)
        {
            notes.push(format!("held by {owner} until {until}"));
        }
        if job.status == JobStatus::Running
            && let Some(spec) = &spec
        {
            notes.extend(running_notes(store.as_ref(), job, spec));
        }
        if let Some(e) = &job.error {
            notes.push(baton_core::reconciler::clip(e, 60));
        }
        if let Ok(Some(o)) = decode_outbox(job)
            && !o.drift.is_empty()
        {
            notes.push(format!("drift: {}", o.drift.join("; ")));
        }
        let _ = writeln!(
            out,
            "{:<13} {:<11} {:<9} {:<22} {:<26} {}",
            job.id,
            job.group,
            job.status.as_str(),
            spec.map(|s| s.candidate).unwrap_or_default(),
            progress_of(store.as_ref(), job),
            notes.join(" · ")
        );
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

pub fn outbox(ctx: &Context_, job: Option<&str>, json: bool) -> Result<ExitCode> {
    let store = ctx.reader()?;
    let jobs: Vec<JobInfo> = match job {
        Some(prefix) => vec![store.job(&store.resolve_job(prefix)?)?],
        None => store
            .list_jobs()?
            .into_iter()
            .filter(|j| j.outbox.is_some())
            .collect(),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&jobs)?);
        return Ok(ExitCode::SUCCESS);
    }
    if jobs.is_empty() {
        println!("the outbox is empty; `baton work` runs queued jobs");
        return Ok(ExitCode::SUCCESS);
    }
    for job in &jobs {
        let spec: Option<JobSpec> = serde_json::from_value(job.spec.clone()).ok();
        println!(
            "── job {} ({}) · {} · group {}",
            job.id,
            spec.map(|s| s.candidate).unwrap_or_default(),
            job.status.as_str(),
            job.group
        );
        let Some(o) = decode_outbox(job)? else {
            println!(
                "   no result: {}",
                job.error.as_deref().unwrap_or("not finished")
            );
            continue;
        };
        println!(
            "   branch {} · {} → {} · {} turns · {}",
            o.branch,
            &o.base[..12.min(o.base.len())],
            &o.head[..12.min(o.head.len())],
            o.turns,
            o.ended
        );
        println!(
            "   diff: {} files, +{} −{}{} · patch {}",
            o.diff.files_changed,
            o.diff.insertions,
            o.diff.deletions,
            if o.diff.binary_files > 0 {
                format!(", {} binary", o.diff.binary_files)
            } else {
                String::new()
            },
            o.patch_file.display()
        );
        println!("   worktree {}", o.worktree.display());
        if o.gates.is_empty() {
            println!("   gates: none configured");
        }
        for g in &o.gates {
            println!(
                "   gate {}: {} (exit {}, {} ms) at {} — output {}",
                g.name,
                if g.passed { "PASSED" } else { "FAILED" },
                g.exit_code.map_or("none".into(), |c| c.to_string()),
                g.duration_ms,
                &g.commit[..12.min(g.commit.len())],
                g.output_file.as_deref().unwrap_or("—")
            );
        }
        for d in &o.drift {
            println!("   drift: {d}");
        }
        if let Some(j) = &job.judgement {
            let j: engine_jobs::judge::Judgement = serde_json::from_value(j.clone())
                .with_context(|| format!("the judgement recorded on job {}", job.id))?;
            println!(
                "   judged: {} (by {}{})",
                if j.winner_job == job.id {
                    "WINNER"
                } else {
                    "not the winner"
                },
                j.judge,
                judge_cost(&j)
            );
            for c in &j.calls {
                println!("   {}", crate::render::call_line(c).trim_start());
            }
        }
        for failed in failed_judgements(store.as_ref(), &job.group)? {
            println!(
                "   judge FAILED (by {}{}): {}: {}",
                failed.judge,
                failed_cost(&failed),
                failed.error_class,
                failed.error
            );
        }
        println!(
            "   record: `baton state {}`, `baton history {}`",
            o.run_id, o.run_id
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The judge's calls in a few words: how many, and what they cost when priced.
fn judge_cost(j: &engine_jobs::judge::Judgement) -> String {
    let calls = match j.calls.len() {
        // Recorded before the judge's calls were.
        0 => return String::new(),
        1 => "1 call".to_string(),
        n => format!("{n} calls"),
    };
    match j.cost_micro_usd() {
        Some(cost) => format!(", {calls}, {}", baton_engine::report::dollars(cost)),
        None => format!(", {calls}"),
    }
}

/// The judges of `group` that got no verdict, oldest first.
fn failed_judgements(
    store: &dyn baton_store::Store,
    group: &str,
) -> Result<Vec<engine_jobs::judge::FailedJudgement>> {
    let mut out = Vec::new();
    for j in store.judgements(group)? {
        if j.outcome == baton_store::JudgementOutcome::Failed {
            out.push(
                serde_json::from_value(j.body)
                    .with_context(|| format!("failed judgement {} of group {group}", j.seq))?,
            );
        }
    }
    Ok(out)
}

/// A failed judge's calls in a few words, as `judge_cost` says a judge's.
fn failed_cost(j: &engine_jobs::judge::FailedJudgement) -> String {
    let calls = match j.calls.len() {
        1 => "1 call".to_string(),
        n => format!("{n} calls"),
    };
    match j.cost_micro_usd() {
        Some(cost) => format!(", {calls}, {}", baton_engine::report::dollars(cost)),
        None => format!(", {calls}"),
    }
}

pub fn judge(ctx: &Context_, target: &str, judge: Option<&str>) -> Result<ExitCode> {
    let store = ctx.existing_store()?;
    // Its calls as they happen on stderr (each call's line with `-v`), rendered from
    // the event stream as a run's turns are; stopped by Ctrl-C or `baton cancel GROUP`.
    let engine = baton_engine::Engine::new(store.clone());
    engine.subscribe(crate::live::progress(ctx.verbose));
    crate::signals::install();
    let op = Op::Judge {
        group: target.to_string(),
        judge: judge.map(str::to_string),
    };
    let mut judging = None;
    let judged = ops::apply(&engine, &ctx.op_context(), op, &mut |s| {
        if let Started::Judging { group, judge } = s {
            eprintln!(
                "judging group {group} with {} ({}); `baton cancel {group}` stops it from another shell",
                judge.id, judge.model
            );
            judging = Some(group.to_string());
        }
    });
    let j = match (judged, judging) {
        (Ok(OpOutcome::Judged(j)), _) => j,
        (Ok(other), _) => return Err(unexpected(&other)),
        // Recorded as a failed judgement (its calls and their cost): say where.
        (
            Err(
                e @ (baton_engine::Error::Gateway { .. } | baton_engine::Error::JudgeAnswer { .. }),
            ),
            Some(group),
        ) => {
            return Err(anyhow::Error::new(e).context(format!(
                "the judge of group {group} has no verdict; its calls are recorded as a failed judgement (`baton outbox` shows it) and `baton judge {group}` tries again"
            )));
        }
        (Err(e), _) => return Err(e.into()),
    };
    let group = &j.group;
    println!(
        "group {group}, judged by {}{} against: {}",
        j.judge,
        judge_cost(&j),
        j.rubric
    );
    for c in &j.calls {
        println!("{}", crate::render::call_line(c));
    }
    for s in &j.verdict.scores {
        let job = j
            .labels
            .get(&s.candidate)
            .map(String::as_str)
            .unwrap_or("?");
        let outbox = store
            .job(job)
            .ok()
            .and_then(|jb| decode_outbox(&jb).ok().flatten());
        let gates: Vec<String> = outbox
            .map(|o| {
                o.gates
                    .iter()
                    .map(|g| format!("{} {}", g.name, if g.passed { "passed" } else { "FAILED" }))
                    .collect()
            })
            .unwrap_or_default();
        println!(
            "  {} = job {job}: {:.1}/10 · gates: {} · {}",
            s.candidate,
            s.score,
            if gates.is_empty() {
                "none".into()
            } else {
                gates.join(", ")
            },
            s.reasons
        );
    }
    println!(
        "winner: {} (job {}) — {}",
        j.verdict.winner, j.winner_job, j.verdict.verdict
    );
    Ok(ExitCode::SUCCESS)
}

pub fn gc(
    ctx: &Context_,
    repo: &Path,
    worktrees: Option<&Path>,
    keep: usize,
    idle_hours: u64,
) -> Result<ExitCode> {
    let store = ctx.reader()?;
    let repo = baton_workspace::Repo::open(repo)?;
    let root = worktrees
        .map(Path::to_path_buf)
        .unwrap_or_else(|| repo.default_worktree_root());
    let jobs = store.list_jobs()?;
    let finished = |id: &str| {
        jobs.iter().any(|j| {
            j.id == id
                && matches!(
                    j.status,
                    JobStatus::Outbox | JobStatus::Judged | JobStatus::Failed
                )
        })
    };
    let policy = baton_workspace::Retention {
        keep_newest: keep,
        min_idle: Duration::from_secs(idle_hours * 3600),
    };
    let report = repo.gc(&root, &policy, &finished)?;
    for r in &report.removed {
        println!(
            "removed {} (job {}); its branch {} keeps every commit",
            r.path.display(),
            r.job_id,
            r.branch
        );
        if let Some(t) = &r.transcripts {
            println!(
                "   its agents' output (briefings, stdout, stderr, notes) is kept at {}: \
                 paths recorded under {}/{} are now there",
                t.display(),
                r.path.display(),
                baton_workspace::AGENT_OUTPUT_DIR
            );
        }
    }
    for k in &report.kept {
        println!("kept {} (job {}): {}", k.path.display(), k.job_id, k.reason);
    }
    if report.removed.is_empty() && report.kept.is_empty() {
        println!("no worktrees under {}", root.display());
    }
    Ok(ExitCode::SUCCESS)
}
