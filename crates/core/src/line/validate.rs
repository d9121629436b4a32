//! A route's load-time validation: every problem at once, each saying what to fix.
//!
//! Without a roster the route is checked as data (names, order, rounds, seats). With
//! one, also whether every seat can be staffed: someone qualified, and for a seat that
//! reviews work, someone of another family than every possible writer of that work.

use std::collections::BTreeSet;
use std::fmt;

use thiserror::Error;

use super::route::{Route, SeatSpec, Station, StationKind};
use crate::router::{Candidate, SEAT_GROUPS, Seat, SeatId};

/// The workers and seat policies a route is checked against.
#[derive(Debug, Clone, Copy)]
pub struct Roster<'a> {
    pub candidates: &'a [Candidate],
    /// Configured seats (narrowing); a seat not listed has none.
    pub seats: &'a [Seat],
}

impl Roster<'_> {
    /// The enabled workers who may take `seat` (their globs and the seat's narrowing).
    fn staff(&self, seat: &SeatId) -> Vec<&Candidate> {
        let configured = self.seats.iter().find(|s| &s.id == seat);
        self.candidates
            .iter()
            .filter(|c| {
                c.enabled && c.qualifies_for(seat) && configured.is_none_or(|s| s.admits(c))
            })
            .collect()
    }

    fn families(&self, seat: &SeatId) -> BTreeSet<&str> {
        self.staff(seat)
            .into_iter()
            .map(|c| c.family.as_str())
            .collect()
    }
}

