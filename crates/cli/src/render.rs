//! Human-readable output. Machine-readable output is `--json` on the same commands.

use std::fmt::Write as _;
use std::time::Duration;

use baton_core::compiler::{DropReason, HandoffPackage};
use baton_core::state::{ExecutionState, IssueStatus, StepStatus};
use baton_core::turn::{TurnRecord, TurnStatus};
use baton_engine::Roster;
use baton_engine::bench::BenchRow;
use baton_engine::report::{RowFormat, RunReport, render_row, unverified_resolutions};
use baton_store::RunInfo;

pub use baton_protocol::render::{assignment_label, n};

fn clip(s: &str, max: usize) -> String {
    baton_core::reconciler::clip(s, max)
}

pub fn runs(runs: &[RunInfo]) -> String {
    if runs.is_empty() {
        return "no runs yet; start one with `baton demo` or `baton run --objective \"…\" --task \"…\"`\n".into();
    }
    let mut out = format!(
        "{:<14} {:<9} {:>5}  {:<24}  {}\n",
        "run", "status", "turns", "created", "objective"
    );
    for r in runs {
        let _ = writeln!(
            out,
            "{:<14} {:<9} {:>5}  {:<24}  {}",
            r.id.0,
            r.status.as_str(),
            r.turns,
            r.created_at.to_string(),
            clip(&r.objective, 60)
        );
    }
    out
}

pub fn tasks(state: &ExecutionState) -> String {
    let mut out = format!(
        "{} of {} steps done\n",
        state.steps_done(),
        state.plan.len()
    );
    let cursor = state.cursor();
    for (i, s) in state.plan.iter().enumerate() {
        let mark = match s.status {
            StepStatus::Done => "done",
            StepStatus::Pending if Some(i) == cursor => "next",
            StepStatus::Pending => "    ",
        };
        let by = match (&s.done_by, s.done_at_turn) {
            (Some(w), Some(t)) => format!("  (by {w}, turn {t})"),
            _ => String::new(),
        };
        let budget = s
            .budget
            .map(|b| format!("  [budget {b}]"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "[{mark}] {} {}{by}{budget}{}",
            s.id,
            s.title,
            step_marks(s)
        );
        if let (StepStatus::Pending, Some(last)) = (s.status, s.attempts.last()) {
            let _ = writeln!(
                out,
                "       {} turn(s) did not complete it; the last, turn {} by {}: {} — {}",
                s.attempts.len(),
                last.turn,
                last.worker,
                last.outcome.as_str(),
                clip(&last.detail, 160)
            );
        }
    }
    out
}

/// A step's tags and its stated scope, as the plan gives them (`  [tags credentials, db]
/// [scope own]`); nothing for a step with neither, whose line reads as it always did.
fn step_marks(s: &baton_core::state::PlanStep) -> String {
    let mut out = String::new();
    if !s.tags.is_empty() {
        let tags: Vec<&str> = s.tags.iter().map(|t| t.as_str()).collect();
        let _ = write!(out, "  [tags {}]", tags.join(", "));
    }
    if let Some(scope) = s.scope {
        let _ = write!(out, "  [scope {}]", scope.as_str());
    }
    out
}

pub fn state(info: &RunInfo, s: &ExecutionState) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "run {} · {} · {} turns · steps {}/{}",
        info.id,
        info.status.as_str(),
        s.turns,
        s.steps_done(),
        s.plan.len()
    );
    let _ = writeln!(out, "objective: {}\n", s.objective);
    out.push_str(&tasks(s));
    let _ = writeln!(out, "\ndecisions ({}):", s.decisions.len());
    for d in &s.decisions {
        let reason = d
            .reason
            .as_deref()
            .map(|r| format!(" — because {r}"))
            .unwrap_or_else(|| " — (no reason given)".into());
        let re = if d.reaffirmed.is_empty() {
            String::new()
        } else {
            format!(" [reaffirmed ×{}]", d.reaffirmed.len())
        };
        let _ = writeln!(
            out,
            "  {} {}{reason} ({}, turn {}){re}",
            d.id, d.text, d.provenance.recorded_by, d.provenance.turn
        );
    }
    let _ = writeln!(out, "\nartifacts ({}):", s.artifacts.len());
    for a in &s.artifacts {
        let l = a.latest();
        let mods: Vec<String> = a.modifiers().iter().map(|w| w.to_string()).collect();
        let _ = writeln!(
            out,
            "  {} {} v{} — {} (by {}{}) [{}]",
            a.id,
            a.name,
            l.version,
            clip(&l.description, 70),
            a.creator(),
            if mods.is_empty() {
                String::new()
            } else {
                format!("; modified by {}", mods.join(", "))
            },
            if l.verified {
                "verified"
            } else {
                "not verified"
            }
        );
    }
    let open = s.open_issues().count();
    let _ = writeln!(out, "\nissues ({} open of {}):", open, s.issues.len());
    for i in &s.issues {
        let status = if i.status == IssueStatus::Open {
            "open"
        } else {
            "resolved"
        };
        let claim = i
            .resolution_claimed_by
            .as_ref()
            .filter(|_| i.status == IssueStatus::Open)
            .map(|c| {
                format!(
                    " — resolution CLAIMED by {} (turn {}), not verified",
                    c.by, c.turn
                )
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} [{}] [{status}] {}{claim}",
            i.id,
            i.severity.as_str(),
            i.title
        );
    }
    let _ = writeln!(out, "\nfailed attempts ({}):", s.failed_attempts.len());
    for f in &s.failed_attempts {
        let _ = writeln!(
            out,
            "  {} {} — {} ({}, turn {})",
            f.id, f.what, f.why, f.provenance.recorded_by, f.provenance.turn
        );
    }
    let _ = writeln!(out, "\nassumptions ({}):", s.assumptions.len());
    for a in &s.assumptions {
        let _ = writeln!(out, "  {} {}", a.id, a.text);
    }
    if let Some(l) = &s.last_action {
        let _ = writeln!(
            out,
            "\nlast action: {} ({}, turn {})",
            l.text, l.provenance.recorded_by, l.provenance.turn
        );
    }
    if let Some(nx) = &s.next_action {
        let _ = writeln!(
            out,
            "next action: {} ({}, turn {})",
            nx.text, nx.provenance.recorded_by, nx.provenance.turn
        );
    }
    out
}

