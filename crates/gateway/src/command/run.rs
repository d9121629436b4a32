//! Running one agent process: spawn in its own session, feed the briefing, copy
//! stdout and stderr to files as they come (no size ceiling), watch liveness, and kill
//! the whole process group when a limit is crossed.
//!
//! Two reader threads copy the pipes to disk through a fixed buffer; they also keep a
//! bounded tail of each stream in memory (for claim parsing and error messages) and
//! stamp the time of the last output. The calling thread only watches: it polls the
//! child, the clock and the shared state, and never touches the pipes, so a child
//! that fills both pipes at once cannot deadlock against us.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::cancel::Cancel;
use crate::process;

/// Bytes kept in memory from the end of stdout: enough for any claim an agent prints
/// last. The file on disk has everything.
pub(crate) const STDOUT_TAIL: usize = 1 << 20;
/// Bytes kept from the end of stderr, for error messages.
pub(crate) const STDERR_TAIL: usize = 64 << 10;
/// The copy buffer of each reader thread.
const COPY_BUFFER: usize = 64 << 10;
/// How often the watcher looks at the clock while output is still flowing.
const WATCH_TICK: Duration = Duration::from_millis(50);
/// After both pipes close, the watcher polls for the exit at most this far apart
/// for [`CLOSE_POLL_WINDOW`], then every [`WATCH_TICK`].
const CLOSE_POLL_MAX: Duration = Duration::from_millis(1);
const CLOSE_POLL_WINDOW: Duration = Duration::from_millis(200);
/// After the agent exits, how long stragglers that inherited its pipes (a background
/// process it started) may keep them open before the group is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// Between SIGTERM and SIGKILL when a limit is crossed.
const KILL_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Whole run.
    pub total: Duration,
    /// Longest stretch without any output.
    pub silence: Duration,
    /// Silence after a line that looks like a prompt.
    pub prompt_silence: Duration,
}

pub(crate) struct RunSpec<'a> {
    pub argv: &'a [String],
    pub cwd: &'a Path,
    pub env: &'a [(String, OsString)],
    /// Written to the child's stdin, which is then closed; `None` gives it /dev/null.
    pub stdin: Option<&'a [u8]>,
    pub stdout_path: &'a Path,
    pub stderr_path: &'a Path,
    pub limits: Limits,
    /// Stops the agent (and what it started) when cancelled.
    pub cancel: Option<&'a Cancel>,
    /// Gets each line of output as it comes.
    pub output: Option<crate::OutputSink>,
}

/// A process that ran to its end (successfully or not).
#[derive(Debug)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    /// Set when the process exited (or closed its stdin) before reading its briefing.
    pub briefing_unread: Option<Unread>,
    pub stdout_tail: Vec<u8>,
    pub stderr_tail: Vec<u8>,
    pub stdout_bytes: u64,
}

/// Why a process did not run to its end.
#[derive(Debug)]
pub(crate) enum Stopped {
    Spawn {
        program: String,
        source: io::Error,
    },
    Io {
        what: String,
        source: io::Error,
    },
    TimedOut {
        after: Duration,
    },
    Silent {
        for_: Duration,
    },
    WaitingForInput {
        line: String,
    },
    /// The turn was cancelled (an interrupt, or the job's lease was lost).
    Cancelled,
}

#[derive(Debug)]
struct Stream {
    tail: Vec<u8>,
    cap: usize,
    bytes: u64,
}