/// One thing wrong with a route.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RouteProblem {
    #[error("the route is not valid TOML for a route: {detail}")]
    Toml { detail: String },
    #[error("the route has no stations; add [[stations]] entries (id, kind, seats)")]
    Empty,
    #[error("station {station}: the name is used twice; give each station its own id")]
    DuplicateStation { station: String },
    #[error(
        "station {station}: a second {kind} station would pass the line through {kind} twice (a cycle, first at {first}); merge them into one, and send fix rounds back with back_to"
    )]
    RepeatedKind {
        station: String,
        kind: StationKind,
        first: String,
    },
    #[error(
        "station {station} ({kind}) comes after {after} ({after_kind}); the line's order is {order}: move it"
    )]
    OutOfOrder {
        station: String,
        kind: StationKind,
        after: String,
        after_kind: StationKind,
        order: OrderList,
    },
    #[error(
        "station {station} ({kind}) has no seats; give it at least one, e.g. seats = [{{ seat = \"{example}\" }}]"
    )]
    NoSeats {
        station: String,
        kind: StationKind,
        example: String,
    },
    #[error("station {station} ({kind}) has no model, so no seats; remove seats")]
    SeatsNotAllowed { station: String, kind: StationKind },
    #[error(
        "station {station}: {field} does not apply to a {kind} station; remove it (it applies to {applies})"
    )]
    FieldNotAllowed {
        station: String,
        kind: StationKind,
        field: &'static str,
        applies: &'static str,
    },
    #[error(
        "station {station}: \"{seat}\" is not a seat this station asks for; a {kind} station's {role} are named {group}.* (e.g. {example})"
    )]
    UnknownSeat {
        station: String,
        kind: StationKind,
        seat: SeatId,
        role: &'static str,
        group: &'static str,
        example: &'static str,
    },
    #[error(
        "station {station}: seat {seat} does not review work, and the plan loop's seats attack the plan; use plan.scrutiny"
    )]
    NotAReviewSeat { station: String, seat: SeatId },
    #[error("station {station}: seat {seat} has count = 0; give it 1 or more lanes, or remove it")]
    ZeroCount { station: String, seat: SeatId },
    #[error(
        "station {station}: seat {seat} wants lanes of different families but has count = 1; give it count = 2 or more, or drop distinct_families"
    )]
    OneDistinctLane { station: String, seat: SeatId },
    #[error(
        "station {station}: {field} = {value} is more than the line takes ({max}); a number this large is a typo, give a smaller one"
    )]
    TooMany {
        station: String,
        field: &'static str,
        value: u32,
        max: u32,
    },
    #[error("station {station}: max_parallel = 0 runs nothing; give it 1 or more, or leave it out")]
    ZeroParallel { station: String },
    #[error(
        "station {station} ({kind}) runs in rounds: add rounds = {{ until = \"nothing_new\", limit = 4 }}"
    )]
    MissingRounds { station: String, kind: StationKind },
    #[error(
        "station {station}: a round limit of 0 runs no round; give limit = 1 or more (reaching it without converging asks a human)"
    )]
    ZeroRounds { station: String },
    #[error(
        "station {station}: every build step stops at a checkpoint; add checkpoint = {{ find = \"checkpoint.find\", confirm = \"checkpoint.confirm\" }}"
    )]
    MissingCheckpoint { station: String },
    #[error(
        "station {station}: the checkpoint's find and confirm are both {seat}; confirmation is by a different worker, so give confirm its own seat (checkpoint.confirm)"
    )]
    SameCheckpointSeat { station: String, seat: SeatId },
    #[error(
        "station {station}: checkpoint passes for tag {tag} = 0 checks nothing; give 1 or more"
    )]
    ZeroPasses { station: String, tag: String },
    #[error(
        "station {station}: back_to = \"{target}\" names no station of this route; name one of {known}"
    )]
    UnknownTarget {
        station: String,
        target: String,
        known: String,
    },
    #[error(
        "station {station}: back_to = \"{target}\" is not an earlier station, so the route would loop forward (a cycle); name an earlier station (usually the build)"
    )]
    NotBackward { station: String, target: String },
    #[error(
        "station {station} ({kind}) needs a {needs} station before it; add one, or remove this one"
    )]
    MissingPrerequisite {
        station: String,
        kind: StationKind,
        needs: StationKind,
    },
    #[error(
        "station {station} builds the locked plan's steps, and no earlier station locks the plan; set lock = true on {candidate}"
    )]
    UnlockedPlan { station: String, candidate: String },
    #[error(
        "station {station}: no worker in the roster can take seat {seat}; give a worker qualified = [\"{seat}\"] (or a glob that covers it), or widen the seat's qualified"
    )]
    Unstaffed { station: String, seat: SeatId },
    #[error(
        "station {station}: seat {seat} could only be filled by family {family}, which can also write the work it reviews ({writers}); a writer is never reviewed by its own family: qualify a worker of another family for {seat}, or keep {family} out of {writers}"
    )]
    WriterFamilyOnly {
        station: String,
        seat: SeatId,
        family: String,
        writers: String,
    },
    #[error(
        "station {station}: {confirm} could only be held by {worker}, who can also hold {find}; a checkpoint is confirmed by a different worker than the one that found it: qualify a second worker for {confirm}"
    )]
    ConfirmByFinder {
        station: String,
        find: SeatId,
        confirm: SeatId,
        worker: String,
    },
    #[error(
        "station {station}: seat {seat} wants {count} lanes of different families and the roster qualifies {found} ({families}); qualify workers of more families, or lower count"
    )]
    TooFewFamilies {
        station: String,
        seat: SeatId,
        count: u32,
        found: usize,
        families: String,
    },
}

/// The line's order of kinds, as a problem names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderList;

impl fmt::Display for OrderList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = StationKind::ALL.iter().map(|k| k.as_str()).collect();
        f.write_str(&names.join(", "))
    }
}

/// Every problem of a route, in the order found (route level, then station by station).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct RouteErrors(pub Vec<RouteProblem>);

