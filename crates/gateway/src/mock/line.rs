//! The mock's answers to the assembly line's seats (see `baton_core::line::answers`):
//! an intake, a plan, a check. Recognised by the answer schema the call carries, and
//! read from the briefing the way a model would: the objective it states, the plan
//! drafts and open findings its line block shows. Deterministic, like the rest of the
//! mock: a clean unit offline (nothing found, every claimed fix confirmed).

use serde_json::{Value, json};

/// The line answer `schema` asks for, if it is one.
pub(super) fn answer(schema: &Value, user: &str) -> Option<Value> {
    let properties = &schema["properties"];
    if properties["questions"].is_object() && properties["objective"].is_object() {
        return Some(intake(user));
    }
    if properties["plan"].is_object() {
        return Some(plan(user));
    }
    if properties["findings"].is_object() && properties["summary"].is_object() {
        return Some(check(user));
    }
    None
}

/// The body of the briefing's `## TITLE` section (to the next heading).
fn section<'a>(user: &'a str, title: &str) -> &'a str {
    let heading = format!("## {title}\n");
    let Some(start) = user.find(&heading) else {
        return "";
    };
    let body = &user[start + heading.len()..];
    let end = body.find("\n## ").unwrap_or(body.len());
    body[..end].trim()
}

/// The record ids (`P2`, `N4`) of `kind` a section names, in order, once each.
fn ids(text: &str, kind: char) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = word.chars();
        let is_id =
            chars.next() == Some(kind) && word.len() > 1 && chars.all(|c| c.is_ascii_digit());
        if is_id && !out.iter().any(|w| w == word) {
            out.push(word.to_string());
        }
    }
    out
}

/// A description of fewer than three words is too vague to build from: the intake asks,
/// unless a human has answered it already (a decision in the briefing).
fn intake(user: &str) -> Value {
    let objective = section(user, "Objective");
    let answered = user
        .lines()
        .find_map(|l| l.split_once("A human answered ").map(|(_, rest)| rest));
    if let Some(answer) = answered {
        let answer = answer.rsplit_once("\": ").map_or(answer, |(_, a)| a).trim();
        return json!({
            "objective": objective,
            "acceptance": [format!("As a human answered: {answer}")],
        });
    }
    if objective.split_whitespace().count() < 3 {
        return json!({
            "objective": objective,
            "questions": [format!(
                "What should \"{objective}\" change, and how will we know it is done?"
            )],
        });
    }
    json!({
        "objective": objective,
        "constraints": ["Keep the public interface as it is"],
        "acceptance": [format!("A test shows: {objective}")],
    })
}

/// Three steps from the objective; a merge or revision names the drafts it builds on and
/// answers the open findings it was shown.
fn plan(user: &str) -> Value {
    let objective = section(user, "Objective");
    let short: String = objective
        .split_whitespace()
        .take(10)
        .collect::<Vec<_>>()
        .join(" ");
    // An objective about credentials tags the step that implements it for the seats'
    // policies (`deny_tags`).
    let implement = if objective.to_lowercase().contains("credentials") {
        json!(["standard", "credentials"])
    } else {
        json!(["standard"])
    };
    let mut answer = json!({
        "plan": {
            "steps": [
                {"title": format!("Write a failing test for: {short}"), "tags": ["light"]},
                {"title": format!("Implement: {short}"), "tags": implement},
                {"title": format!("Document: {short}"), "tags": ["light"]},
            ],
            "rationale": "Test first, so the change is proven by something that failed before it.",
        }
    });
    let from = ids(section(user, "Plan drafts"), 'P');
    if !from.is_empty() {
        answer["from"] = json!(from);
    }
    let open = ids(section(user, "Open findings"), 'N');
    if !open.is_empty() {
        answer["fixed"] = open
            .iter()
            .map(|id| json!({"finding": id, "note": "answered in this version"}))
            .collect();
    }
    answer
}

/// What an objective says to make the offline checks find something: a unit "with a
/// planted bug" has one in its implementation step, which the first find pass of that
/// step's checkpoint catches, and one in the build as a whole, which the first deep
/// review round catches (a MAJOR finding, so the synthesis sends the unit to a fix
/// round). Everything else checks clean.
pub const PLANTED: &str = "planted bug";

/// What an objective says to make the plan loop never converge: every scrutiny of a
/// unit with "a contested plan" raises an objection of its own, so each round raises
/// something new until the round limit asks a human.
pub const CONTESTED: &str = "contested plan";

