//! The objective and tasks of `run` and `enqueue`: inline, or read from files or
//! standard input when they are longer than the command line allows (128 KiB for one
//! argument on Linux); and the per-step flags that go with the tasks.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use baton_core::state::{StepScope, StepTag};
use clap::Args;

/// What the work is for and its steps.
#[derive(Args, Debug, Clone)]
pub struct WorkText {
    /// What the work is for
    #[arg(
        long,
        required_unless_present = "objective_file",
        conflicts_with = "objective_file"
    )]
    objective: Option<String>,
    /// Read the objective from FILE (`-` for standard input), for one too long to type
    #[arg(long, value_name = "FILE")]
    objective_file: Option<PathBuf>,
    /// A step of the plan, in order (repeat for each step)
    #[arg(
        long = "task",
        required_unless_present = "task_files",
        conflicts_with = "task_files"
    )]
    tasks: Vec<String>,
    /// Read one step from FILE (`-` for standard input); repeat for each step, in order
    #[arg(long = "task-file", value_name = "FILE")]
    task_files: Vec<PathBuf>,
}

impl WorkText {
    /// The objective and the tasks, with files and standard input read.
    pub fn read(self) -> Result<(String, Vec<String>)> {
        let stdin_uses = self
            .objective_file
            .iter()
            .chain(&self.task_files)
            .filter(|p| is_stdin(p))
            .count();
        if stdin_uses > 1 {
            return Err(crate::exit::usage(format!(
                "standard input (`-`) is given {stdin_uses} times, but it can be read only once; put the other texts in files"
            )));
        }
        let objective = match (self.objective, self.objective_file) {
            (Some(text), _) => text,
            (None, Some(path)) => read_text(&path, "objective")?,
            // clap requires one of the two.
            (None, None) => bail!("give --objective TEXT or --objective-file FILE"),
        };
        let tasks = if self.task_files.is_empty() {
            self.tasks
        } else {
            self.task_files
                .iter()
                .map(|p| read_text(p, "task"))
                .collect::<Result<_>>()?
        };
        Ok((objective, tasks))
    }
}

/// The per-step flags of `baton run` and `baton enqueue`, each repeated once per
/// `--task`, in the tasks' order.
#[derive(Args, Debug, Default)]
pub struct StepArgs {
    /// Budget for one step, in order (repeat; overrides the split for that step)
    #[arg(long = "step-budget")]
    step_budgets: Vec<usize>,
    /// The seat of one step, in order (repeat; `build.step`, the default, for a step
    /// that builds; `review.code` for one that reviews): used when pools or seats
    /// are configured
    #[arg(long = "step-seat", value_name = "SEAT")]
    step_seats: Vec<String>,
    /// The tags of one step, in order (repeat; `credentials,db`, or "" for none): a
    /// seat's deny_tags keeps the families it names from a step so tagged
    #[arg(long = "step-tags", value_name = "TAGS")]
    step_tags: Vec<String>,
    /// The work one step covers, in order (repeat): `own` (its own part), or
    /// `earlier` (every earlier step's work, as a review gets); unset, the title decides
    #[arg(long = "step-scope", value_name = "SCOPE")]
    step_scopes: Vec<String>,
}

/// [`StepArgs`] read: one entry per flag given, in the tasks' order.
#[derive(Debug, Default)]
pub struct Steps {
    pub budgets: Vec<Option<usize>>,
    pub seats: Vec<Option<String>>,
    pub tags: Vec<Vec<StepTag>>,
    pub scopes: Vec<Option<StepScope>>,
}

impl StepArgs {
    /// Reads the flags and checks them against the plan's length before the database
    /// is opened: a bad flag creates nothing.
    pub fn read(self, steps: usize) -> Result<Steps> {
        for (flag, given) in [
            ("--step-budget", self.step_budgets.len()),
            ("--step-seat", self.step_seats.len()),
            ("--step-tags", self.step_tags.len()),
            ("--step-scope", self.step_scopes.len()),
        ] {
            if given > steps {
                return Err(crate::exit::usage(format!(
                    "{given} {flag} values for {steps} tasks; give at most one per --task, in the tasks' order"
                )));
            }
        }
        let tags = self
            .step_tags
            .iter()
            .enumerate()
            .map(|(i, t)| {
                StepTag::list(t)
                    .map_err(|e| crate::exit::usage(format!("--step-tags of step {}: {e}", i + 1)))
            })
            .collect::<Result<_>>()?;
        let scopes = self
            .step_scopes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.parse::<StepScope>()
                    .map(Some)
                    .map_err(|e| crate::exit::usage(format!("--step-scope of step {}: {e}", i + 1)))
            })
            .collect::<Result<_>>()?;
        Ok(Steps {
            budgets: self.step_budgets.into_iter().map(Some).collect(),
            seats: self.step_seats.into_iter().map(Some).collect(),
            tags,
            scopes,
        })
    }
}

/// The longest objective or task baton reads: far beyond any briefing budget (which
/// shortens them anyway), and small enough that `--objective-file /dev/zero` is an
/// error, not all the machine's memory.
const MAX_TEXT: u64 = 16 << 20;

fn too_long(what: &str, source: &str) -> String {
    format!(
        "the {what} in {source} is longer than {} MiB; a briefing could never hold it — put the detail in files the workers read, and give baton a summary",
        MAX_TEXT >> 20
    )
}

fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// The text of `path` (standard input for `-`) without its final line break; an error
/// naming the file when it cannot be read, is not UTF-8 or holds only white space.
fn read_text(path: &Path, what: &str) -> Result<String> {
    let (text, source) = if is_stdin(path) {
        let mut text = String::new();
        std::io::stdin()
            .take(MAX_TEXT + 1)
            .read_to_string(&mut text)
            .with_context(|| format!("reading the {what} from standard input"))?;
        if text.len() as u64 > MAX_TEXT {
            bail!("{}", too_long(what, "standard input"));
        }
        (text, "standard input".to_string())
    } else {
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_TEXT + 1).read_to_end(&mut bytes))
            .with_context(|| format!("cannot read the {what} file {}", path.display()))?;
        if bytes.len() as u64 > MAX_TEXT {
            bail!("{}", too_long(what, &path.display().to_string()));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!(
                "the {what} file {} is not UTF-8 text (invalid byte at offset {})",
                path.display(),
                e.utf8_error().valid_up_to()
            )
        })?;
        (text, format!("the {what} file {}", path.display()))
    };
    if text.trim().is_empty() {
        bail!("{source} is empty; it must hold the {what}'s text");
    }
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}
