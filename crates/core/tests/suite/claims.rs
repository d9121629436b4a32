//! Property tests over what parses model output (issue 7, item 17): whatever a model
//! sends, parsing ends with a claim or an error, never a panic, and a claim found is a
//! JSON object taken from the text itself.

use baton_core::claims::{extract_json_object, parse_handoff_report, parse_worker_result};
use proptest::prelude::*;

/// Text that looks like model output: prose, fences, braces, quotes, escapes, fields.
fn model_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just("\"".to_string()),
        Just("\\\\".to_string()),
        Just("```json\n".to_string()),
        Just("```\n".to_string()),
        Just("\"summary\":".to_string()),
        Just("\"last_action\":".to_string()),
        Just("\"artifacts\":[".to_string()),
        Just("]".to_string()),
        Just(",".to_string()),
        Just("\\u00".to_string()),
        "[a-z ]{0,8}",
        any::<char>().prop_map(|c| c.to_string()),
    ];
    prop::collection::vec(piece, 0..60).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn claim_parsers_are_total(raw in model_text()) {
        let _ = parse_worker_result(&raw);
        let _ = parse_handoff_report(&raw);
        if let Some(object) = extract_json_object(&raw) {
            prop_assert!(raw.contains(object));
            let braced = object.starts_with('{') && object.ends_with('}');
            prop_assert!(braced, "not an object: {}", object);
        }
    }

    #[test]
    fn claim_parsers_are_total_on_any_text(raw in any::<String>()) {
        let _ = parse_worker_result(&raw);
        let _ = parse_handoff_report(&raw);
        let _ = extract_json_object(&raw);
    }
}
