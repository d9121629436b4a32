//! The repository's shared exclude file (`<common dir>/info/exclude`): baton lists its
//! scratch directory and the paths agents write for themselves there, so neither the
//! user's checkout nor any worktree commits them. The file is the user's too: it is
//! read, added to and replaced atomically, never rewritten from what baton knows.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::git::{fs_path, os};
use crate::repo::Repo;

/// A pattern for the exclude file and the comment line written above it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusion {
    pub pattern: String,
    pub why: String,
}

impl Repo {
    /// Adds each of `wanted` that the exclude file lacks, below everything already in
    /// it (kept byte for byte, whatever its encoding). Idempotent: nothing is written
    /// when every pattern is listed. The worktrees share this one file with the
    /// checkout: git has no exclude file of a worktree's own. Returns whether it wrote.
    pub fn exclude(&self, wanted: &[Exclusion]) -> Result<bool> {
        let common = self.git().run(&[
            os("rev-parse"),
            os("--path-format=absolute"),
            os("--git-common-dir"),
        ])?;
        let common = fs_path(common.strip_suffix(b"\n").unwrap_or(&common))?;
        let path = common.join("info").join("exclude");
        let existing = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            // Unreadable is not empty: writing now would drop the user's lines.
            Err(source) => return Err(io("reading", &path, source)),
        };
        let listed = |p: &str| {
            existing
                .split(|b| *b == b'\n')
                .any(|l| l.trim_ascii() == p.as_bytes())
        };
        let missing: Vec<&Exclusion> = wanted.iter().filter(|e| !listed(&e.pattern)).collect();
        if missing.is_empty() {
            return Ok(false);
        }
        let mut text = existing;
        if !text.is_empty() && !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        for e in missing {
            text.extend_from_slice(format!("# {}\n{}\n", e.why, e.pattern).as_bytes());
        }
        replace(&path, &text)?;
        Ok(true)
    }
}

/// Writes `path` whole or not at all: a sibling file, synced, renamed over it. Two
/// processes adding at once each keep the user's lines; the later one wins the rest.
fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io("creating", dir, e))?;
    let tmp: PathBuf = dir.join(format!("exclude.baton-{}", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("writing", path, source));
    }
    Ok(())
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}