impl fmt::Display for RouteErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "{n} problem{} in the route",
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.0 {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

pub(super) fn problems(route: &Route, roster: Option<&Roster<'_>>) -> Vec<RouteProblem> {
    let mut out = Vec::new();
    if route.stations.is_empty() {
        out.push(RouteProblem::Empty);
        return out;
    }
    order(route, &mut out);
    for (i, station) in route.stations.iter().enumerate() {
        fields(station, &mut out);
        seats(station, &mut out);
        back_to(route, i, station, &mut out);
        prerequisites(route, i, station, &mut out);
    }
    if let Some(roster) = roster {
        for (i, station) in route.stations.iter().enumerate() {
            staffing(route, i, station, roster, &mut out);
        }
    }
    out
}

/// Names once, kinds once, kinds in the line's order.
fn order(route: &Route, out: &mut Vec<RouteProblem>) {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    let mut kinds: Vec<(StationKind, &str)> = Vec::new();
    let mut latest: Option<&Station> = None;
    for s in &route.stations {
        if !names.insert(&s.id) {
            out.push(RouteProblem::DuplicateStation {
                station: s.id.clone(),
            });
        }
        if let Some((_, first)) = kinds.iter().find(|(k, _)| *k == s.kind) {
            out.push(RouteProblem::RepeatedKind {
                station: s.id.clone(),
                kind: s.kind,
                first: first.to_string(),
            });
            continue;
        }
        kinds.push((s.kind, &s.id));
        match latest {
            Some(prev) if prev.kind > s.kind => out.push(RouteProblem::OutOfOrder {
                station: s.id.clone(),
                kind: s.kind,
                after: prev.id.clone(),
                after_kind: prev.kind,
                order: OrderList,
            }),
            _ => latest = Some(s),
        }
    }
}

/// The most lanes of a seat, rounds, find passes or parallel seats a route may ask for:
/// far above any real route, and low enough that a typo (`count = 1000000`) is refused
/// at load instead of asking for a million seat turns.
pub const MAX_NUMBER: u32 = 100;

fn too_many(s: &Station, field: &'static str, value: u32, out: &mut Vec<RouteProblem>) {
    if value > MAX_NUMBER {
        out.push(RouteProblem::TooMany {
            station: s.id.clone(),
            field,
            value,
            max: MAX_NUMBER,
        });
    }
}

/// Fields that only some kinds of station take, and their values.
fn fields(s: &Station, out: &mut Vec<RouteProblem>) {
    if let Some(r) = &s.rounds {
        too_many(s, "rounds.limit", r.limit, out);
    }
    if let Some(k) = s.max_parallel {
        too_many(s, "max_parallel", k, out);
    }
    for spec in &s.seats {
        too_many(s, "count", spec.count, out);
    }
    if let Some(c) = &s.checkpoint {
        for n in c.passes.values() {
            too_many(s, "checkpoint passes", *n, out);
        }
    }
    let mut refuse = |field, applies| {
        out.push(RouteProblem::FieldNotAllowed {
            station: s.id.clone(),
            kind: s.kind,
            field,
            applies,
        })
    };
    let kind = s.kind;
    if s.lead.is_some() && !matches!(kind, StationKind::Discovery | StationKind::Plan) {
        refuse("lead", "discovery and plan");
    }
    if s.checkpoint.is_some() && kind != StationKind::Build {
        refuse("checkpoint", "build");
    }
    if s.lock && !matches!(kind, StationKind::Plan | StationKind::PlanLoop) {
        refuse("lock", "plan and plan_loop");
    }
    if s.back_to.is_some()
        && !matches!(
            kind,
            StationKind::Review | StationKind::Synthesis | StationKind::Gate
        )
    {
        refuse("back_to", "review, synthesis and gate");
    }
    if s.rounds.is_some() && !kind.has_rounds() {
        refuse("rounds", "plan_loop and review");
    }
    if s.max_parallel.is_some() && !kind.has_seats() {
        refuse("max_parallel", "stations with seats");
    }
    if kind.has_rounds() && s.rounds.is_none() {
        out.push(RouteProblem::MissingRounds {
            station: s.id.clone(),
            kind,
        });
    }
    if s.rounds.as_ref().is_some_and(|r| r.limit == 0) {
        out.push(RouteProblem::ZeroRounds {
            station: s.id.clone(),
        });
    }
    if s.max_parallel == Some(0) {
        out.push(RouteProblem::ZeroParallel {
            station: s.id.clone(),
        });
    }
    if kind == StationKind::Build {
        match &s.checkpoint {
            None => out.push(RouteProblem::MissingCheckpoint {
                station: s.id.clone(),
            }),
            Some(c) => {
                for (seat, role) in [
                    (&c.find, "checkpoint find"),
                    (&c.confirm, "checkpoint confirm"),
                ] {
                    if group_of(seat) != "checkpoint" {
                        out.push(unknown(s, seat, role, "checkpoint", "checkpoint.find"));
                    }
                }
                if c.find == c.confirm {
                    out.push(RouteProblem::SameCheckpointSeat {
                        station: s.id.clone(),
                        seat: c.find.clone(),
                    });
                }
                for (tag, n) in &c.passes {
                    if *n == 0 {
                        out.push(RouteProblem::ZeroPasses {
                            station: s.id.clone(),
                            tag: tag.clone(),
                        });
                    }
                }
            }
        }
    }
}

fn group_of(seat: &SeatId) -> &str {
    seat.as_str().split('.').next().unwrap_or("")
}

fn unknown(
    s: &Station,
    seat: &SeatId,
    role: &'static str,
    group: &'static str,
    example: &'static str,
) -> RouteProblem {
    RouteProblem::UnknownSeat {
        station: s.id.clone(),
        kind: s.kind,
        seat: seat.clone(),
        role,
        group,
        example,
    }
}

fn example_seat(kind: StationKind) -> &'static str {
    match kind {
        StationKind::Intake => "lead.intake",
        StationKind::Discovery => "discovery.deep",
        StationKind::Plan => "plan.co-draft",
        StationKind::PlanLoop => "plan.scrutiny",
        StationKind::Build => "build.hard-step",
        StationKind::Review => "review.fresh-eyes",
        StationKind::Synthesis | StationKind::Gate | StationKind::Merge => "",
    }
}

