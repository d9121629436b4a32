//! A run is advanced by one process at a time: the process takes the run's lease before
//! its first model call, a heartbeat renews it, and every turn it commits is fenced with
//! the lease's token. A second `baton resume` of the same run is refused before it
//! spends anything; a process that died in this pid space (this machine, or this
//! container) is recognised and taken over at once, any other when its lease expires.
//! Expiry is decided by the store's clock (the database's), never this process's:
//! machines whose clocks disagree still agree on who holds a run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use baton_core::ids::RunId;
use baton_gateway::Cancel;
use baton_store::{CancelTarget, Store};

use crate::cancel_watch::CancelWatch;
use crate::{Error, Result};

/// How long a run lease holds without a heartbeat.
pub const DEFAULT_RUN_LEASE: Duration = Duration::from_secs(30);

/// Why a heartbeat gave up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseLoss {
    /// Another process holds the lease now.
    TakenOver(String),
    /// It could not be renewed for two thirds of the lease (a database that keeps
    /// failing); the work was stopped before the lease could expire under it.
    Unrenewable(String),
}

impl std::fmt::Display for LeaseLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseLoss::TakenOver(why) | LeaseLoss::Unrenewable(why) => f.write_str(why),
        }
    }
}

type Renew = Box<dyn Fn() -> std::result::Result<(), baton_store::Error> + Send>;

/// Renews a lease at a third of its length in a background thread, until stopped or
/// dropped. A transient failure is retried soon; when the lease is taken over or
/// cannot be renewed for two thirds of it, the heartbeat records the loss, cancels
/// `cancel` (so an agent or gate in flight is killed before the lease can expire
/// under it) and stops. Callers check [`Heartbeat::lost`] before the next model call.
pub struct Heartbeat {
    stop: Arc<AtomicBool>,
    lost: Arc<Mutex<Option<LeaseLoss>>>,
    handle: Option<JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(lease: Duration, cancel: Option<Cancel>, renew: Renew) -> Heartbeat {
        // `Instant + Duration` panics on overflow: an outside lease is bounded first.
        let lease = baton_gateway::retry_after::bounded(lease);
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(Mutex::new(None));
        let handle = {
            let (stop, lost) = (stop.clone(), lost.clone());
            std::thread::spawn(move || beat(lease, &stop, &lost, cancel.as_ref(), renew))
        };
        Heartbeat {
            stop,
            lost,
            handle: Some(handle),
        }
    }

    pub fn lost(&self) -> Option<LeaseLoss> {
        self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops renewing (waits for the thread).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop();
    }
}

fn beat(
    lease: Duration,
    stop: &AtomicBool,
    lost: &Mutex<Option<LeaseLoss>>,
    cancel: Option<&Cancel>,
    renew: Renew,
) {
    let every = lease / 3;
    // Renewals run on a thread of their own, so that one the database never answers
    // (a network partition leaves a connection hanging, with no error for minutes)
    // cannot keep this loop from giving up in time: the work must stop before the
    // lease can expire under it, answer or not. A renewal left hanging ends with the
    // process, or when its call returns.
    let (ask, asked) = std::sync::mpsc::channel::<()>();
    let (answer, answers) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        while asked.recv().is_ok() {
            if answer.send(renew()).is_err() {
                return;
            }
        }
    });
    let mut last_renewed = Instant::now();
    let mut next = last_renewed + every;
    let mut in_flight = false;
    let mut last_error: Option<baton_store::Error> = None;
    let give_up = |why: LeaseLoss| {
        *lost.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        if let Some(c) = cancel {
            c.cancel();
        }
    };
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(20).min(every));
        if in_flight && let Ok(renewed) = answers.try_recv() {
            in_flight = false;
            match renewed {
                Ok(()) => {
                    last_renewed = Instant::now();
                    next = last_renewed + every;
                    last_error = None;
                }
                Err(
                    baton_store::Error::LeaseLost { reason, .. }
                    | baton_store::Error::RunLeaseLost { reason, .. },
                ) => {
                    give_up(LeaseLoss::TakenOver(reason));
                    return;
                }
                Err(e) => {
                    last_error = Some(e);
                    // A transient failure (a busy database): try again soon rather
                    // than a third of a lease later.
                    next = Instant::now() + (every / 10).max(Duration::from_millis(50));
                }
            }
        }
        if last_renewed.elapsed() >= every * 2 {
            let why = match (&last_error, in_flight) {
                (_, true) => "the database did not answer".to_string(),
                (Some(e), false) => e.to_string(),
                (None, false) => "no renewal got through".to_string(),
            };
            give_up(LeaseLoss::Unrenewable(format!(
                "the lease could not be renewed for {:.1} s ({why}); work was stopped before the lease could run out",
                last_renewed.elapsed().as_secs_f64()
            )));
            return;
        }
        if !in_flight && Instant::now() >= next {
            if ask.send(()).is_err() {
                return;
            }
            in_flight = true;
        }
    }
}

