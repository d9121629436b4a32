//! baton's one vocabulary: commands in ([`Op`]) and events out ([`EventMsg`]), with
//! their JSON Schemas. The store's event table, the CLI's progress output, `baton
//! export` and (later) the server's live stream, the dashboard and MCP all speak it.
//!
//! Dependencies point one way: engine and store → protocol → core.

pub mod events;
pub mod op;
pub mod render;

pub use events::{CallDetail, Envelope, EventKind, EventMsg};
pub use op::{CancelTarget, NewRoster, Op, Sandbox, Settings};

/// The JSON Schemas of the protocol, as checked in under `schema/` (a test keeps
/// them in step with the types).
pub fn schemas() -> [(&'static str, serde_json::Value); 3] {
    let of = |s: schemars::Schema| serde_json::to_value(s).unwrap_or(serde_json::Value::Null);
    [
        ("event.json", of(schemars::schema_for!(EventMsg))),
        ("envelope.json", of(schemars::schema_for!(Envelope))),
        ("op.json", of(schemars::schema_for!(Op))),
    ]
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The checked-in schemas are what the types generate: a change to the protocol
    /// shows up in review as a change to `schema/`. `BATON_BLESS=1` rewrites them.
    #[test]
    fn checked_in_schemas_match_the_types() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema");
        for (name, schema) in super::schemas() {
            assert!(schema.is_object(), "{name} did not generate");
            let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
            let path = dir.join(name);
            if std::env::var_os("BATON_BLESS").is_some() {
                std::fs::write(&path, &text).unwrap();
            }
            let stored = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                stored == text,
                "{} is out of date; run `BATON_BLESS=1 cargo test -p baton-protocol` and review the diff",
                path.display()
            );
        }
    }

    #[test]
    fn ops_round_trip_and_refuse_unknown_fields() {
        let op: super::Op =
            serde_json::from_str(r#"{"op":"cancel","target":{"kind":"job","id":"j1"}}"#).unwrap();
        assert_eq!(
            op,
            super::Op::Cancel {
                target: super::CancelTarget::Job("j1".into())
            }
        );
        assert!(serde_json::from_str::<super::Op>(r#"{"op":"step","run":"r","rnu":"x"}"#).is_err());
    }

    /// A client's op is checked as the CLI's flags are: a tag or a scope that is not one
    /// is refused when the op is read, saying what to write.
    #[test]
    fn a_bad_step_tag_or_scope_in_an_op_is_refused_with_what_to_write() {
        let op = |extra: &str| {
            serde_json::from_str::<super::Op>(&format!(
                r#"{{"op":"create_run","objective":"o","tasks":["t"],{extra}}}"#
            ))
        };
        assert!(op(r#""step_tags":[["credentials"]],"step_scopes":["earlier"]"#).is_ok());
        let err = op(r#""step_tags":[["Credentials"]]"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains(r#"write "credentials""#), "{err}");
        let err = op(r#""step_scopes":["all"]"#).unwrap_err().to_string();
        assert!(err.contains("own") && err.contains("earlier"), "{err}");
    }

    /// Every op survives JSON both ways, with what each carries (a client's request is
    /// what the engine gets), and the short forms a client writes by hand read.
    #[test]
    fn every_op_round_trips() {
        use super::{CancelTarget, NewRoster, Op, Sandbox, Settings};
        use baton_core::state::{StepScope, StepTag};
        use baton_core::tokens::EstimatorKind;
        let settings = Settings {
            budget: Some(900),
            total_budget: Some(5_000),
            estimator: Some(EstimatorKind::Heuristic),
        };
        let roster = serde_json::json!({"workers": [{"id": "a", "model": "mock/a"}]});
        let ops = vec![
            Op::CreateRun {
                objective: "o".into(),
                tasks: vec!["t1".into(), "t2".into()],
                step_budgets: vec![None, Some(400)],
                step_seats: vec![None, Some("review.code".into())],
                step_tags: vec![Vec::new(), StepTag::list("credentials,db").unwrap()],
                step_scopes: vec![None, Some(StepScope::Own)],
                roster: Some(roster.clone()),
                settings: settings.clone(),
            },
            Op::Step { run: "r1".into() },
            Op::Resume {
                run: "r1".into(),
                max_turns: Some(3),
                roster: Some(NewRoster {
                    roster: roster.clone(),
                    source: "fixed.toml".into(),
                }),
            },
            Op::Cancel {
                target: CancelTarget::Group("g1".into()),
            },
            Op::Cancel {
                target: CancelTarget::Worker("pid-1@h".into()),
            },
            Op::Enqueue {
                objective: "o".into(),
                tasks: vec!["t".into()],
                candidates: vec!["a".into(), "a+b".into(), "claude".into()],
                gates: vec!["test=cargo test".into()],
                gate_each_turn: true,
                fix_turns: Some(0),
                sandbox: Some(Sandbox::Bwrap),
                repo: Some("/src/x".into()),
                base: Some("main".into()),
                worktrees: Some("/tmp/wt".into()),
                rubric: Some("smallest diff".into()),
                step_budgets: vec![Some(900)],
                step_seats: vec![None, Some("review.code".into())],
                step_tags: vec![vec![], vec![StepTag::new("credentials").unwrap()]],
                step_scopes: vec![Some(StepScope::Earlier)],
                roster: Some(roster),
                settings,
            },
            Op::Judge {
                group: "g1".into(),
                judge: Some("referee".into()),
            },
        ];
        for op in ops {
            let json = serde_json::to_string(&op).unwrap();
            let back: Op = serde_json::from_str(&json).unwrap();
            assert_eq!(back, op, "{json}");
        }
        let short: Op = serde_json::from_str(
            r#"{"op":"enqueue","objective":"o","tasks":["t"],"candidates":["a"]}"#,
        )
        .unwrap();
        let Op::Enqueue {
            gates,
            gate_each_turn,
            settings,
            sandbox,
            ..
        } = short
        else {
            panic!("not an enqueue: {short:?}");
        };
        assert!(gates.is_empty() && !gate_each_turn && sandbox.is_none());
        assert!(settings.is_empty());
        // A misspelt setting is refused, not ignored.
        assert!(
            serde_json::from_str::<Op>(
                r#"{"op":"create_run","objective":"o","tasks":["t"],"settings":{"budegt":9}}"#
            )
            .is_err()
        );
    }
}