fn seats(s: &Station, out: &mut Vec<RouteProblem>) {
    let Some(group) = s.kind.seat_group() else {
        if !s.seats.is_empty() {
            out.push(RouteProblem::SeatsNotAllowed {
                station: s.id.clone(),
                kind: s.kind,
            });
        }
        return;
    };
    let example = example_seat(s.kind);
    if s.seats.is_empty() {
        out.push(RouteProblem::NoSeats {
            station: s.id.clone(),
            kind: s.kind,
            example: example.to_string(),
        });
    }
    for spec in &s.seats {
        seat_spec(s, spec, group, example, out);
    }
    if let Some(lead) = &s.lead
        && group_of(lead) != "lead"
    {
        out.push(unknown(s, lead, "lead", "lead", "lead.plan"));
    }
}

fn seat_spec(
    s: &Station,
    spec: &SeatSpec,
    group: &'static str,
    example: &'static str,
    out: &mut Vec<RouteProblem>,
) {
    let seat = &spec.seat;
    // A name outside every group is a typo whatever the station; one in another
    // station's group is a seat this station never asks for. Both are unknown here.
    if group_of(seat) != group || !SEAT_GROUPS.contains(&group_of(seat)) {
        out.push(unknown(s, seat, "seats", group, example));
    } else if s.kind == StationKind::PlanLoop && !seat.reviews_work() {
        out.push(RouteProblem::NotAReviewSeat {
            station: s.id.clone(),
            seat: seat.clone(),
        });
    }
    if spec.count == 0 {
        out.push(RouteProblem::ZeroCount {
            station: s.id.clone(),
            seat: seat.clone(),
        });
    } else if spec.distinct_families && spec.count == 1 {
        out.push(RouteProblem::OneDistinctLane {
            station: s.id.clone(),
            seat: seat.clone(),
        });
    }
    if spec.repeat && !s.kind.has_rounds() {
        out.push(RouteProblem::FieldNotAllowed {
            station: s.id.clone(),
            kind: s.kind,
            field: "a seat's repeat",
            applies: "plan_loop and review",
        });
    }
    if !spec.tags.is_empty() && s.kind != StationKind::Build {
        out.push(RouteProblem::FieldNotAllowed {
            station: s.id.clone(),
            kind: s.kind,
            field: "a seat's tags",
            applies: "build",
        });
    }
}