/// What an objective says to make two workers contradict each other on a decision: in
/// a unit with "a disputed decision" the discovery's lead decides where the limiter
/// keeps its counts, and the first build step's builder decides the opposite.
pub const DISPUTED: &str = "disputed decision";

/// The discovery's lead and the first step's builder of a disputed unit each decide
/// their side of the dispute.
pub(super) fn dispute(result: &mut Value, user: &str) {
    if !section(user, "Objective").to_lowercase().contains(DISPUTED) {
        return;
    }
    let task = super::assigned_task(user);
    let decision = if task.contains("As lead.discovery") {
        "Keep the rate limit counters in Redis"
    } else if task.contains("As build.") && task.contains("step T1 ") {
        "Never keep the rate limit counters in Redis"
    } else {
        return;
    };
    if let Some(decisions) = result.get_mut("decisions").and_then(Value::as_array_mut) {
        decisions.push(json!({"text": decision, "reason": "what this seat found in the code"}));
    }
}

/// The checkpoint's finding of the planted bug, and the review's.
const PLANTED_STEP: &str = "The limit counter is never reset, so a key stays blocked after its first window (the planted bug)";
const PLANTED_BUILD: &str =
    "Two processes count the same key apart, so a client gets twice its limit (the planted bug)";

/// Nothing found, unless the unit has a planted bug this seat is the one to catch; a
/// confirming seat (one asked to list what it confirmed) confirms every finding shown
/// with a claimed fix.
fn check(user: &str) -> Value {
    let open = section(user, "Open findings");
    let task = super::assigned_task(user);
    let claimed: Vec<String> = open
        .lines()
        .filter(|l| l.contains("fix claimed by"))
        .flat_map(|l| ids(l, 'N').into_iter().take(1))
        .collect();
    let objective = section(user, "Objective").to_lowercase();
    let planted = objective.contains(PLANTED) && open.is_empty();
    let found = if objective.contains(CONTESTED) && task.contains("As plan.scrutiny") {
        // "As plan.scrutiny (lane 1 of 2), round 3": an objection of this lane and round.
        let at = task
            .split(':')
            .next()
            .unwrap_or_default()
            .trim_start_matches("As ");
        vec![json!({
            "severity": "MINOR",
            "what": format!("The plan leaves open where the limiter keeps its counts (objection of {at})"),
            "where": "the plan"
        })]
    } else if planted && task.contains("find pass 1") && task.contains("(Implement") {
        vec![json!({"severity": "MAJOR", "what": PLANTED_STEP, "where": "src/limit.rs"})]
    } else if planted && task.contains("As review.deep-rounds") && task.contains("round 1:") {
        vec![json!({"severity": "MAJOR", "what": PLANTED_BUILD, "where": "src/limit.rs"})]
    } else {
        Vec::new()
    };
    let summary = if found.is_empty() {
        "Checked what this seat was shown; nothing to raise."
    } else {
        "Checked what this seat was shown; raised what is wrong."
    };
    let mut answer = json!({"summary": summary, "findings": found});
    if !claimed.is_empty() && task.contains("confirmed") {
        answer["confirmed"] = json!(claimed);
    }
    answer
}

