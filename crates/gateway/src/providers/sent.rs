//! What an HTTP provider's request puts on the wire, measured on the body's bytes: the
//! transfer audit's evidence (see `crate::Sent`).

use serde_json::Value;

use super::Wire;

/// The messages of a request body — the conversation's turns, plus the system prompt
/// where the wire carries it apart — and the hash of its bytes. A body that is not JSON
/// counts no messages, which fails the transfer audit.
pub(super) fn measure(wire: Wire, body: &[u8]) -> crate::Sent {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let turns = |key: &str| json.get(key).and_then(Value::as_array).map_or(0, Vec::len);
    let apart = |keys: &[&str]| {
        usize::from(
            keys.iter()
                .any(|k| json.get(*k).is_some_and(|v| !v.is_null())),
        )
    };
    let messages = match wire {
        Wire::ChatCompletions => turns("messages"),
        Wire::Messages => turns("messages") + apart(&["system"]),
        Wire::GenerateContent => {
            turns("contents") + apart(&["systemInstruction", "system_instruction"])
        }
    };
    crate::Sent {
        messages: u32::try_from(messages).unwrap_or(u32::MAX),
        request_hash: crate::sha256_hex(body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bytes(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn counts_each_wire_formats_messages_and_hashes_the_bytes() {
        let openai = bytes(json!({"model": "m", "messages": [
            {"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}));
        let sent = measure(Wire::ChatCompletions, &openai);
        assert_eq!(sent.messages, 2);
        assert_eq!(sent.request_hash, crate::sha256_hex(&openai));
        let anthropic =
            bytes(json!({"system": "s", "messages": [{"role": "user", "content": "u"}]}));
        assert_eq!(measure(Wire::Messages, &anthropic).messages, 2);
        let gemini = bytes(json!({"systemInstruction": {"parts": [{"text": "s"}]},
            "contents": [{"role": "user", "parts": [{"text": "u"}]}]}));
        assert_eq!(measure(Wire::GenerateContent, &gemini).messages, 2);
    }

    /// A body that carried an earlier answer as a conversation turn is counted as the
    /// three messages it is, so the audit sees the conversation.
    #[test]
    fn an_added_message_is_counted() {
        let body = bytes(json!({"messages": [
            {"role": "system", "content": "s"},
            {"role": "assistant", "content": "an earlier worker's answer"},
            {"role": "user", "content": "u"}]}));
        assert_eq!(measure(Wire::ChatCompletions, &body).messages, 3);
        assert_eq!(measure(Wire::ChatCompletions, b"not json").messages, 0);
    }
}