impl Stream {
    fn new(cap: usize) -> Self {
        Stream {
            tail: Vec::new(),
            cap,
            bytes: 0,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        self.bytes += chunk.len() as u64;
        self.tail.extend_from_slice(chunk);
        // Trim in amortised steps, not on every chunk.
        if self.tail.len() > 2 * self.cap {
            let excess = self.tail.len() - self.cap;
            self.tail.drain(..excess);
        }
    }

    fn into_tail(mut self) -> Vec<u8> {
        if self.tail.len() > self.cap {
            let excess = self.tail.len() - self.cap;
            self.tail.drain(..excess);
        }
        self.tail
    }
}

#[derive(Debug)]
struct Shared {
    last_output_at: Instant,
    /// Which stream wrote last: its last line is the one a prompt would be.
    last_was_stderr: bool,
    stdout: Stream,
    stderr: Stream,
}

type Locked<'a> = std::sync::MutexGuard<'a, Shared>;

fn lock(shared: &Mutex<Shared>) -> Locked<'_> {
    // A reader that panicked leaves consistent data behind: every update is a plain
    // append under the lock.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs the process to its end or until a limit stops it.
pub(crate) fn run(spec: &RunSpec<'_>) -> Result<Finished, Stopped> {
    /// Whatever the agent left running (a background job, a daemon in its own session)
    /// ends with its turn, however the turn ended — a panic included.
    struct KillOnDrop(String);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            crate::contain::kill_marked(&self.0);
        }
    }
    let mark = KillOnDrop(crate::contain::new_mark());
    run_marked(spec, &mark.0)
}

fn run_marked(spec: &RunSpec<'_>, mark: &str) -> Result<Finished, Stopped> {
    let stdout_file = create(spec.stdout_path)?;
    let stderr_file = create(spec.stderr_path)?;
    let mut child = spawn(spec, mark)?;
    let started_at = Instant::now();
    let shared = Arc::new(Mutex::new(Shared {
        last_output_at: started_at,
        last_was_stderr: false,
        stdout: Stream::new(STDOUT_TAIL),
        stderr: Stream::new(STDERR_TAIL),
    }));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut readers = Vec::with_capacity(2);
    if let Some(pipe) = child.stdout.take() {
        readers.push(copy_thread(
            pipe,
            stdout_file,
            false,
            &shared,
            done_tx.clone(),
            spec.output.clone(),
        ));
    }
    if let Some(pipe) = child.stderr.take() {
        readers.push(copy_thread(
            pipe,
            stderr_file,
            true,
            &shared,
            done_tx.clone(),
            spec.output.clone(),
        ));
    }
    drop(done_tx);
    let written = Arc::new(AtomicUsize::new(0));
    let writer = match (child.stdin.take(), spec.stdin) {
        (Some(mut pipe), Some(bytes)) => {
            let bytes = bytes.to_vec();
            let written = written.clone();
            // A thread, so a briefing bigger than the pipe buffer cannot block the
            // watcher. A child that exits without reading it gives EPIPE (SIGPIPE is
            // ignored, see the CLI's `out`): the agent's business, reported with its
            // result, never baton's death.
            Some(thread::spawn(move || {
                write_counting(&mut pipe, &bytes, &written)
            }))
        }
        _ => None,
    };

    let outcome = watch(
        &mut child,
        spec.limits,
        spec.cancel,
        started_at,
        &shared,
        &done_rx,
        readers.len(),
    );
    let status = match outcome {
        Ok(status) => status,
        Err(stop) => {
            process::terminate(&mut child, KILL_GRACE);
            finish_readers(readers, &done_rx, KILL_GRACE);
            return Err(stop);
        }
    };
    // The agent is gone; anything it left behind that still holds its pipes gets a
    // moment to finish, then goes with the group — and so does everything else it
    // started (one may hold its stdin without reading, and the briefing's writer would
    // wait on it forever).
    if !readers_finish_within(&done_rx, EXIT_GRACE) {
        process::signal_group(&child, process::Signal::Kill);
    }
    crate::contain::kill_marked(mark);
    let io_error = finish_readers(readers, &done_rx, KILL_GRACE);
    // Bounded: a process that escaped the mark may still hold the pipe unread.
    let writer_done = writer.is_none_or(|w| {
        let deadline = Instant::now() + KILL_GRACE;
        while !w.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        w.is_finished()
    });
    let total = spec.stdin.map_or(0, <[u8]>::len);
    let briefing_unread = {
        let written = written.load(Ordering::SeqCst);
        (spec.stdin.is_some() && (!writer_done || written < total))
            .then_some(Unread { written, total })
    };
    if let Some((what, source)) = io_error {
        return Err(Stopped::Io { what, source });
    }
    let shared = Arc::try_unwrap(shared)
        .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
        .unwrap_or_else(|arc| {
            // A reader is still alive (it escaped the process group); take a copy.
            let s = lock(&arc);
            Shared {
                last_output_at: s.last_output_at,
                last_was_stderr: s.last_was_stderr,
                stdout: Stream {
                    tail: s.stdout.tail.clone(),
                    cap: s.stdout.cap,
                    bytes: s.stdout.bytes,
                },
                stderr: Stream {
                    tail: s.stderr.tail.clone(),
                    cap: s.stderr.cap,
                    bytes: s.stderr.bytes,
                },
            }
        });
    Ok(Finished {
        status,
        briefing_unread,
        stdout_bytes: shared.stdout.bytes,
        stdout_tail: shared.stdout.into_tail(),
        stderr_tail: shared.stderr.into_tail(),
    })
}

