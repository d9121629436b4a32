//! Hosts as network namespaces (issue 13): each node runs in a namespace of its own,
//! with its own address on a veth pair, and reaches the PostgreSQL server over that
//! link (through a forwarder on the link's far end, since the server listens on
//! loopback only). A partition is the link taken down: nothing is closed or refused,
//! packets just stop, and connections hang, as when a host's switch port dies.
//!
//! Needs root (`ip netns`). Without it the test says so and passes, unless
//! `BATON_REQUIRE_NETNS=1` (which `.ci/run`, running as root, sets).

use super::cuttable::{Cuttable, server_addr};
use super::fleet::{Fleet, Node, executions};
use super::postgres::{Schema, server};
use std::process::Command;

/// A network namespace with a veth link to this one: this side `10.231.S.(4i+1)`, the
/// namespace's side `.(4i+2)`, a /30 of its own.
pub(super) struct Host {
    netns: String,
    /// This side's end of the veth pair (taking it down cuts the host off).
    veth: String,
    here: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Host {
    /// Host `index` of this process (at most 62: each takes a /30 of one /24).
    fn new(index: u32) -> Result<Host, String> {
        let pid = std::process::id();
        let subnet = pid % 250;
        let netns = format!("baton-{pid}-{index}");
        // Interface names are at most 15 bytes.
        let veth = format!("bt{}h{index}", pid % 1_000_000);
        let inside = format!("bt{}n{index}", pid % 1_000_000);
        let here = format!("10.231.{subnet}.{}", 4 * index + 1);
        let there = format!("10.231.{subnet}.{}", 4 * index + 2);
        ip(&["netns", "add", &netns])?;
        let host = Host {
            netns: netns.clone(),
            veth: veth.clone(),
            here: here.clone(),
        };
        ip(&[
            "link", "add", &veth, "type", "veth", "peer", "name", &inside,
        ])?;
        ip(&["link", "set", &inside, "netns", &netns])?;
        ip(&["addr", "add", &format!("{here}/30"), "dev", &veth])?;
        ip(&["link", "set", &veth, "up"])?;
        let inside_ip = |args: &[&str]| {
            let mut all = vec!["netns", "exec", netns.as_str(), "ip"];
            all.extend_from_slice(args);
            ip(&all)
        };
        inside_ip(&["addr", "add", &format!("{there}/30"), "dev", &inside])?;
        inside_ip(&["link", "set", &inside, "up"])?;
        inside_ip(&["link", "set", "lo", "up"])?;
        Ok(host)
    }

    fn link(&self, up: bool) {
        ip(&["link", "set", &self.veth, if up { "up" } else { "down" }]).unwrap();
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the pair, and so the pair.
        let _ = ip(&["netns", "del", &self.netns]);
        let _ = ip(&["link", "del", &self.veth]);
    }
}

/// `count` hosts, or why there are none (not root) when that may be said and passed.
pub(super) fn hosts(count: u32) -> Option<Vec<Host>> {
    // Numbered across the tests of this process, which run at once.
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let first = NEXT.fetch_add(count, std::sync::atomic::Ordering::Relaxed);
    match (first..first + count)
        .map(Host::new)
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(hosts) => Some(hosts),
        Err(e) if std::env::var_os("BATON_REQUIRE_NETNS").is_none() => {
            eprintln!(
                "SKIPPED: network namespaces are not available here ({e}); run as root \
                 (BATON_REQUIRE_NETNS=1 makes this a failure, as .ci/run does)"
            );
            None
        }
        Err(e) => panic!("network namespaces are required (BATON_REQUIRE_NETNS) but: {e}"),
    }
}

/// The node of `host`, reaching the server through a forwarder on the host's link.
pub(super) fn node_on(host: &Host, index: usize, schema: &Schema, sleep: &'static str) -> Node {
    let link = Cuttable::start_on(&host.here, &server_addr(&server()));
    Node::on(index, schema, 3, sleep, link, Some(host.netns.clone()))
}

#[test]
fn a_host_whose_link_goes_down_for_longer_than_its_lease_comes_back_fenced() {
    let Some(hosts) = hosts(2) else {
        return;
    };
    let (cut_host, other_host) = (&hosts[0], &hosts[1]);
    let fleet = Fleet::new("netns");
    // Host 0's agent takes 8 s; its lease holds 3 s without a heartbeat.
    let mut cut_off = node_on(cut_host, 0, &fleet.schema, "8");
    cut_off.start(&fleet.d);
    let job = fleet.node_0_at_work(&cut_off);

    // Its link goes down: no error, no reset, packets just stop.
    cut_host.link(false);
    let mut other = node_on(other_host, 1, &fleet.schema, "0");
    other.start(&fleet.d);
    let events_before = fleet.taken_over(&job.id, &other);
    // Host 0 stopped its agent before its lease could run out, link or no link.
    let slow = executions(&fleet.log)["write slow.txt"].clone();
    assert!(slow[0].end.is_none(), "host 0's agent ran on: {slow:?}");

    cut_host.link(true);
    fleet.fenced_off(&job.id, &cut_off, events_before);
    // It gave up within its lease, though its renewal hung unanswered (regression:
    // the heartbeat waited on the hanging call, and the agent worked on past the
    // lease while host 1 held the job).
    let said = cut_off.said();
    let gave_up_after: f64 = said
        .split("could not be renewed for ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("host 0 did not say when it gave up:\n{said}"));
    assert!(gave_up_after < 3.0, "{said}");
    fleet.works_again(&mut cut_off, other);
}
