//! A route: the assembly line's stations in order, each with its seats, as data (TOML).
//! The default route ships built in ([`Route::default_route`]); a user's own is parsed
//! and validated by [`Route::parse`] (and against a roster by [`Route::check`]).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use serde::{Deserialize, Serialize};

use super::validate::{self, Roster, RouteErrors, RouteProblem};
use crate::router::SeatId;

/// The default route's text, shipped in the binary.
pub const DEFAULT_ROUTE: &str = include_str!("default.toml");

/// A route as written (and, once [`Route::parse`] returned it, as validated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub stations: Vec<Station>,
}

/// What a station does. The order of the variants is the order of the line: a route may
/// leave a kind out, never put one before an earlier kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StationKind {
    /// The lead asks what is wanted; an ambiguous description stops for a human.
    Intake,
    /// Independent lanes read the code; advisory, the lead merges.
    Discovery,
    /// Co-drafts of the plan; the lead merges or picks.
    Plan,
    /// Scrutiny rounds on the plan until they converge, then the plan lock.
    PlanLoop,
    /// The locked plan's steps, each stopped at a checkpoint (find, then confirm).
    Build,
    /// Review rounds until a round finds nothing new.
    Review,
    /// Findings merged into consensus, contradictions and gaps; the verdict. Computed by
    /// the engine (a pure function), so it has no seat.
    Synthesis,
    /// Mechanical checks (commands); no model.
    Gate,
    /// The branch and patch to the outbox, optionally merged; no model.
    Merge,
}

impl StationKind {
    pub const ALL: [StationKind; 9] = [
        StationKind::Intake,
        StationKind::Discovery,
        StationKind::Plan,
        StationKind::PlanLoop,
        StationKind::Build,
        StationKind::Review,
        StationKind::Synthesis,
        StationKind::Gate,
        StationKind::Merge,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StationKind::Intake => "intake",
            StationKind::Discovery => "discovery",
            StationKind::Plan => "plan",
            StationKind::PlanLoop => "plan_loop",
            StationKind::Build => "build",
            StationKind::Review => "review",
            StationKind::Synthesis => "synthesis",
            StationKind::Gate => "gate",
            StationKind::Merge => "merge",
        }
    }

    /// Whether a model works this station: its seats are required, else refused.
    pub fn has_seats(self) -> bool {
        !matches!(
            self,
            StationKind::Synthesis | StationKind::Gate | StationKind::Merge
        )
    }

    /// The seat group (`review` in `review.breadth`) this station's seats belong to.
    pub fn seat_group(self) -> Option<&'static str> {
        match self {
            StationKind::Intake => Some("lead"),
            StationKind::Discovery => Some("discovery"),
            StationKind::Plan | StationKind::PlanLoop => Some("plan"),
            StationKind::Build => Some("build"),
            StationKind::Review => Some("review"),
            StationKind::Synthesis | StationKind::Gate | StationKind::Merge => None,
        }
    }

    /// Whether the station runs in rounds to convergence (`rounds` required).
    pub fn has_rounds(self) -> bool {
        matches!(self, StationKind::PlanLoop | StationKind::Review)
    }
}

impl fmt::Display for StationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One station of a route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Station {
    /// The station's name in this route (unique): what `back_to` and the unit's status
    /// name.
    pub id: String,
    pub kind: StationKind,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seats: Vec<SeatSpec>,
    /// The seat that merges the lanes' output or picks among drafts (`lead.plan`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lead: Option<SeatId>,
    /// Rounds to convergence (plan loop, review).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<Rounds>,
    /// At most this many of the station's seats work at once (K); none: all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
    /// Every build step stops here: found by one seat, confirmed by another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// Where a fix round goes back to: an earlier station (review, synthesis, gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back_to: Option<String>,
    /// Freeze and hash the plan when this station ends (plan, plan loop).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lock: bool,
}

/// A seat at a station, with how many lanes fill it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeatSpec {
    pub seat: SeatId,
    /// Parallel lanes of this seat (`discovery.deep` ×2).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    /// Each lane's briefing holds none of the other lanes' output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blind: bool,
    /// The lanes are held by workers of different families.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub distinct_families: bool,
    /// At a build station: the step tags this seat takes (`heavy`); none: every step.
    /// Tags are the plan's, named as strings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// At a station in rounds: this seat works every round; the others only the first.
    /// When no seat of the station says so, every seat works every round.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat: bool,
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// When rounds stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rounds {
    pub until: Convergence,
    /// Rounds at most; reaching it without converging stops the line for a human.
    pub limit: u32,
}

/// A round that converges ends the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Convergence {
    /// The round raised no finding that was not already on record.
    NothingNew,
    /// The round raised no new MAJOR (or stricter) finding.
    NoNewMajor,
}