/// How much of the briefing reached the agent before it stopped reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unread {
    pub written: usize,
    pub total: usize,
}

/// Writes `bytes` and closes the pipe, counting in `written` how many bytes the reader
/// accepted so far.
fn write_counting(pipe: &mut impl Write, bytes: &[u8], written: &AtomicUsize) {
    let mut done = 0;
    while done < bytes.len() {
        match pipe.write(&bytes[done..]) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                written.store(done, Ordering::SeqCst);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // BrokenPipe, mostly: the reader is gone.
            Err(_) => break,
        }
    }
}

fn create(path: &Path) -> Result<File, Stopped> {
    File::create(path).map_err(|source| Stopped::Io {
        what: format!("creating {}", path.display()),
        source,
    })
}

fn spawn(spec: &RunSpec<'_>, mark: &str) -> Result<Child, Stopped> {
    let (program, args) = spec.argv.split_first().ok_or_else(|| Stopped::Spawn {
        program: String::new(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "empty command"),
    })?;
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_os_str());
    let resolved = resolve_program(program, path, spec.cwd).ok_or_else(|| Stopped::Spawn {
        program: program.clone(),
        source: io::Error::new(
            io::ErrorKind::NotFound,
            "no such executable on the PATH the agent gets",
        ),
    })?;
    let mut cmd = Command::new(resolved);
    cmd.args(args)
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::contain::confine(&mut cmd, mark);
    cmd.spawn().map_err(|source| Stopped::Spawn {
        program: program.clone(),
        source,
    })
}

/// The program's full path, looked up the way `execvp` in the child would: a name
/// with a slash is taken relative to the workspace, a bare name is searched in the
/// child's `PATH` (relative entries again from the workspace).
///
/// Why resolve it here: std spawns with `posix_spawn` only when it need not search a
/// `PATH` of the child's own in another directory; otherwise it forks, which costs
/// milliseconds in a large process (see `benches/command.rs`).
pub(crate) fn resolve_program(
    program: &str,
    path: Option<&std::ffi::OsStr>,
    cwd: &Path,
) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(cwd.join(program));
    }
    std::env::split_paths(path?)
        .map(|dir| cwd.join(dir).join(program))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

fn copy_thread(
    mut pipe: impl Read + Send + 'static,
    mut file: File,
    is_stderr: bool,
    shared: &Arc<Mutex<Shared>>,
    done: mpsc::Sender<()>,
    output: Option<crate::OutputSink>,
) -> JoinHandle<io::Result<()>> {
    let shared = Arc::clone(shared);
    thread::spawn(move || {
        let mut buf = vec![0u8; COPY_BUFFER];
        let mut lines = output.map(|sink| LineSplitter {
            sink,
            stderr: is_stderr,
            partial: Vec::new(),
        });
        let result = loop {
            let n = match pipe.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(e),
            };
            if let Err(e) = file.write_all(&buf[..n]) {
                break Err(e);
            }
            if let Some(lines) = &mut lines {
                lines.push(&buf[..n]);
            }
            let mut s = lock(&shared);
            s.last_output_at = Instant::now();
            s.last_was_stderr = is_stderr;
            if is_stderr {
                s.stderr.push(&buf[..n]);
            } else {
                s.stdout.push(&buf[..n]);
            }
        };
        if let Some(lines) = &mut lines {
            lines.finish();
        }
        let result = result.and_then(|()| file.flush());
        let _ = done.send(());
        result
    })
}

