//! A route's format and validation: one test per problem, each reading the message a
//! user would see, and the built-in route.

use super::*;
use crate::ids::WorkerId;
use crate::router::{Candidate, Glob, PoolId, Seat, SeatId};

/// The default route with `edit` applied to its text.
fn default_with(edit: impl Fn(&str) -> String) -> String {
    edit(DEFAULT_ROUTE)
}

fn problems(text: &str) -> Vec<RouteProblem> {
    match Route::parse(text) {
        Ok(route) => panic!("expected problems, the route validated: {route:?}"),
        Err(RouteErrors(p)) => p,
    }
}

/// The one problem of `text`, which must have exactly one.
fn problem(text: &str) -> RouteProblem {
    let mut p = problems(text);
    assert_eq!(p.len(), 1, "{p:#?}");
    p.remove(0)
}

const MINIMAL: &str = r#"
name = "small"
[[stations]]
id = "plan"
kind = "plan"
seats = [{ seat = "plan.co-draft" }]
lock = true
[[stations]]
id = "build"
kind = "build"
seats = [{ seat = "build.step" }]
checkpoint = { find = "checkpoint.find", confirm = "checkpoint.confirm" }
"#;

#[test]
fn the_built_in_route_validates_and_has_every_station_in_order() {
    let route = Route::default_route().unwrap();
    let kinds: Vec<StationKind> = route.stations.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, StationKind::ALL);
    let discovery = route.station("discovery").unwrap();
    assert_eq!(discovery.seats[0].seat.as_str(), "discovery.deep");
    assert_eq!(discovery.seats[0].count, 2);
    let review = route.station("review").unwrap();
    assert_eq!(review.max_parallel, Some(3));
    assert_eq!(
        review.rounds.as_ref().unwrap().until,
        Convergence::NothingNew
    );
    let build = route.station("build").unwrap();
    let checkpoint = build.checkpoint.as_ref().unwrap();
    assert_eq!(checkpoint.passes_for(&["heavy".into()]), 2);
    assert_eq!(checkpoint.passes_for(&["light".into()]), 1);
    assert!(route.station("plan-loop").unwrap().lock);
}

#[test]
fn the_built_in_route_validates_against_a_roster_of_three_families() {
    let route = Route::default_route().unwrap();
    let roster = three_families();
    route
        .check(Some(&Roster {
            candidates: &roster,
            seats: &[],
        }))
        .unwrap();
}

#[test]
fn a_route_round_trips_through_its_own_serialisation() {
    let route = Route::default_route().unwrap();
    let text = toml::to_string(&route).unwrap();
    assert_eq!(Route::parse(&text).unwrap(), route);
}

#[test]
fn the_description_lists_every_station_with_its_seats() {
    let text = Route::default_route().unwrap().describe();
    assert!(
        text.starts_with("route default: 9 stations, 18 seat lanes"),
        "{text}"
    );
    assert!(text.contains("discovery.deep ×2"), "{text}");
    assert!(
        text.contains("plan.co-draft ×2 (blind, different families)"),
        "{text}"
    );
    assert!(
        text.contains(
            "checkpoint checkpoint.find then checkpoint.confirm, 2 find passes for heavy"
        ),
        "{text}"
    );
    assert!(
        text.contains("rounds until nothing new (at most 5); at most 3 at once"),
        "{text}"
    );
    assert!(text.contains("no seat (computed by the engine)"), "{text}");
}

#[test]
fn a_file_that_is_not_a_route_says_where() {
    let p = problem("name = \"x\"\n[[stations]]\nid = 3\n");
    let RouteProblem::Toml { detail } = &p else {
        panic!("{p:?}")
    };
    assert!(detail.contains("line 3"), "{detail}");
    let p = problem(&MINIMAL.replace("lock = true", "lock = true\nlocked = true"));
    assert!(p.to_string().contains("unknown field `locked`"), "{p}");
}

#[test]
fn an_empty_route_is_refused() {
    let p = problem("name = \"x\"\nstations = []\n");
    assert_eq!(p, RouteProblem::Empty);
}

#[test]
fn an_unknown_seat_names_the_stations_seat_group() {
    let text = default_with(|t| t.replace("review.breadth", "reveiw.breadth"));
    let p = problem(&text);
    assert_eq!(
        p.to_string(),
        "station review: \"reveiw.breadth\" is not a seat this station asks for; a review station's seats are named review.* (e.g. review.fresh-eyes)"
    );
    // A real seat at the wrong station is unknown there too.
    let text = default_with(|t| {
        t.replace(
            "{ seat = \"review.breadth\" }",
            "{ seat = \"build.rote-step\" }",
        )
    });
    assert!(
        matches!(problem(&text), RouteProblem::UnknownSeat { ref seat, .. } if seat.as_str() == "build.rote-step")
    );
}