/// A held run lease; renewed in the background, released when dropped.
pub struct RunLease {
    pub token: String,
    pub owner: String,
    /// How long the lease holds without a heartbeat, in milliseconds: what a
    /// reservation of headroom taken under it holds for between renewals.
    pub lease_ms: i64,
    run: RunId,
    store: Arc<dyn Store>,
    heartbeat: Heartbeat,
    /// Watches for `baton cancel` of the run (a foreground run; a job's run is
    /// cancelled through its job).
    watch: Option<CancelWatch>,
}

impl std::fmt::Debug for RunLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLease")
            .field("run", &self.run)
            .field("owner", &self.owner)
            .finish()
    }
}

impl RunLease {
    /// Why the lease was lost, if it was: the next turn must not start.
    pub fn lost(&self) -> Option<LeaseLoss> {
        self.heartbeat.lost()
    }

    /// From now on, `baton cancel` of the run cancels `cancel` (within a
    /// [`CANCEL_POLL`]); replaces an earlier watch.
    ///
    /// [`CANCEL_POLL`]: crate::cancel_watch::CANCEL_POLL
    pub fn watch_cancel(&mut self, cancel: Cancel) {
        self.watch = Some(CancelWatch::start(
            self.store.clone(),
            CancelTarget::Run(self.run.clone()),
            Some(self.token.clone()),
            cancel,
        ));
    }

    /// Whether `baton cancel` asked this process to stop the run.
    pub fn cancel_requested(&self) -> bool {
        self.watch.as_ref().is_some_and(CancelWatch::requested)
    }
}

impl Drop for RunLease {
    fn drop(&mut self) {
        self.heartbeat.stop();
        if self.cancel_requested() {
            // Honoured: the request names this lease only, and goes with it.
            drop(self.watch.take());
            let _ = self
                .store
                .clear_cancel(&CancelTarget::Run(self.run.clone()));
        }
        // Best effort: an unreleased lease simply expires.
        let _ = self.store.release_run_lease(&self.run, &self.token);
    }
}

/// This process, as lease owners name it: `pid-<pid>@<host>#<space>`, where `<space>`
/// names the pid space the pid counts in (see [`PidSpace`]). Where none can be named
/// it is `pid-<pid>@<host>`, the form every baton wrote before.
///
/// Shown whole (`baton jobs`, `baton work --follow`, errors), suffix and all: it is
/// also what `baton cancel --worker-process` is given, and `pid-1@app` alone would
/// name the `baton work` of every replica of a container called `app`.
pub fn this_owner() -> String {
    let pid = std::process::id();
    let host = hostname();
    match this_space() {
        PidSpace::Named(space) => format!("pid-{pid}@{host}#{space}"),
        PidSpace::HostOnly | PidSpace::Unknown => format!("pid-{pid}@{host}"),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Which pids this process sees. A host name does not say: containers given one
/// `--hostname` (or replicas of one compose service), on one kernel or on several,
/// each count pids of their own, and a pid that names no process here may be a live
/// process there.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PidSpace {
    /// A digest of this kernel's boot id, the pid namespace, and the machine id where
    /// there is one. Two processes with the same digest see the same pids. The reverse
    /// need not hold (containers that share a pid namespace but not a file system may
    /// read different machine ids); a holder there is only left to its lease's expiry.
    Named(String),
    /// No /proc (not Linux): the host name is all there is to compare, as before
    /// owners named a space. [`baton_gateway::process::is_gone`] needs /proc, so no
    /// holder is judged dead here anyway; the host name only tells `baton cancel`
    /// whether the holder's pid can be signalled from here.
    HostOnly,
    /// /proc is there but the space cannot be told (no boot id or pid namespace to
    /// read, or a /proc mounted for another pid namespace, whose numbers are not this
    /// process's): no holder is judged by its pid, every lease runs out instead.
    Unknown,
}

fn this_space() -> PidSpace {
    // Fixed for the life of the process: a process never changes pid namespace, and
    // the boot id changes only with the kernel.
    static SPACE: std::sync::OnceLock<PidSpace> = std::sync::OnceLock::new();
    SPACE.get_or_init(read_space).clone()
}

fn read_space() -> PidSpace {
    let Ok(proc_self) = std::fs::read_link("/proc/self") else {
        return PidSpace::HostOnly;
    };
    // Liveness is read from /proc/<pid> (`is_gone`), so /proc must number pids as this
    // process does: `unshare --pid --fork` without `--mount-proc` leaves the parent
    // namespace's /proc in place.
    if proc_self.to_str().and_then(|p| p.parse::<u32>().ok()) != Some(std::process::id()) {
        return PidSpace::Unknown;
    }
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id");
    match (boot_id, pid_namespace()) {
        (Ok(boot_id), Some(namespace)) => {
            let machine_id = std::fs::read_to_string("/etc/machine-id").ok();
            PidSpace::Named(space_of(&boot_id, namespace, machine_id.as_deref()))
        }
        _ => PidSpace::Unknown,
    }
}

/// The device and inode of this process's pid namespace: what tells namespaces apart
/// on one kernel (namespaces(7)). Every machine's first namespace has the same inode,
/// which is why the boot id goes into the digest too.
#[cfg(unix)]
fn pid_namespace() -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata("/proc/self/ns/pid").ok()?;
    Some((ns.dev(), ns.ino()))
}