impl Convergence {
    pub fn as_str(self) -> &'static str {
        match self {
            Convergence::NothingNew => "nothing new",
            Convergence::NoNewMajor => "no new major",
        }
    }
}

/// A build station's checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    pub find: SeatId,
    pub confirm: SeatId,
    /// Find passes for a step with this tag (`heavy = 2`); one pass otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub passes: BTreeMap<String, u32>,
}

impl Checkpoint {
    /// How many find passes a step with `tags` gets: the most any of its tags asks for.
    pub fn passes_for(&self, tags: &[String]) -> u32 {
        tags.iter()
            .filter_map(|t| self.passes.get(t))
            .copied()
            .max()
            .unwrap_or(1)
    }
}

impl Route {
    /// The built-in default route.
    pub fn default_route() -> Result<Route, RouteErrors> {
        Route::parse(DEFAULT_ROUTE)
    }

    /// Parses a route file and validates it without a roster; every problem is reported
    /// at once, each saying what to fix.
    pub fn parse(text: &str) -> Result<Route, RouteErrors> {
        let route: Route = toml::from_str(text).map_err(|e| {
            RouteErrors(vec![RouteProblem::Toml {
                detail: e.to_string().trim_end().to_string(),
            }])
        })?;
        route.check(None)?;
        Ok(route)
    }

    /// Validates the route, and when `roster` is given, that every seat can be staffed
    /// within the cross-family rule.
    pub fn check(&self, roster: Option<&Roster<'_>>) -> Result<(), RouteErrors> {
        let problems = validate::problems(self, roster);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(RouteErrors(problems))
        }
    }

    pub fn station(&self, id: &str) -> Option<&Station> {
        self.stations.iter().find(|s| s.id == id)
    }

    /// The seats of every station counted with their lanes, plus the leads: the seat
    /// turns of one pass with one round each and one build step per build seat (rounds,
    /// steps, checkpoints and fix rounds depend on the unit).
    pub fn lanes(&self) -> u32 {
        self.stations
            .iter()
            .map(|s| s.seats.iter().map(|x| x.count).sum::<u32>() + u32::from(s.lead.is_some()))
            .sum()
    }

    /// The route as `baton line --check` prints it: one line a station.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "route {}: {} stations, {} seat lanes",
            self.name,
            self.stations.len(),
            self.lanes()
        );
        if let Some(d) = &self.description {
            let _ = writeln!(out, "  {d}");
        }
        let width = self.stations.iter().map(|s| s.id.len()).max().unwrap_or(0);
        for (i, s) in self.stations.iter().enumerate() {
            let _ = write!(
                out,
                "{:>3}. {:<width$}  {:<9}",
                i + 1,
                s.id,
                s.kind.as_str()
            );
            let mut parts = Vec::new();
            if s.seats.is_empty() {
                parts.push(match s.kind {
                    StationKind::Synthesis => "no seat (computed by the engine)".to_string(),
                    _ => "no model".to_string(),
                });
            }
            for seat in &s.seats {
                parts.push(describe_seat(seat));
            }
            if let Some(lead) = &s.lead {
                parts.push(format!("merged by {lead}"));
            }
            if let Some(c) = &s.checkpoint {
                let mut text = format!("checkpoint {} then {}", c.find, c.confirm);
                for (tag, n) in &c.passes {
                    let _ = write!(text, ", {n} find passes for {tag}");
                }
                parts.push(text);
            }
            if let Some(r) = &s.rounds {
                parts.push(format!(
                    "rounds until {} (at most {})",
                    r.until.as_str(),
                    r.limit
                ));
            }
            if let Some(k) = s.max_parallel {
                parts.push(format!("at most {k} at once"));
            }
            if s.lock {
                parts.push("then the plan lock".to_string());
            }
            if let Some(back) = &s.back_to {
                parts.push(format!("fixes go back to {back}"));
            }
            let _ = writeln!(out, "  {}", parts.join("; "));
        }
        out
    }
}

fn describe_seat(seat: &SeatSpec) -> String {
    let mut text = seat.seat.to_string();
    if seat.count != 1 {
        let _ = write!(text, " ×{}", seat.count);
    }
    let mut notes = Vec::new();
    if seat.blind {
        notes.push("blind".to_string());
    }
    if seat.distinct_families {
        notes.push("different families".to_string());
    }
    if !seat.tags.is_empty() {
        notes.push(format!("for {}", seat.tags.join(", ")));
    }
    if seat.repeat {
        notes.push("every round".to_string());
    }
    if !notes.is_empty() {
        let _ = write!(text, " ({})", notes.join(", "));
    }
    text
}