#[test]
fn an_unknown_checkpoint_or_lead_seat_is_refused() {
    let text = default_with(|t| {
        t.replace(
            "confirm = \"checkpoint.confirm\"",
            "confirm = \"review.confirm\"",
        )
    });
    let p = problem(&text);
    assert!(
        p.to_string()
            .contains("checkpoint confirm are named checkpoint.*"),
        "{p}"
    );
    let text = default_with(|t| t.replace("lead = \"lead.plan\"", "lead = \"plan.lead\""));
    assert!(problem(&text).to_string().contains("lead are named lead.*"));
}

#[test]
fn a_station_with_no_seats_is_refused_with_an_example() {
    let text =
        default_with(|t| t.replace("seats = [{ seat = \"plan.scrutiny\", count = 2 }]\n", ""));
    assert_eq!(
        problem(&text).to_string(),
        "station plan-loop (plan_loop) has no seats; give it at least one, e.g. seats = [{ seat = \"plan.scrutiny\" }]"
    );
}

#[test]
fn a_station_without_a_model_refuses_seats() {
    let text = default_with(|t| {
        t.replace(
            "kind = \"gate\"\n",
            "kind = \"gate\"\nseats = [{ seat = \"review.breadth\" }]\n",
        )
    });
    assert_eq!(
        problem(&text),
        RouteProblem::SeatsNotAllowed {
            station: "gate".into(),
            kind: StationKind::Gate
        }
    );
}

#[test]
fn a_station_out_of_order_names_the_order() {
    // The review moved before the build.
    let route = Route::default_route().unwrap();
    let mut stations = route.stations.clone();
    let review = stations.remove(5);
    stations.insert(4, review);
    let text = toml::to_string(&Route { stations, ..route }).unwrap();
    let p = problems(&text);
    assert!(
        p.iter().any(|p| p.to_string()
            == "station build (build) comes after review (review); the line's order is intake, discovery, plan, plan_loop, build, review, synthesis, gate, merge: move it"),
        "{p:#?}"
    );
}

#[test]
fn a_station_passed_twice_is_a_cycle() {
    let text = format!(
        "{MINIMAL}\n[[stations]]\nid = \"plan-again\"\nkind = \"plan\"\nseats = [{{ seat = \"plan.co-draft\" }}]\n"
    );
    let p = problem(&text);
    assert!(
        matches!(p, RouteProblem::RepeatedKind { ref first, .. } if first == "plan"),
        "{p:?}"
    );
    assert!(p.to_string().contains("(a cycle, first at plan)"), "{p}");
    let text = MINIMAL.replace("id = \"build\"", "id = \"plan\"");
    assert!(problems(&text).contains(&RouteProblem::DuplicateStation {
        station: "plan".into()
    }));
}

#[test]
fn a_fix_round_that_goes_forward_is_a_cycle() {
    let text = default_with(|t| {
        t.replace(
            "back_to = \"build\"\n\n[[stations]]\nid = \"synthesis\"",
            "back_to = \"gate\"\n\n[[stations]]\nid = \"synthesis\"",
        )
    });
    assert_eq!(
        problem(&text),
        RouteProblem::NotBackward {
            station: "review".into(),
            target: "gate".into()
        }
    );
    let text = default_with(|t| t.replacen("back_to = \"build\"", "back_to = \"review\"", 1));
    assert!(matches!(problem(&text), RouteProblem::NotBackward { .. }));
    let text = default_with(|t| t.replacen("back_to = \"build\"", "back_to = \"buidl\"", 1));
    assert!(
        problem(&text)
            .to_string()
            .contains("names no station of this route; name one of intake, discovery")
    );
}

#[test]
fn a_zero_round_limit_is_refused() {
    let text = default_with(|t| t.replace("limit = 4", "limit = 0"));
    assert_eq!(
        problem(&text),
        RouteProblem::ZeroRounds {
            station: "plan-loop".into()
        }
    );
}

#[test]
fn a_review_without_rounds_and_rounds_where_there_are_none_are_refused() {
    let text = default_with(|t| t.replace("rounds = { until = \"nothing_new\", limit = 5 }\n", ""));
    assert!(matches!(problem(&text), RouteProblem::MissingRounds { .. }));
    let text = MINIMAL.replace(
        "lock = true",
        "lock = true\nrounds = { until = \"nothing_new\", limit = 2 }",
    );
    assert_eq!(
        problem(&text).to_string(),
        "station plan: rounds does not apply to a plan station; remove it (it applies to plan_loop and review)"
    );
}

