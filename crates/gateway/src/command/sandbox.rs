//! Confinement of an agent with bubblewrap (`options.sandbox = "bwrap"`).
//!
//! What the agent sees: the whole file system read-only; its worktree (and the
//! worktree's own git metadata) writable; a private home and temporary directory kept
//! with the job (`<worktree>/.baton/home`, `TMPDIR=<worktree>/.baton/tmp`, never
//! committed; `/tmp` itself is read-only like the rest); the user's checkout
//! of the repository and every path in `sandbox_hide` (baton puts its database there)
//! replaced by empty directories; the repository's shared git directory read-only, so
//! `git status` and `git diff` work; a pid namespace of its own, so `/proc` shows no
//! process of baton's (whose environment holds every worker's key). The network is not cut: the agent must reach its
//! model. bubblewrap drops every capability inside the sandbox, root included, so an
//! agent running as root cannot remount or install anything.

use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// How one agent run is confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sandbox {
    /// bubblewrap's executable, found on baton's `PATH` when the worker is built.
    bwrap: PathBuf,
    /// Paths the agent must not see (files or directories), beyond the checkout.
    hide: Vec<PathBuf>,
}

/// The git layout of a linked worktree: `<worktree>/.git` is a file naming its admin
/// directory, whose `commondir` names the repository's shared git directory.
struct Layout {
    admin: PathBuf,
    common: PathBuf,
    /// The user's checkout (the common directory's parent), when the repository is
    /// not bare.
    checkout: Option<PathBuf>,
}

impl Sandbox {
    pub(crate) fn new(hide: Vec<PathBuf>) -> Result<Self> {
        let bwrap = find_on_path("bwrap").ok_or_else(|| {
            Error::Config(
                "options.sandbox = \"bwrap\" needs bubblewrap, which is not on baton's PATH; install it (Debian/Ubuntu: apt-get install bubblewrap) or set sandbox = \"none\""
                    .into(),
            )
        })?;
        Ok(Sandbox { bwrap, hide })
    }

    /// The private home directory of the agent in `workspace`.
    pub(crate) fn home(workspace: &Path) -> PathBuf {
        workspace.join(".baton").join("home")
    }

    /// `argv` run inside the sandbox, for the worktree `workspace` (canonical).
    /// `program` is the agent's executable, already resolved to a path.
    pub(crate) fn wrap(
        &self,
        workspace: &Path,
        program: &Path,
        args: &[String],
    ) -> Result<Vec<String>> {
        let layout = layout(workspace)?;
        let home = Self::home(workspace);
        let tmp = workspace.join(".baton").join("tmp");
        for dir in [&home, &tmp] {
            std::fs::create_dir_all(dir).map_err(|e| Error::Server {
                message: format!("creating the agent's {}: {e}", dir.display()),
            })?;
        }
        let mut argv: Vec<String> = vec![self.bwrap.to_string_lossy().into_owned()];
        let mut push = |parts: &[&str]| argv.extend(parts.iter().map(|s| s.to_string()));
        let s = |p: &Path| p.to_string_lossy().into_owned();
        push(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
        // Hidden first, then what must stay visible inside them re-bound on top: the
        // default worktree lives inside the checkout (`<repo>/.baton/worktrees`).
        let mut hidden: Vec<PathBuf> = layout.checkout.iter().cloned().collect();
        hidden.extend(
            self.hide
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok()),
        );
        let hide = |path: &Path, push: &mut dyn FnMut(&[&str])| {
            if path.is_dir() {
                push(&["--tmpfs", &s(path)]);
            } else {
                push(&["--ro-bind", "/dev/null", &s(path)]);
            }
        };
        // A hidden path inside the worktree is hidden after the worktree is bound.
        let (inside, outside): (Vec<&PathBuf>, Vec<&PathBuf>) = hidden
            .iter()
            .partition(|p| p.starts_with(workspace) && *p != workspace);
        for path in outside {
            hide(path, &mut push);
        }
        push(&["--ro-bind", &s(&layout.common), &s(&layout.common)]);
        push(&["--bind", &s(&layout.admin), &s(&layout.admin)]);
        push(&["--bind", &s(workspace), &s(workspace)]);
        for path in inside {
            hide(path, &mut push);
        }
        push(&["--chdir", &s(workspace)]);
        push(&["--setenv", "HOME", &s(&home)]);
        push(&["--setenv", "TMPDIR", &s(&tmp)]);
        for var in [
            "XDG_CONFIG_HOME",
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
        ] {
            push(&["--unsetenv", var]);
        }
        // A pid namespace of its own: the agent's `/proc` shows only its own processes,
        // never baton's environment (which holds every worker's key) or another
        // agent's.
        push(&["--die-with-parent", "--unshare-ipc", "--unshare-pid", "--"]);
        argv.push(program.to_string_lossy().into_owned());
        argv.extend(args.iter().cloned());
        Ok(argv)
    }
}

fn layout(workspace: &Path) -> Result<Layout> {
    let bad = |why: String| {
        Error::Config(format!(
            "the sandbox needs a git worktree, and {} is not one: {why}",
            workspace.display()
        ))
    };
    let dot_git = workspace.join(".git");
    let text = std::fs::read_to_string(&dot_git)
        .map_err(|e| bad(format!("reading {}: {e}", dot_git.display())))?;
    let admin = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(|p| workspace.join(p.trim()))
        .ok_or_else(|| bad(format!("{} names no gitdir", dot_git.display())))?;
    let admin = std::fs::canonicalize(&admin)
        .map_err(|e| bad(format!("its git directory {}: {e}", admin.display())))?;
    let common = match std::fs::read_to_string(admin.join("commondir")) {
        Ok(rel) => admin.join(rel.trim()),
        Err(_) => admin.clone(),
    };
    let common = std::fs::canonicalize(&common).map_err(|e| {
        bad(format!(
            "its common git directory {}: {e}",
            common.display()
        ))
    })?;
    let checkout = (common.file_name().is_some_and(|n| n == ".git"))
        .then(|| common.parent().map(Path::to_path_buf))
        .flatten();
    Ok(Layout {
        admin,
        common,
        checkout,
    })
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
