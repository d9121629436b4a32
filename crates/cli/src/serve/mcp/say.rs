//! What the tools say: one or two lines on where a unit is or what an op did, and what
//! to do next.

use serde_json::Value;

/// One line on where a unit is and what to do next.
pub(super) fn say_unit(v: &Value) -> String {
    let id = v["unit"].as_str().unwrap_or_default();
    let turns = &v["turns"];
    let station = v["station"].as_str().unwrap_or("its start");
    if v["running"] == true {
        return format!(
            "unit {id} is running at {station} ({turns} turns so far); call `unit_status` with `wait_seconds` to wait for it"
        );
    }
    match v["status"].as_str().unwrap_or_default() {
        "finished" => {
            let verdicts: Vec<&str> = v["verdicts"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let verdict = verdicts.last().map_or("no verdict", |v| {
                v.split_once(' ').map_or(*v, |(_, verdict)| verdict)
            });
            format!("unit {id} is done after {turns} turns: {verdict}")
        }
        "blocked" => match v["question"].as_str() {
            Some(q) => format!(
                "unit {id} stopped for a human after {turns} turns: {q}\nanswer it with `answer` (unit {id})"
            ),
            None => format!(
                "unit {id} is blocked after {turns} turns; fix what stopped it, then `resume` it"
            ),
        },
        status => {
            format!("unit {id} is {status} at {station} after {turns} turns; `resume` continues it")
        }
    }
}

/// One line on what an op did.
pub(super) fn say_outcome(v: &Value) -> String {
    let run = v["run"].as_str().unwrap_or_default();
    match v["outcome"].as_str().unwrap_or_default() {
        "run_created" => format!("run {run} created; `step` runs one turn, `resume` the rest"),
        "stepped" => match v["step"].as_str().unwrap_or_default() {
            "turn" => {
                let t = &v["turn"];
                format!(
                    "run {run}: turn {} by {} [{}]; the run is {}",
                    t["turn"],
                    t["worker"].as_str().unwrap_or_default(),
                    t["status"].as_str().unwrap_or_default(),
                    v["status"].as_str().unwrap_or_default()
                )
            }
            "finished" => format!("run {run} is finished; nothing to step"),
            _ => format!(
                "run {run} is blocked: {}; `resume` re-opens it",
                v["question"].as_str().unwrap_or_default()
            ),
        },
        "resumed" => match v["end"].as_str().unwrap_or_default() {
            "finished" => format!("run {run} finished"),
            "blocked" => format!(
                "run {run} stopped for a human: {}; `resume` re-opens it",
                v["question"].as_str().unwrap_or_default()
            ),
            _ => format!("run {run} paused after the turns asked for; `resume` continues it"),
        },
        "stopped" => format!("run {run} was stopped; `resume` continues it"),
        "cancel_asked" => format!("cancel asked: {}", v["result"].as_str().unwrap_or_default()),
        "enqueued" => format!(
            "queued {} job(s) in group {}; `baton work` runs them, then `outbox` and `judge`",
            v["jobs"].as_array().map_or(0, Vec::len),
            v["group"].as_str().unwrap_or_default()
        ),
        "judged" => {
            let j = &v["judgement"];
            format!(
                "group {} judged by {}: winner {}",
                j["group"].as_str().unwrap_or_default(),
                j["judge"].as_str().unwrap_or_default(),
                j["winner_job"].as_str().unwrap_or_default()
            )
        }
        other => format!("done ({other})"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_unit_is_said_with_what_to_do_next() {
        let running = json!({"unit": "u1", "turns": 3, "station": "plan", "running": true, "status": "active"});
        assert!(
            say_unit(&running).contains("running at plan (3 turns so far); call `unit_status`")
        );
        let done = json!({"unit": "u1", "turns": 29, "status": "finished", "running": false,
            "verdicts": ["V1 NEEDS_CHANGES", "V2 APPROVED"]});
        assert_eq!(say_unit(&done), "unit u1 is done after 29 turns: APPROVED");
        let asked = json!({"unit": "u1", "turns": 1, "status": "blocked", "running": false,
            "question": "at intake: what should change?"});
        assert!(say_unit(&asked).ends_with("answer it with `answer` (unit u1)"));
        let stuck = json!({"unit": "u1", "turns": 4, "status": "blocked", "running": false});
        assert!(say_unit(&stuck).contains("fix what stopped it, then `resume` it"));
    }

    #[test]
    fn an_op_is_said_in_one_line() {
        let stepped = json!({"outcome": "stepped", "run": "r1", "step": "turn", "status": "active",
            "turn": {"turn": 0, "worker": "w1", "status": "committed"}});
        assert_eq!(
            say_outcome(&stepped),
            "run r1: turn 0 by w1 [committed]; the run is active"
        );
        let blocked =
            json!({"outcome": "resumed", "run": "r1", "end": "blocked", "question": "which?"});
        assert!(say_outcome(&blocked).starts_with("run r1 stopped for a human: which?"));
        let queued = json!({"outcome": "enqueued", "group": "g1", "jobs": ["j1", "j2"]});
        assert!(say_outcome(&queued).starts_with("queued 2 job(s) in group g1"));
    }
}
