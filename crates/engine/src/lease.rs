//! A run is advanced by one process at a time: the process takes the run's lease before
//! its first model call, a heartbeat renews it, and every turn it commits is fenced with
//! the lease's token. A second `baton resume` of the same run is refused before it
//! spends anything; a process that died on this machine is recognised and taken over at
//! once, one on another machine when its lease expires.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use baton_core::ids::RunId;
use baton_store::Store;

use crate::clock::Clock;
use crate::{Error, Result};

/// How long a run lease holds without a heartbeat.
pub const DEFAULT_RUN_LEASE: Duration = Duration::from_secs(30);

/// A held run lease; renewed in the background, released when dropped.
pub struct RunLease {
    pub token: String,
    pub owner: String,
    run: RunId,
    store: Arc<dyn Store>,
    stop: Arc<AtomicBool>,
    heartbeat: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for RunLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLease")
            .field("run", &self.run)
            .field("owner", &self.owner)
            .finish()
    }
}

impl Drop for RunLease {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.heartbeat.take() {
            let _ = h.join();
        }
        // Best effort: an unreleased lease simply expires.
        let _ = self.store.release_run_lease(&self.run, &self.token);
    }
}

/// This process, as lease owners name it: `pid-<pid>@<host>`.
pub fn this_owner() -> String {
    format!("pid-{}@{}", std::process::id(), hostname())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// True when `owner` names a process on this machine that no longer exists.
pub fn owner_is_dead(owner: &str) -> bool {
    let Some(rest) = owner.strip_prefix("pid-") else {
        return false;
    };
    let Some((pid, host)) = rest.split_once('@') else {
        return false;
    };
    if host != hostname() || !std::path::Path::new("/proc/self").exists() {
        return false;
    }
    pid.parse::<u32>()
        .map(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        .unwrap_or(false)
}

/// Takes the run's lease for this process, or says who holds it.
pub fn acquire(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    run: &RunId,
    token: String,
    lease: Duration,
) -> Result<RunLease> {
    let owner = this_owner();
    // Bounded: a lease of `Duration::MAX` would wrap to a negative `i64` (a lease that
    // expired before it was taken) and overflow the heartbeat's `Instant` arithmetic.
    let lease = baton_gateway::retry_after::bounded(lease);
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let mut taken = store.try_lease_run(run, &owner, &token, clock.now(), lease_ms, false)?;
    if let Err(holder) = &taken
        && owner_is_dead(&holder.owner)
    {
        taken = store.try_lease_run(run, &owner, &token, clock.now(), lease_ms, true)?;
    }
    if let Err(holder) = taken {
        return Err(Error::Conflict(format!(
            "run {run} is being advanced by {} (its lease runs until {}); wait for it to finish — \
             if that process died on another machine, `baton resume {run}` works once the lease expires",
            holder.owner, holder.expires_at
        )));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let heartbeat = {
        let (store, clock, stop, run, token) = (
            store.clone(),
            clock.clone(),
            stop.clone(),
            run.clone(),
            token.clone(),
        );
        std::thread::spawn(move || {
            let every = lease / 3;
            let mut next = Instant::now() + every;
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(20).min(every));
                if Instant::now() < next {
                    continue;
                }
                next = Instant::now() + every;
                // A lost lease stops the heartbeat; the next turn's commit is fenced off.
                if store
                    .renew_run_lease(&run, &token, clock.now(), lease_ms)
                    .is_err()
                {
                    return;
                }
            }
        })
    };
    Ok(RunLease {
        token,
        owner,
        run: run.clone(),
        store,
        stop,
        heartbeat: Some(heartbeat),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_local_owner_is_recognised_and_a_live_one_is_not() {
        assert!(!owner_is_dead(&this_owner()), "this process is alive");
        let host = hostname();
        // Pid numbers this high are never handed out.
        assert!(owner_is_dead(&format!("pid-999999999@{host}")));
        assert!(
            !owner_is_dead("pid-999999999@some-other-machine"),
            "another machine's process: unknown"
        );
        assert!(!owner_is_dead("a worker"));
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
            roster: Roster::mock(1),
            settings: RunSettings {
                estimator: "heuristic".into(),
                ..RunSettings::default()
            },
        };
        let run = engine.create_run(&spec).unwrap();
        let mut first = engine.open(&run, None).unwrap();
        engine.lease(&mut first, Duration::MAX).unwrap();
        let mut second = engine.open(&run, None).unwrap();
        let taken = engine.lease(&mut second, Duration::from_secs(30));
        assert!(
            matches!(taken, Err(Error::Conflict(_))),
            "the first lease still holds: {taken:?}"
        );
    }
}