fn back_to(route: &Route, at: usize, s: &Station, out: &mut Vec<RouteProblem>) {
    let Some(target) = &s.back_to else { return };
    match route.stations.iter().position(|x| &x.id == target) {
        None => out.push(RouteProblem::UnknownTarget {
            station: s.id.clone(),
            target: target.clone(),
            known: route
                .stations
                .iter()
                .map(|x| x.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }),
        Some(i) if i >= at => out.push(RouteProblem::NotBackward {
            station: s.id.clone(),
            target: target.clone(),
        }),
        Some(_) => {}
    }
}

fn prerequisites(route: &Route, at: usize, s: &Station, out: &mut Vec<RouteProblem>) {
    let before = &route.stations[..at];
    let has = |kind| before.iter().any(|x: &Station| x.kind == kind);
    let needs = match s.kind {
        StationKind::PlanLoop | StationKind::Build => Some(StationKind::Plan),
        StationKind::Synthesis => Some(StationKind::Review),
        _ => None,
    };
    if let Some(needs) = needs
        && !has(needs)
    {
        out.push(RouteProblem::MissingPrerequisite {
            station: s.id.clone(),
            kind: s.kind,
            needs,
        });
        return;
    }
    if s.kind == StationKind::Build && !before.iter().any(|x| x.lock) {
        let candidate = before
            .iter()
            .rev()
            .find(|x| matches!(x.kind, StationKind::PlanLoop | StationKind::Plan))
            .map_or_else(|| "the plan station".to_string(), |x| x.id.clone());
        out.push(RouteProblem::UnlockedPlan {
            station: s.id.clone(),
            candidate,
        });
    }
}

/// The seats whose work `station` reviews: for the plan loop, the plan's drafts; for a
/// build's checkpoint and a review, the build's steps (else the plan's).
fn writer_seats<'r>(route: &'r Route, at: usize, station: &'r Station) -> Vec<&'r SeatId> {
    let wrote = |kind| {
        route.stations[..=at]
            .iter()
            .rev()
            .find(|x: &&Station| x.kind == kind)
            .map(|x| x.seats.iter().map(|s| &s.seat).collect::<Vec<_>>())
    };
    match station.kind {
        StationKind::PlanLoop => wrote(StationKind::Plan).unwrap_or_default(),
        StationKind::Build | StationKind::Review => wrote(StationKind::Build)
            .or_else(|| wrote(StationKind::Plan))
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn staffing(
    route: &Route,
    at: usize,
    s: &Station,
    roster: &Roster<'_>,
    out: &mut Vec<RouteProblem>,
) {
    let mut all: Vec<&SeatId> = s.seats.iter().map(|x| &x.seat).collect();
    all.extend(&s.lead);
    if let Some(c) = &s.checkpoint {
        all.push(&c.find);
        all.push(&c.confirm);
    }
    let writers = writer_seats(route, at, s);
    let writer_families: BTreeSet<&str> = writers.iter().flat_map(|w| roster.families(w)).collect();
    for seat in all {
        let staff = roster.staff(seat);
        if staff.is_empty() {
            out.push(RouteProblem::Unstaffed {
                station: s.id.clone(),
                seat: seat.clone(),
            });
            continue;
        }
        let families = roster.families(seat);
        // One family only, and a writer could be of it: whenever the router seats the
        // writer from that family, nobody is left to review.
        if seat.reviews_work()
            && families.len() == 1
            && let Some(family) = families.iter().next()
            && writer_families.contains(family)
        {
            out.push(RouteProblem::WriterFamilyOnly {
                station: s.id.clone(),
                seat: seat.clone(),
                family: family.to_string(),
                writers: writers
                    .iter()
                    .map(|w| w.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
    }
    if let Some(c) = &s.checkpoint
        && let [only] = roster.staff(&c.confirm)[..]
        && roster.staff(&c.find).iter().any(|f| f.id == only.id)
    {
        out.push(RouteProblem::ConfirmByFinder {
            station: s.id.clone(),
            find: c.find.clone(),
            confirm: c.confirm.clone(),
            worker: only.id.to_string(),
        });
    }
    for spec in &s.seats {
        let families = roster.families(&spec.seat);
        if spec.distinct_families && !families.is_empty() && (families.len() as u32) < spec.count {
            out.push(RouteProblem::TooFewFamilies {
                station: s.id.clone(),
                seat: spec.seat.clone(),
                count: spec.count,
                found: families.len(),
                families: families.into_iter().collect::<Vec<_>>().join(", "),
            });
        }
    }
}