pub fn history(r: &RunReport) -> String {
    if r.turns.is_empty() {
        return format!(
            "run {} has no turns yet; `baton step {}` runs one\n",
            r.run.id, r.run.id
        );
    }
    r.turns
        .iter()
        .map(|t| render_row(t, RowFormat::Text))
        .collect()
}

pub fn package(p: &HandoffPackage, turn: Option<&TurnRecord>, with_text: bool) -> String {
    let mut out = String::new();
    let who = turn.map(|t| format!(" ({})", t.model)).unwrap_or_default();
    let _ = writeln!(
        out,
        "── turn {} · {}{who} · {} · {}/{} tokens ({}){}",
        p.turn,
        p.worker,
        assignment_label(p.assignment.step_id.as_ref(), &p.assignment.task),
        n(p.tokens as u64),
        n(p.budget as u64),
        p.estimator,
        if p.over_budget {
            " · OVER BUDGET: even the shortened task and objective do not fit"
        } else {
            ""
        }
    );
    let included: Vec<String> = p
        .sections
        .iter()
        .filter(|s| s.included && s.items_available > 0)
        .map(|s| {
            if s.items_included < s.items_available {
                format!(
                    "{} {}/{}",
                    s.section.title(),
                    s.items_included,
                    s.items_available
                )
            } else {
                s.section.title().to_string()
            }
        })
        .collect();
    let _ = writeln!(
        out,
        "   included: {}",
        if included.is_empty() {
            "—".into()
        } else {
            included.join(", ")
        }
    );
    let omitted: Vec<&str> = p.omitted_sections.iter().map(|s| s.title()).collect();
    let _ = writeln!(
        out,
        "   omitted sections: {}",
        if omitted.is_empty() {
            "none".into()
        } else {
            omitted.join(", ")
        }
    );
    if !p.dropped.is_empty() {
        let items: Vec<String> = p
            .dropped
            .iter()
            .map(|d| {
                let why = match d.reason {
                    DropReason::Cap => "over the section's cap",
                    DropReason::Budget => "budget",
                    DropReason::NotRelevant => "not relevant to the task",
                    DropReason::Summarized => "in a range",
                };
                format!("{} ({why})", d.label())
            })
            .collect();
        let _ = writeln!(out, "   items left out: {}", items.join(", "));
    }
    if with_text {
        let _ = writeln!(out, "\n{}\n", p.text.trim_end());
    }
    out
}