/// A builder shown open findings fixes them, and names each one it fixed by its id
/// among its resolved issues (where the line's rules take them as claimed fixes).
pub(super) fn claim_fixes(result: &mut Value, user: &str) {
    let fixed: Vec<Value> = section(user, "Open findings")
        .lines()
        .filter(|l| !l.contains("fix claimed by"))
        .flat_map(|l| ids(l, 'N').into_iter().take(1))
        .map(|id| json!({"issue": id, "note": "fixed in this build"}))
        .collect();
    if !fixed.is_empty() {
        result["resolved_issues"] = json!(fixed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BRIEFING: &str = "# Briefing: turn 4, for w1 (mock/m1)\n\
        ## Assigned task\nAs plan.lead: merge the drafts.\n\
        ## Objective\nAdd rate limiting to the public API\n\
        ## Plan drafts\n- P1 by w2 at plan.co-draft: 2 steps\n- P2 by w3 at plan.co-draft: 3 steps\n\
        ## Open findings\n- N1 minor at T2: no limit on bursts (raised by w2 at plan.scrutiny; fix claimed by w1 at turn 3, not yet confirmed)\n- N2 nit at T1: wording (raised by w3 at plan.scrutiny)\n";

    #[test]
    fn a_planted_bug_is_caught_by_the_first_find_pass_of_the_implementation_and_the_first_deep_review()
     {
        let brief = |task: &str, objective: &str, open: &str| {
            format!(
                "## Assigned task\nStep T2: {task}\n## Objective\n{objective}\n## Open findings\n{open}\n## Next action\nx\n"
            )
        };
        let planted = "Add rate limiting, with a planted bug";
        let find =
            "As checkpoint.find, find pass 1: check step T2 (Implement: rate limiting) as built.";
        let deep = "As review.deep-rounds, round 1: go deeper.";
        for task in [find, deep] {
            let found = check(&brief(task, planted, ""));
            assert_eq!(found["findings"][0]["severity"], "MAJOR", "{task}");
            // Clean without the planted bug, once something is open, and in later rounds.
            for quiet in [
                brief(task, "Add rate limiting", ""),
                brief(task, planted, "- N1 MAJOR at T2: the bug"),
                brief(
                    &task
                        .replace("pass 1", "pass 2")
                        .replace("round 1", "round 2"),
                    planted,
                    "",
                ),
            ] {
                assert_eq!(check(&quiet)["findings"], json!([]), "{quiet}");
            }
        }
        let other_step = brief(
            "As checkpoint.find, find pass 1: check step T1 (Write a failing test: x).",
            planted,
            "",
        );
        assert_eq!(check(&other_step)["findings"], json!([]));
    }

    #[test]
    fn each_line_answer_reads_the_briefing_it_was_given() {
        let plan = plan(BRIEFING);
        assert_eq!(plan["from"], json!(["P1", "P2"]));
        assert_eq!(plan["fixed"][1]["finding"], "N2");
        assert!(
            plan["plan"]["steps"][1]["title"]
                .as_str()
                .unwrap()
                .contains("Add rate limiting")
        );

        // A seat asked to list what it confirmed confirms the claimed fix; a finder does not.
        let confirming = BRIEFING.replace(
            "As plan.lead: merge the drafts.",
            "As checkpoint.confirm: for step T2, check each claimed fix among the open findings and list in confirmed those you verified.",
        );
        let check = check(&confirming);
        assert_eq!(check["findings"], json!([]));
        assert_eq!(check["confirmed"], json!(["N1"]));
        let finding = BRIEFING.replace(
            "As plan.lead: merge the drafts.",
            "As checkpoint.find, find pass 1: check step T2 (Implement: x).",
        );
        assert!(super::check(&finding).get("confirmed").is_none());

        // A builder names the findings it fixed (not the one whose fix is claimed already).
        let mut result = json!({"summary": "built"});
        claim_fixes(&mut result, BRIEFING);
        assert_eq!(
            result["resolved_issues"],
            json!([{"issue": "N2", "note": "fixed in this build"}])
        );

        let intake = intake(BRIEFING);
        assert_eq!(intake["objective"], "Add rate limiting to the public API");
        assert!(intake.get("questions").is_none());
        let answered = super::intake(
            "## Objective\nFix it\n## Decisions\n- D1 A human answered \"What should it change?\": Return 429 past 100 a minute\n",
        );
        assert!(answered.get("questions").is_none(), "{answered}");
        assert_eq!(
            answered["acceptance"][0],
            "As a human answered: Return 429 past 100 a minute"
        );
        let vague = super::intake("## Objective\nFix it\n");
        assert!(
            vague["questions"][0]
                .as_str()
                .unwrap()
                .contains("\"Fix it\"")
        );
    }

    #[test]
    fn the_line_schemas_are_recognised_and_nothing_else_is() {
        for (schema, key) in [
            (baton_core::line::answers::intake_schema(), "objective"),
            (baton_core::line::answers::plan_schema(), "plan"),
            (baton_core::line::answers::check_schema(), "summary"),
        ] {
            let answer = answer(schema, BRIEFING).unwrap();
            assert!(answer.get(key).is_some(), "{answer}");
        }
        assert!(answer(&json!({"properties": {"summary": {}}}), BRIEFING).is_none());
    }

    /// What the mock answers is read by the line's own parsers without a warning.
    #[test]
    fn the_line_answers_parse_cleanly() {
        use baton_core::line::answers::{parse_check, parse_intake, parse_plan};
        let plan = parse_plan(&plan(BRIEFING).to_string()).unwrap();
        assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
        assert_eq!(plan.claim.plan.steps.len(), 3);
        let check = parse_check(&check(BRIEFING).to_string()).unwrap();
        assert!(check.warnings.is_empty(), "{:?}", check.warnings);
        let intake = parse_intake(&intake(BRIEFING).to_string()).unwrap();
        assert!(intake.warnings.is_empty(), "{:?}", intake.warnings);
    }
}