/// Cuts a stream into lines for an [`OutputSink`](crate::OutputSink), without
/// terminal escapes; a line longer than [`MAX_SHOWN_LINE`] is passed on in pieces.
struct LineSplitter {
    sink: crate::OutputSink,
    stderr: bool,
    partial: Vec<u8>,
}

const MAX_SHOWN_LINE: usize = 4096;

impl LineSplitter {
    fn push(&mut self, chunk: &[u8]) {
        self.partial.extend_from_slice(chunk);
        while let Some(at) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=at).collect();
            self.emit(&line);
        }
        if self.partial.len() > MAX_SHOWN_LINE {
            let line = std::mem::take(&mut self.partial);
            self.emit(&line);
        }
    }

    fn finish(&mut self) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.emit(&line);
        }
    }

    fn emit(&self, raw: &[u8]) {
        let text = String::from_utf8_lossy(raw);
        // A progress bar redraws with `\r`: what is shown is its last state.
        let last = text
            .trim_end_matches(['\n', '\r'])
            .rsplit('\r')
            .next()
            .unwrap_or("");
        let clean = super::claim::strip_ansi(last);
        self.sink.send(crate::OutputLine {
            stderr: self.stderr,
            line: &clean,
        });
    }
}

fn watch(
    child: &mut Child,
    limits: Limits,
    cancel: Option<&Cancel>,
    started_at: Instant,
    shared: &Mutex<Shared>,
    done: &Receiver<()>,
    readers: usize,
) -> Result<ExitStatus, Stopped> {
    let mut open = readers;
    let mut nap = Duration::from_micros(50);
    let mut closed_at: Option<Instant> = None;
    loop {
        if let Some(status) = child.try_wait().map_err(|source| Stopped::Io {
            what: "waiting for the agent".into(),
            source,
        })? {
            return Ok(status);
        }
        if cancel.is_some_and(Cancel::is_cancelled) {
            return Err(Stopped::Cancelled);
        }
        let now = Instant::now();
        if now.duration_since(started_at) >= limits.total {
            return Err(Stopped::TimedOut {
                after: limits.total,
            });
        }
        let (silent_for, prompt) = {
            let s = lock(shared);
            let silent_for = now.saturating_duration_since(s.last_output_at);
            let prompt = (silent_for >= limits.prompt_silence)
                .then(|| {
                    let tail = if s.last_was_stderr {
                        &s.stderr.tail
                    } else {
                        &s.stdout.tail
                    };
                    prompt_line(tail)
                })
                .flatten();
            (silent_for, prompt)
        };
        if let Some(line) = prompt {
            return Err(Stopped::WaitingForInput { line });
        }
        if silent_for >= limits.silence {
            return Err(Stopped::Silent { for_: silent_for });
        }
        if open > 0 {
            match done.recv_timeout(WATCH_TICK) {
                Ok(()) => open -= 1,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => open = 0,
            }
        } else {
            // Both pipes are closed, so the exit is normally moments away: poll
            // closely for a while (a blocking wait would ignore the limits if the
            // agent closed its output and kept running), then back off.
            let closed_for = closed_at.get_or_insert(now).elapsed();
            thread::sleep(nap);
            let ceiling = if closed_for < CLOSE_POLL_WINDOW {
                CLOSE_POLL_MAX
            } else {
                WATCH_TICK
            };
            nap = (nap * 2).min(ceiling);
        }
    }
}

/// Whether every reader finishes within `grace`: each holds a sender of `done`, so
/// the channel disconnects exactly when the last one is gone.
fn readers_finish_within(done: &Receiver<()>, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match done.recv_timeout(left) {
            Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => return false,
            Err(RecvTimeoutError::Disconnected) => return true,
        }
    }
}