#[test]
fn zero_lanes_zero_parallel_and_zero_passes_are_refused() {
    let text = default_with(|t| t.replace("count = 3", "count = 0"));
    assert!(matches!(problem(&text), RouteProblem::ZeroCount { .. }));
    let text = default_with(|t| t.replace("max_parallel = 3", "max_parallel = 0"));
    assert!(matches!(problem(&text), RouteProblem::ZeroParallel { .. }));
    let text = default_with(|t| t.replace("heavy = 2", "heavy = 0"));
    assert!(matches!(problem(&text), RouteProblem::ZeroPasses { .. }));
}

#[test]
fn a_build_needs_a_checkpoint_with_two_seats_and_a_locked_plan() {
    let text = MINIMAL.replace(
        "checkpoint = { find = \"checkpoint.find\", confirm = \"checkpoint.confirm\" }\n",
        "",
    );
    assert!(matches!(
        problem(&text),
        RouteProblem::MissingCheckpoint { .. }
    ));
    let text = MINIMAL.replace(
        "confirm = \"checkpoint.confirm\"",
        "confirm = \"checkpoint.find\"",
    );
    assert!(matches!(
        problem(&text),
        RouteProblem::SameCheckpointSeat { .. }
    ));
    let text = MINIMAL.replace("lock = true\n", "");
    assert_eq!(
        problem(&text).to_string(),
        "station build builds the locked plan's steps, and no earlier station locks the plan; set lock = true on plan"
    );
}

#[test]
fn a_plan_loop_needs_a_plan_and_seats_that_review() {
    let text = default_with(|t| {
        t.replace(
            "{ seat = \"plan.scrutiny\", count = 2 }",
            "{ seat = \"plan.co-draft\" }",
        )
    });
    assert!(matches!(
        problem(&text),
        RouteProblem::NotAReviewSeat { .. }
    ));
    let route = Route::default_route().unwrap();
    let stations = route.stations[3..].to_vec();
    let text = toml::to_string(&Route { stations, ..route }).unwrap();
    let p = problems(&text);
    assert!(p.iter().any(|p| p.to_string() == "station plan-loop (plan_loop) needs a plan station before it; add one, or remove this one"), "{p:#?}");
}

#[test]
fn distinct_families_on_one_lane_is_refused() {
    let text = default_with(|t| {
        t.replace(
            "count = 2, blind = true, distinct_families",
            "count = 1, blind = true, distinct_families",
        )
    });
    assert!(matches!(
        problem(&text),
        RouteProblem::OneDistinctLane { .. }
    ));
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = default_with(|t| {
        t.replace("limit = 4", "limit = 0")
            .replace("review.breadth", "reveiw.breadth")
    });
    let err = Route::parse(&text).unwrap_err();
    assert_eq!(err.0.len(), 2);
    let shown = err.to_string();
    assert!(
        shown.starts_with("2 problems in the route\n  - station plan-loop"),
        "{shown}"
    );
}

fn candidate(id: &str, family: &str, qualified: &[&str]) -> Candidate {
    Candidate {
        id: WorkerId::new(id),
        model: format!("{family}/{id}"),
        family: family.into(),
        pool: PoolId::new(family),
        qualified: qualified.iter().map(|g| Glob::new(*g)).collect(),
        enabled: true,
    }
}

fn three_families() -> Vec<Candidate> {
    vec![
        candidate("opus", "anthropic", &[]),
        candidate("gpt", "openai", &[]),
        candidate("glm", "zhipu", &[]),
    ]
}

fn check(roster: &[Candidate], seats: &[Seat]) -> Vec<RouteProblem> {
    let route = Route::default_route().unwrap();
    match route.check(Some(&Roster {
        candidates: roster,
        seats,
    })) {
        Ok(()) => Vec::new(),
        Err(RouteErrors(p)) => p,
    }
}

