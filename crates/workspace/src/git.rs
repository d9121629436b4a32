//! The one way this crate runs git: `git -C <dir> ...` with an environment that cannot
//! be steered by whoever started baton, output captured, failures mapped to
//! [`Error::Git`] carrying the command line and git's stderr.

use std::ffi::OsStr;
#[cfg(test)]
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use crate::error::{Error, Result};

/// Variables through which a parent git process (a hook, `git rebase -x`, an editor
/// plugin) points its children at *its* repository. This is the list printed by
/// `git rev-parse --local-env-vars`, which git itself clears when it enters a
/// submodule; leaking one would make a command aimed at a job's worktree act on another
/// repository or index.
const LOCAL_ENV_VARS: &[&str] = &[
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR",
    // Not in git's list, but they change which repository or refs a command sees.
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
];

/// Git run in one directory.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    dir: PathBuf,
    /// Extra environment, only for unit tests that need an isolated global config.
    #[cfg(test)]
    env: Vec<(OsString, OsString)>,
}

/// Shorthand for building argument lists that mix `&str` and paths.
pub(crate) fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

impl Git {
    pub(crate) fn new(dir: &Path) -> Self {
        Git {
            dir: dir.to_path_buf(),
            #[cfg(test)]
            env: Vec::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn with_env(mut self, key: &str, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    fn command(&self, args: &[&OsStr]) -> Command {
        let mut cmd = Command::new("git");
        for var in LOCAL_ENV_VARS {
            cmd.env_remove(var);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_EDITOR", ":")
            .env("GIT_PAGER", "cat")
            .env("LC_ALL", "C")
            .env("LANGUAGE", "C")
            // Every path baton passes is a literal file name, never a glob or magic.
            .env("GIT_LITERAL_PATHSPECS", "1")
            // Read-only commands (status in gc) must not take the index lock of a worktree
            // whose job is committing at the same moment.
            .env("GIT_OPTIONAL_LOCKS", "0")
            .arg("-C")
            .arg(&self.dir)
            .arg("--no-pager")
            // User hooks (pre-commit linters, post-checkout scripts) would make turn
            // commits slow, interactive or refusable; baton's commits are checkpoints,
            // the human's own commits still run them.
            .args(["-c", "core.hooksPath=/dev/null"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Its own process group: a Ctrl-C at the terminal reaches baton's group, and
        // baton decides what to stop; killed mid-`add`, git would fail the turn instead.
        // (`process_group` keeps std's posix_spawn path: no fork cost.)
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
        }
        #[cfg(test)]
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// The command line as a person would type it, for error messages.
    pub(crate) fn describe(&self, args: &[&OsStr]) -> String {
        let mut line = format!("git -C {}", quote(self.dir.as_os_str()));
        for arg in args {
            line.push(' ');
            line.push_str(&quote(arg));
        }
        line
    }

    /// Runs and returns the raw output whatever the exit status, for commands whose exit
    /// code is an answer (`merge-base --is-ancestor`, `symbolic-ref -q`).
    pub(crate) fn output(&self, args: &[&OsStr]) -> Result<Output> {
        self.command(args)
            .output()
            .map_err(|source| Error::GitUnavailable { source })
    }

    /// Runs and returns stdout; a non-zero exit is [`Error::Git`].
    pub(crate) fn run(&self, args: &[&OsStr]) -> Result<Vec<u8>> {
        let out = self.output(args)?;
        self.check(args, out)
    }

    /// Like [`Git::run`], with `input` written to git's stdin.
    pub(crate) fn run_with_input(&self, args: &[&OsStr], input: &[u8]) -> Result<Vec<u8>> {
        let mut child = self.spawn(args)?;
        let Some(mut stdin) = child.stdin.take() else {
            return Err(self.unexpected(args, "git's stdin was not captured"));
        };
        // Written on its own thread so a large input cannot deadlock against a full
        // stdout pipe. A write error means git exited early; its status says why.
        let out = std::thread::scope(|s| {
            s.spawn(move || {
                let _ = stdin.write_all(input);
            });
            child.wait_with_output()
        })
        .map_err(|source| Error::GitUnavailable { source })?;
        self.check(args, out)
    }

    /// Starts git with piped stdin/stdout for streaming protocols (`cat-file --batch`).
    pub(crate) fn spawn(&self, args: &[&OsStr]) -> Result<Child> {
        self.command(args)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|source| Error::GitUnavailable { source })
    }

    /// Runs and returns stdout as one trimmed line of text.
    pub(crate) fn line(&self, args: &[&OsStr]) -> Result<String> {
        let out = self.run(args)?;
        let text = String::from_utf8(out)
            .map_err(|_| self.unexpected(args, "output is not valid UTF-8"))?;
        Ok(text.trim_end_matches(['\n', '\r']).to_owned())
    }

    pub(crate) fn check(&self, args: &[&OsStr], out: Output) -> Result<Vec<u8>> {
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(self.failure(args, &out))
        }
    }

    pub(crate) fn failure(&self, args: &[&OsStr], out: &Output) -> Error {
        Error::Git {
            command: self.describe(args),
            code: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        }
    }

    pub(crate) fn unexpected(&self, args: &[&OsStr], detail: impl Into<String>) -> Error {
        Error::UnexpectedOutput {
            command: self.describe(args),
            detail: detail.into(),
        }
    }
}

fn quote(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:^@%{}+,".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A git-reported path as UTF-8 text.
pub(crate) fn utf8_path(bytes: &[u8]) -> Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::NonUtf8Path {
        lossy: String::from_utf8_lossy(bytes).into_owned(),
    })
}

/// A git-reported path as a filesystem path (exact, even when not UTF-8 on Unix).
pub(crate) fn fs_path(bytes: &[u8]) -> Result<PathBuf> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(PathBuf::from(OsStr::from_bytes(bytes)))
    }
    #[cfg(not(unix))]
    {
        utf8_path(bytes).map(PathBuf::from)
    }
}

/// Splits NUL-terminated `-z` output into records, dropping the empty tail.
pub(crate) fn nul_records(out: &[u8]) -> impl Iterator<Item = &[u8]> {
    out.split(|b| *b == 0).filter(|r| !r.is_empty())
}

/// Whether two paths name the same directory, resolving symlinks when both exist
/// (git may report `/private/var/...` for a `/var/...` temporary directory).
pub(crate) fn same_path(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_quotes_spaces_and_quotes() {
        let git = Git::new(Path::new("/tmp/a b"));
        let line = git.describe(&[os("add"), os("it's"), os("-A")]);
        assert_eq!(line, r"git -C '/tmp/a b' add 'it'\''s' -A");
    }

    #[test]
    fn parent_git_dir_does_not_leak_into_commands() {
        let git = Git::new(Path::new("/"));
        let cmd = git.command(&[]);
        let removed: Vec<_> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for var in ["GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"] {
            assert!(removed.iter().any(|r| r == var), "{var} not removed");
        }
    }
}