/// One line for a model call recorded outside a turn's stream (the judge's), as the
/// stream's renderer shows every call with `-v`.
pub fn call_line(c: &baton_core::turn::CallRecord) -> String {
    let event = baton_protocol::EventMsg {
        run_id: baton_core::ids::RunId(String::new()),
        turn: None,
        at: c.started_at,
        kind: baton_engine::orchestrator::model_called(c),
    };
    baton_protocol::render::Renderer::new(true)
        .feed(&event)
        .join("\n")
}

pub fn workers(roster: &Roster, state: Option<&ExecutionState>, note: &str) -> String {
    let mut out = format!(
        "{note}\n{:<16} {:<28} {:<10} {:<8} {:<14} {:<6} credential\n",
        "worker", "model", "family", "enabled", "role", "turns"
    );
    for w in &roster.workers {
        let turns = state
            .and_then(|s| s.workers.iter().find(|r| r.id == w.id))
            .map(|r| {
                r.turns
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_else(|| "—".into());
        let _ = writeln!(
            out,
            "{:<16} {:<28} {:<10} {:<8} {:<14} {turns:<6} {}",
            w.id.as_str(),
            w.model,
            w.family,
            if w.enabled { "yes" } else { "no" },
            w.role.as_deref().unwrap_or("—"),
            w.credential_status()
        );
    }
    out
}

pub fn run_summary(r: &RunReport, s: &ExecutionState, elapsed: Duration) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nrun {} · {} · {} turns ({} failed) · steps {}/{} · {:.2} s",
        r.run.id,
        r.run.status.as_str(),
        r.turns.len(),
        r.failed_turns,
        s.steps_done(),
        s.plan.len(),
        elapsed.as_secs_f64()
    );
    let _ = writeln!(
        out,
        "record: {} decisions, {} artifacts, {} open issues, {} failed attempts, {} assumptions",
        s.decisions.len(),
        s.artifacts.len(),
        s.open_issues().count(),
        s.failed_attempts.len(),
        s.assumptions.len()
    );
    let _ = writeln!(
        out,
        "claims refused: {} · warnings: {}",
        r.refusals, r.warnings
    );
    for line in unverified_resolutions(s) {
        let _ = writeln!(out, "still open: {line}");
    }
    let _ = writeln!(
        out,
        "tokens actually sent: {} (every call of every turn, retries and system prompts included)",
        n(r.tokens_sent as u64)
    );
    out.push_str(&reported_line(r));
    let _ = writeln!(
        out,
        "conversations passed between workers: {} (measured: {} requests, {} checks of a request against an earlier raw output)",
        r.conversations_passed,
        r.requests_audited,
        n(r.prior_outputs_checked)
    );
    out
}

/// Provider-reported tokens and cost, when any call reported them.
fn reported_line(r: &RunReport) -> String {
    let u = r.reported;
    if u.input_tokens == 0 && u.output_tokens == 0 {
        return String::new();
    }
    format!(
        "provider-reported tokens: {} in ({} cached), {} out{}\n",
        n(u.input_tokens),
        n(u.cached_tokens),
        n(u.output_tokens),
        r.cost_micro_usd
            .map(|c| format!(" · cost {}", baton_engine::report::dollars(c)))
            .unwrap_or_default()
    )
}