#[test]
fn a_review_seat_only_the_writers_family_can_fill_is_refused() {
    // Only anthropic may review code, and anthropic may also build it.
    let mut roster = three_families();
    roster[1].qualified = vec![
        Glob::new("build.*"),
        Glob::new("plan.*"),
        Glob::new("lead.*"),
        Glob::new("discovery.*"),
        Glob::new("checkpoint.*"),
    ];
    roster[2].qualified = roster[1].qualified.clone();
    let p = check(&roster, &[]);
    let deep = p
        .iter()
        .find(|p| matches!(p, RouteProblem::WriterFamilyOnly { seat, .. } if seat.as_str() == "review.deep-rounds"))
        .unwrap_or_else(|| panic!("{p:#?}"));
    assert_eq!(
        deep.to_string(),
        "station review: seat review.deep-rounds could only be filled by family anthropic, which can also write the work it reviews (build.hard-step, build.rote-step); a writer is never reviewed by its own family: qualify a worker of another family for review.deep-rounds, or keep anthropic out of build.hard-step, build.rote-step"
    );
    // Narrowing the builders to other families lifts it.
    roster[0].qualified = vec![
        Glob::new("review.*"),
        Glob::new("plan.*"),
        Glob::new("lead.*"),
    ];
    let p = check(&roster, &[]);
    assert!(
        !p.iter().any(
            |p| matches!(p, RouteProblem::WriterFamilyOnly { station, .. } if station == "review")
        ),
        "{p:#?}"
    );
}

#[test]
fn a_seat_narrowed_to_nobody_is_unstaffed() {
    let seat = Seat {
        qualified: vec![Glob::new("gemini-*")],
        ..Seat::new(SeatId::new("review.breadth"))
    };
    let p = check(&three_families(), &[seat]);
    assert_eq!(
        p,
        vec![RouteProblem::Unstaffed {
            station: "review".into(),
            seat: SeatId::new("review.breadth")
        }]
    );
    assert!(
        p[0].to_string()
            .contains("give a worker qualified = [\"review.breadth\"]")
    );
}

#[test]
fn a_confirm_seat_only_the_finder_can_hold_is_refused() {
    let seat = Seat {
        qualified: vec![Glob::new("gpt")],
        ..Seat::new(SeatId::new("checkpoint.confirm"))
    };
    let p = check(&three_families(), &[seat]);
    assert!(
        p.iter()
            .any(|p| matches!(p, RouteProblem::ConfirmByFinder { worker, .. } if worker == "gpt")),
        "{p:#?}"
    );
}

#[test]
fn co_drafts_of_different_families_need_two_families() {
    let roster = vec![
        candidate("a1", "anthropic", &[]),
        candidate(
            "a2",
            "anthropic",
            &["plan.*", "lead.*", "discovery.*", "build.*"],
        ),
        candidate("gpt", "openai", &["review.*", "checkpoint.*"]),
    ];
    let seat = Seat {
        qualified: vec![Glob::new("a*")],
        ..Seat::new(SeatId::new("plan.co-draft"))
    };
    let p = check(&roster, &[seat]);
    assert!(
        p.iter().any(|p| matches!(
            p,
            RouteProblem::TooFewFamilies {
                found: 1,
                count: 2,
                ..
            }
        )),
        "{p:#?}"
    );
}

#[test]
fn a_number_too_large_to_be_meant_is_refused() {
    let text = default_with(|t| t.replace("heavy = 2", "heavy = 4000000000"));
    assert_eq!(
        problem(&text).to_string(),
        "station build: checkpoint passes = 4000000000 is more than the line takes (100); a number this large is a typo, give a smaller one"
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::ids::RunId;
    use crate::line::cursor::{LineProgress, Next, next};
    use crate::state::ExecutionState;

    proptest! {
        /// Any selection and order of the default route's stations, with any counts and
        /// limits, is either refused with problems or accepted; and an accepted one's
        /// cursor answers at its start. Nothing panics on a route a user wrote.
        #[test]
        fn any_reordered_route_is_accepted_or_refused_without_a_panic(
            picks in prop::collection::vec(0usize..9, 0..12),
            count in 0u32..300,
            limit in 0u32..300,
        ) {
            let base = Route::default_route().unwrap();
            let mut stations: Vec<Station> = picks.iter().map(|&i| base.stations[i].clone()).collect();
            for s in &mut stations {
                for seat in &mut s.seats {
                    seat.count = count;
                }
                if let Some(r) = &mut s.rounds {
                    r.limit = limit;
                }
            }
            let route = Route { stations, ..base };
            match route.check(None) {
                Ok(()) => {
                    prop_assert!(!route.stations.is_empty());
                    let state = ExecutionState::new(RunId("u".into()), "o", &[]);
                    let first = next(&route, &LineProgress::start(), &state);
                    prop_assert!(!matches!(first, Next::Done));
                }
                Err(RouteErrors(problems)) => prop_assert!(!problems.is_empty()),
            }
        }
    }
}