#[cfg(not(unix))]
fn pid_namespace() -> Option<(u64, u64)> {
    None
}

/// Twelve hex digits: short enough to read in `baton jobs`, long enough that two
/// spaces (which must also share a host name to be confused) get the same digest with
/// a chance of one in 2^48.
fn space_of(boot_id: &str, (dev, ino): (u64, u64), machine_id: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(boot_id.trim());
    h.update(format!("\0{dev}:{ino}\0"));
    h.update(machine_id.unwrap_or_default().trim());
    hex::encode(&h.finalize()[..6])
}

/// The pid of the process `owner` names, when its pid counts in this process's pid
/// space (so /proc here says whether it runs).
///
/// An owner without a space was written by a baton from before owners named one
/// (still running while the fleet is upgraded), or where there is no /proc. On Linux
/// it is never judged here: it may as well be a live process in another container of
/// the same host name, and taking its work early would run it twice; its lease simply
/// expires, as another machine's does. Only a process that has no space to name
/// either (no /proc) compares host names alone, as before.
fn local_pid(owner: &str) -> Option<u32> {
    let (pid, at) = owner.strip_prefix("pid-")?.split_once('@')?;
    let (host, space) = match at.split_once('#') {
        Some((host, space)) => (host, Some(space)),
        None => (at, None),
    };
    if host != hostname() {
        return None;
    }
    match (this_space(), space) {
        (PidSpace::Named(here), Some(there)) if here == there => {}
        (PidSpace::HostOnly, None) => {}
        _ => return None,
    }
    pid.parse().ok()
}

/// True when `owner` names a process in this pid space (whether or not it still runs).
pub fn owner_is_here(owner: &str) -> bool {
    local_pid(owner).is_some()
}

/// True when `owner` names a process in this pid space that no longer exists.
pub fn owner_is_dead(owner: &str) -> bool {
    local_pid(owner).is_some_and(baton_gateway::process::is_gone)
}

/// Takes the run's lease for this process, or says who holds it.
pub fn acquire(
    store: Arc<dyn Store>,
    run: &RunId,
    token: String,
    lease: Duration,
) -> Result<RunLease> {
    acquire_inner(store, run, token, lease, false)
}

/// Takes the run's lease whoever holds it: for the holder of the job the run belongs
/// to (its lease is the proof of ownership; a worker that lost the job may still hold
/// the run's lease, stopped but not dead).
pub fn acquire_owned(
    store: Arc<dyn Store>,
    run: &RunId,
    token: String,
    lease: Duration,
) -> Result<RunLease> {
    acquire_inner(store, run, token, lease, true)
}