pub fn demo(
    r: &RunReport,
    s: &ExecutionState,
    turns: &[TurnRecord],
    db: &baton_store::Location,
    elapsed: Duration,
) -> String {
    let id = &r.run.id;
    let mut out = String::new();
    let backend = match db {
        baton_store::Location::Sqlite(_) => "SQLite",
        baton_store::Location::Postgres(_) => "PostgreSQL",
    };
    let _ = writeln!(
        out,
        "baton demo · run {id} · {backend} {db} · offline mock models\n"
    );
    let _ = writeln!(out, "objective: {}\n", s.objective);
    out.push_str("who did what\n");
    for t in turns {
        let result_summary = t
            .result
            .as_ref()
            .and_then(|v| v.get("summary"))
            .and_then(|v| v.as_str())
            .unwrap_or("(no result)");
        let _ = writeln!(
            out,
            "  turn {} · {:<9} {:<20} {} — {}",
            t.turn,
            t.worker.as_str(),
            format!("({})", t.model),
            assignment_label(t.assignment.step_id.as_ref(), &t.assignment.task),
            if t.status == TurnStatus::Committed {
                clip(result_summary, 70)
            } else {
                format!("FAILED: {}", t.error.as_deref().unwrap_or(""))
            }
        );
    }
    out.push_str("\nwhat each worker was handed\n");
    for (t, row) in turns.iter().zip(&r.turns) {
        let p = &t.package;
        let included: Vec<String> = p
            .sections
            .iter()
            .filter(|x| x.included && x.items_available > 0)
            .map(|x| {
                if x.items_included < x.items_available {
                    format!(
                        "{} {}/{}",
                        x.section.title(),
                        x.items_included,
                        x.items_available
                    )
                } else {
                    x.section.title().to_string()
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "  turn {} · {}: {}/{} tokens · {} sections: {}",
            t.turn,
            t.worker,
            n(p.tokens as u64),
            n(p.budget as u64),
            included.len(),
            included.join(", ")
        );
        // Plan steps in a range are in the briefing's text; what the relevance floor
        // kept out is not a matter of room.
        let labels = |reasons: &[DropReason]| -> Vec<String> {
            (p.dropped.iter())
                .filter(|d| reasons.contains(&d.reason))
                .map(|d| d.label())
                .collect()
        };
        let unfit = labels(&[DropReason::Cap, DropReason::Budget]);
        let irrelevant = labels(&[DropReason::NotRelevant]);
        if !row.sections_omitted.is_empty() || !unfit.is_empty() || !irrelevant.is_empty() {
            let _ = write!(
                out,
                "      omitted sections: {} · items that did not fit: {}",
                if row.sections_omitted.is_empty() {
                    "none".into()
                } else {
                    row.sections_omitted.join(", ")
                },
                if unfit.is_empty() {
                    "none".into()
                } else {
                    unfit.join(", ")
                }
            );
            if !irrelevant.is_empty() {
                let _ = write!(
                    out,
                    " · not relevant to the task: {}",
                    irrelevant.join(", ")
                );
            }
            out.push('\n');
        }
    }
    out.push_str("\nclaims the engine refused or flagged\n");
    let mut any = false;
    for row in &r.turns {
        for x in &row.refusals {
            any = true;
            let _ = writeln!(
                out,
                "  turn {} · {}: REFUSED {} — {}",
                row.turn, row.worker, x.claim, x.reason
            );
        }
        for w in &row.warnings {
            any = true;
            let _ = writeln!(out, "  turn {} · {}: {}", row.turn, row.worker, w);
        }
    }
    if !any {
        out.push_str("  none\n");
    }
    let unverified = unverified_resolutions(s);
    if !unverified.is_empty() {
        out.push_str("\nclaimed resolved, kept open (nothing verified it)\n");
        for line in unverified {
            let _ = writeln!(out, "  {line}");
        }
    }
    let reaffirmed: usize = s.decisions.iter().map(|d| d.reaffirmed.len()).sum();
    let max_version = s.artifacts.iter().max_by_key(|a| a.versions.len());
    let _ = writeln!(
        out,
        "\nrecord: {} decisions ({} reaffirmations), {} artifacts{}, {} open issues, {} failed attempts, {} assumptions",
        s.decisions.len(),
        reaffirmed,
        s.artifacts.len(),
        max_version
            .map(|a| format!(" ({} at v{})", a.name, a.versions.len()))
            .unwrap_or_default(),
        s.open_issues().count(),
        s.failed_attempts.len(),
        s.assumptions.len()
    );
    let _ = writeln!(
        out,
        "tokens actually sent: {} (every call of every turn, retries and system prompts included)",
        n(r.tokens_sent as u64)
    );
    let _ = writeln!(
        out,
        "conversations passed between workers: {} (measured: {} requests, each [system, user], {} checks of a request against an earlier raw output)",
        r.conversations_passed,
        r.requests_audited,
        n(r.prior_outputs_checked)
    );
    let short = &id.0[..id.0.len().min(6)];
    let _ = writeln!(
        out,
        "finished in {:.0} ms. Next: `baton state {short}`, `baton handoffs {short} --text`, `baton export {short} --format md`",
        elapsed.as_secs_f64() * 1000.0
    );
    out
}

/// `baton bench --fidelity`: per case, the share of relevant records delivered.
pub fn fidelity(rows: &[baton_core::fidelity::FidelityRow], estimator: &str) -> String {
    use baton_core::fidelity::Category;
    let mut out = format!(
        "baton bench --fidelity · offline, in-process · {estimator} estimator · 5 workers\n\n"
    );
    let _ = write!(
        out,
        "{:>6} {:>6} {:>7} {:>7} {:>7}",
        "steps", "budget", "records", "tokens", "over"
    );
    let short = |c: Category| match c {
        Category::Assignment => "task",
        Category::Warnings => "warnings",
        Category::Notes => "notes",
        Category::OpenIssues => "issues",
        Category::FailedAttempts => "failed",
        Category::FoundingDecisions => "founding",
        Category::ReversedDecisions => "reversed",
    };
    for c in Category::ALL {
        let _ = write!(out, " {:>9}", short(c));
    }
    out.push('\n');
    for r in rows {
        let _ = write!(
            out,
            "{:>6} {:>6} {:>7} {:>7} {:>7}",
            r.case.steps,
            n(r.case.budget as u64),
            n(r.final_items as u64),
            n(r.mean_tokens as u64),
            r.over_budget
        );
        for c in Category::ALL {
            let _ = write!(out, " {:>8.1}%", 100.0 * r.tally(c).fraction());
        }
        out.push('\n');
    }
    out.push_str(
        "\nEach cell: relevant records delivered, over every briefing of the run (100 turns). \
         task: the assignment and objective in full; warnings and notes: the predecessor's; \
         issues: every open high or critical issue; failed: failed attempts in the assigned \
         step's area; founding: the first turn's decisions; reversed: decisions that reversed \
         an earlier one. records: the state at the end; tokens: mean briefing size; over: \
         briefings over budget.\n",
    );
    out
}

pub fn bench(rows: &[BenchRow], estimator: &str) -> String {
    let budget = rows.first().map_or(0, |r| r.budget);
    let mut out = format!(
        "baton bench · offline mock model · {estimator} estimator · 5 workers · {}-token packages\n\n",
        n(budget as u64)
    );
    let _ = writeln!(
        out,
        "{:>6} {:>14} {:>18} {:>8} {:>14} {:>12} {:>16} {:>10}",
        "turns",
        "tokens sent",
        "transcript replay",
        "ratio",
        "engine/turn",
        "engine max",
        "resume→package",
        "db size"
    );
    for r in rows {
        let ratio = if r.tokens_sent == 0 {
            0.0
        } else {
            r.transcript_tokens as f64 / r.tokens_sent as f64
        };
        let _ = writeln!(
            out,
            "{:>6} {:>14} {:>18} {:>7.1}× {:>11.2} ms {:>9.2} ms {:>13.2} ms {:>7} KiB",
            r.turns,
            n(r.tokens_sent),
            n(r.transcript_tokens),
            ratio,
            r.engine_time_per_turn.as_secs_f64() * 1000.0,
            r.engine_time_max.as_secs_f64() * 1000.0,
            r.resume_to_package.as_secs_f64() * 1000.0,
            n(r.db_bytes / 1024)
        );
    }
    out.push_str(
        "\ntranscript replay: each call re-sends every earlier worker's raw output instead of the briefing \
         (a lower bound). engine/turn excludes model time and includes the durable commit (fsync).\n",
    );
    if let Some(r) = rows.iter().find(|r| r.turns == 100) {
        let reference = baton_engine::bench::REFERENCE_INPUT_TOKENS_100_TURNS;
        let ratio = |t: u64| t as f64 / reference as f64;
        let with_schema = r.tokens_sent + r.schema_tokens;
        let _ = writeln!(
            out,
            "\nreference engine, measured externally on the same 100-turn work: {} k input tokens \
             (a recorded figure: it cannot run here)\n\
             baton, measured here: {} input tokens ({:.2}× the reference); {} ({:.2}×) when every \
             call also carries its JSON schema, as providers that enforce one receive it",
            reference / 1000,
            n(r.tokens_sent),
            ratio(r.tokens_sent),
            n(with_schema),
            ratio(with_schema)
        );
    }
    out
}
