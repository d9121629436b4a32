//! baton's one vocabulary: commands in ([`Op`]) and events out ([`EventMsg`]), with
//! their JSON Schemas. The store's event table, the CLI's progress output, `baton
//! export` and (later) the server's live stream, the dashboard and MCP all speak it.
//!
//! Dependencies point one way: engine and store → protocol → core.

pub mod events;
pub mod op;
pub mod render;

pub use events::{CallDetail, Envelope, EventKind, EventMsg};
pub use op::{CancelTarget, Op};

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
}