/// Joins the readers that finished within `grace`; one that did not (its pipe is
/// held by a process outside the group) is left to end on its own. Returns the
/// first I/O error a reader hit.
fn finish_readers(
    readers: Vec<JoinHandle<io::Result<()>>>,
    done: &Receiver<()>,
    grace: Duration,
) -> Option<(String, io::Error)> {
    // `is_finished` is the ground truth; the channel only saves busy waiting while a
    // reader still runs.
    let deadline = Instant::now() + grace;
    while readers.iter().any(|r| !r.is_finished()) && Instant::now() < deadline {
        let _ = done.recv_timeout(Duration::from_millis(10));
    }
    let mut first = None;
    for reader in readers {
        if !reader.is_finished() {
            continue;
        }
        if let Ok(Err(e)) = reader.join()
            && first.is_none()
        {
            first = Some(("saving the agent's output".to_string(), e));
        }
    }
    first
}

/// The last line of `tail` when it looks like a question waiting for an answer.
///
/// Explicit answer markers (`[y/N]`, `(y/n)`, `[yes/no]`, `password:`, `passphrase`)
/// count however the line ends. Weaker endings (`?`, `:`, `>`) count only when the
/// line is unterminated — the cursor left on it, as an input prompt does — because a
/// finished line ending in a colon ("Running tests:") is ordinary progress output.
pub(crate) fn prompt_line(tail: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(&tail[tail.len().saturating_sub(4096)..]);
    let terminated = text.ends_with('\n');
    let line = text
        .trim_end_matches(['\n', '\r'])
        .rsplit(['\n', '\r'])
        .next()
        .unwrap_or("");
    let line = strip_ansi(line);
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return None;
    }
    let lower = trimmed.to_ascii_lowercase();
    let strong = [
        "[y/n]", "(y/n)", "[yes/no]", "(yes/no)", "[y/n/a]", "(y/n/a)",
    ]
    .iter()
    .any(|m| lower.contains(m))
        || lower.ends_with("password:")
        || lower.ends_with("passphrase:")
        || lower.contains("press enter")
        || lower.contains("press any key");
    let weak = !terminated
        && (trimmed.ends_with('?')
            || trimmed.ends_with(':')
            || trimmed.ends_with('>')
            || trimmed.ends_with('$')
            || trimmed.ends_with('#'));
    (strong || weak).then(|| trimmed.chars().take(200).collect())
}

/// Drops ANSI escape sequences (colours, cursor moves) from a line.
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The last `max_lines` lines of `bytes` as text, for error messages.
pub(crate) fn tail_lines(bytes: &[u8], max_lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end();
    let mut start = text.len();
    for _ in 0..max_lines {
        match text[..start].rfind('\n') {
            Some(i) => start = i,
            None => {
                start = 0;
                break;
            }
        }
    }
    text[start..].trim_start_matches('\n').to_string()
}

/// Where the output of one run is kept.
#[derive(Debug, Clone)]
pub(crate) struct OutputPaths {
    pub dir: PathBuf,
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

impl OutputPaths {
    pub fn in_dir(dir: PathBuf) -> Self {
        OutputPaths {
            stdout: dir.join("stdout"),
            stderr: dir.join("stderr"),
            dir,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_recognised_and_progress_lines_are_not() {
        let p = |s: &str| prompt_line(s.as_bytes());
        assert_eq!(
            p("working\nDo you want to continue? [y/N] ").as_deref(),
            Some("Do you want to continue? [y/N]")
        );
        assert!(p("Overwrite file? (y/n)\n").is_some());
        assert!(p("Password:").is_some());
        assert!(p("Enter the token: ").is_some());
        assert!(p("> ").is_some());
        assert!(p("\u{1b}[1mProceed?\u{1b}[0m ").is_some());
        assert_eq!(p("Running tests:\n"), None);
        assert_eq!(p("What next?\n"), None);
        assert_eq!(p("compiling 3 crates"), None);
        assert_eq!(p(""), None);
    }

    #[test]
    fn tails_keep_the_end() {
        let mut s = Stream::new(4);
        for chunk in [&b"abc"[..], b"defgh", b"ij"] {
            s.push(chunk);
        }
        assert_eq!(s.bytes, 10);
        assert_eq!(s.into_tail(), b"ghij");
        assert_eq!(tail_lines(b"a\nb\nc\nd\n", 2), "c\nd");
        assert_eq!(tail_lines(b"only", 3), "only");
    }
}