fn acquire_inner(
    store: Arc<dyn Store>,
    run: &RunId,
    token: String,
    lease: Duration,
    take_over: bool,
) -> Result<RunLease> {
    let owner = this_owner();
    // Bounded: a lease of `Duration::MAX` would wrap to a negative `i64` (a lease that
    // expired before it was taken) and overflow the heartbeat's `Instant` arithmetic.
    let lease = baton_gateway::retry_after::bounded(lease);
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let mut taken = store.try_lease_run(run, &owner, &token, lease_ms, take_over)?;
    if let Err(holder) = &taken
        && owner_is_dead(&holder.owner)
    {
        taken = store.try_lease_run(run, &owner, &token, lease_ms, true)?;
    }
    if let Err(holder) = taken {
        return Err(Error::RunBusy {
            run: run.to_string(),
            owner: holder.owner,
            until: holder.expires_at.to_string(),
        });
    }
    let heartbeat = {
        let (store, run, token) = (store.clone(), run.clone(), token.clone());
        Heartbeat::start(
            lease,
            None,
            Box::new(move || store.renew_run_lease(&run, &token, lease_ms)),
        )
    };
    Ok(RunLease {
        token,
        owner,
        lease_ms,
        run: run.clone(),
        store,
        heartbeat,
        watch: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_local_owner_is_recognised_and_a_live_one_is_not() {
        assert!(!owner_is_dead(&this_owner()), "this process is alive");
        // Pid numbers this high are never handed out.
        assert!(owner_is_dead(&format!("pid-999999999@{}", here())));
        assert!(
            !owner_is_dead("pid-999999999@some-other-machine"),
            "another machine's process: unknown"
        );
        assert!(!owner_is_dead("a worker"));
    }

    /// What follows the `@` in this process's owner name: the host and, where it can
    /// be told, the pid space.
    fn here() -> String {
        this_owner().split_once('@').unwrap().1.to_string()
    }

    /// Regression: two containers given one `--hostname` (or replicas of one compose
    /// service) sharing a database took each other's live jobs at once, since a pid
    /// that does not exist in one's pid namespace was taken for a dead process. The
    /// owner names its pid space now, and only a holder in this space is judged.
    #[test]
    fn a_holder_with_this_host_name_in_another_pid_space_is_neither_here_nor_dead() {
        let at = here();
        let (host, space) = at
            .split_once('#')
            .expect("Linux: the owner names its pid space");
        assert_eq!(host, hostname());
        let other = if space == "000000000000" {
            "111111111111"
        } else {
            "000000000000"
        };
        let elsewhere = format!("pid-999999999@{host}#{other}");
        assert!(!owner_is_here(&elsewhere), "{elsewhere}");
        assert!(!owner_is_dead(&elsewhere), "{elsewhere}");
    }

    #[test]
    fn a_missing_pid_in_this_pid_space_is_dead() {
        let at = here();
        let gone = format!("pid-999999999@{at}");
        assert!(owner_is_here(&gone), "{gone}");
        assert!(owner_is_dead(&gone), "{gone}");
    }

    /// On Linux, an owner without a pid space (written by a baton from before owners
    /// named one, still running during an upgrade) cannot be told apart from a process
    /// in another container of the same host name, so its lease is left to expire, as
    /// another machine's is.
    #[test]
    fn an_owner_without_a_pid_space_is_not_judged_dead_early() {
        let old = format!("pid-999999999@{}", hostname());
        assert!(!owner_is_dead(&old), "{old}");
        assert!(!owner_is_here(&old), "{old}");
    }

    #[test]
    fn the_pid_space_differs_with_the_namespace_the_boot_and_the_machine() {
        let boot = "0075bacf-34ff-4ecc-b47d-06951e674a6f\n";
        let first = space_of(boot, (4, 4026531836), Some("3d1219c7\n"));
        assert_eq!(first.len(), 12);
        assert_eq!(
            first,
            space_of(boot.trim(), (4, 4026531836), Some("3d1219c7"))
        );
        for other in [
            space_of(boot, (4, 4026532175), Some("3d1219c7")),
            space_of(
                "9f0e2c1a-0000-4ecc-b47d-06951e674a6f",
                (4, 4026531836),
                Some("3d1219c7"),
            ),
            space_of(boot, (4, 4026531836), Some("a1b2c3d4")),
            space_of(boot, (4, 4026531836), None),
        ] {
            assert_ne!(first, other);
        }
    }

    #[test]
    fn a_zombie_holder_counts_as_dead() {
        // Exited but not reaped: it will never renew a lease again.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !baton_gateway::process::is_gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let owner = format!("pid-{pid}@{}", here());
        assert!(owner_is_dead(&owner), "{owner}");
        child.wait().unwrap();
        assert!(owner_is_dead(&owner), "{owner}");
    }

    fn failing(times: usize) -> Renew {
        let calls = std::sync::atomic::AtomicUsize::new(0);
        Box::new(move || {
            if calls.fetch_add(1, Ordering::SeqCst) < times {
                Err(baton_store::Error::Busy {
                    op: "renew_run_lease",
                })
            } else {
                Ok(())
            }
        })
    }

    #[test]
    fn a_heartbeat_retries_a_transient_failure_and_reports_one_that_lasts() {
        let lease = Duration::from_millis(1500);
        // Two failures in a row, then success: retried soon, nothing lost.
        let cancel = Cancel::new();
        let mut hb = Heartbeat::start(lease, Some(cancel.clone()), failing(2));
        std::thread::sleep(Duration::from_millis(1200));
        assert_eq!(hb.lost(), None);
        assert!(!cancel.is_cancelled());
        hb.stop();
        // It keeps failing: the loss is reported, and the work cancelled, within two
        // thirds of the lease after the last renewal — before the lease can expire.
        let cancel = Cancel::new();
        let started = Instant::now();
        let hb = Heartbeat::start(lease, Some(cancel.clone()), failing(usize::MAX));
        while hb.lost().is_none() && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            matches!(hb.lost(), Some(LeaseLoss::Unrenewable(_))),
            "{:?}",
            hb.lost()
        );
        assert!(cancel.is_cancelled());
        assert!(started.elapsed() < lease, "{:?}", started.elapsed());
        // Taken over: reported at once.
        let hb = Heartbeat::start(
            lease,
            None,
            Box::new(|| {
                Err(baton_store::Error::LeaseLost {
                    job: "j".into(),
                    reason: "another worker claimed it".into(),
                })
            }),
        );
        let started = Instant::now();
        while hb.lost().is_none() && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(matches!(hb.lost(), Some(LeaseLoss::TakenOver(_))));
    }

    /// Regression: a renewal the database never answered (a network partition leaves
    /// the connection hanging, with no error for minutes) kept the heartbeat from
    /// giving up, so the agent worked on after the lease had expired and another
    /// worker had taken the job. It gives up on time now, answer or not.
    #[test]
    fn a_renewal_that_never_returns_still_gives_up_before_the_lease_expires() {
        let lease = Duration::from_millis(1500);
        let cancel = Cancel::new();
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = calls.clone();
        let started = Instant::now();
        let hb = Heartbeat::start(
            lease,
            Some(cancel.clone()),
            Box::new(move || {
                if counted.fetch_add(1, Ordering::SeqCst) > 0 {
                    std::thread::sleep(Duration::from_secs(3600));
                }
                Ok(())
            }),
        );
        while hb.lost().is_none() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let lost = hb.lost();
        assert!(
            matches!(&lost, Some(LeaseLoss::Unrenewable(why)) if why.contains("did not answer")),
            "{lost:?}"
        );
        assert!(cancel.is_cancelled());
        // Renewed once at a third, hung at two thirds: given up by a third after that.
        assert!(
            started.elapsed() < lease + lease / 3,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    /// Regression: a lease of `Duration::MAX` became -1 ms (`as i64` wraps), so it
    /// had expired before it was taken and a second process could take the run over;
    /// its heartbeat also overflowed `Instant`. It is bounded now.
    #[test]
    fn a_huge_lease_is_bounded_and_still_holds() {
        use crate::config::{Roster, RunSettings};
        use crate::{Engine, RunSpec};

        let store: Arc<dyn Store> = Arc::new(baton_store::SqliteStore::open_in_memory().unwrap());
        let engine = Engine::new(store);
        let spec = RunSpec {
            objective: "o".into(),
            tasks: vec!["t".into()],
            step_budgets: Vec::new(),
            step_seats: Vec::new(),
            step_tags: Vec::new(),
            step_scopes: Vec::new(),
            roster: Roster::mock(1),
            settings: RunSettings {
                estimator: baton_core::tokens::EstimatorKind::Heuristic,
                ..RunSettings::default()
            },
        };
        let run = engine.create_run(&spec).unwrap();
        let mut first = engine.open(&run, None).unwrap();
        engine.lease(&mut first, Duration::MAX).unwrap();
        let mut second = engine.open(&run, None).unwrap();
        let taken = engine.lease(&mut second, Duration::from_secs(30));
        assert!(
            matches!(taken, Err(Error::RunBusy { .. })),
            "the first lease still holds: {taken:?}"
        );
    }
}
