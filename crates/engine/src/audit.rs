//! The transfer audit: measured evidence that no conversation crossed a handoff.
//!
//! For every call it records the number of messages and a hash of the request as the
//! gateway reported putting them on the wire (`CallRecord::messages`, `sent_hash`; not
//! what the engine meant to send, so a gateway that adds a message fails the audit),
//! checks that the request was built from this turn's package alone, and searches
//! the request for every earlier turn's raw model output. The search makes one pass over
//! the request for all earlier outputs together, so checking a hundred of them costs
//! about as much as checking one.

use std::collections::HashSet;

use baton_core::compiler::HandoffPackage;
use baton_core::prompt::Prompt;
use baton_core::turn::{CallRecord, TransferAudit};

/// Prior outputs shorter than this are too generic to identify a transcript.
const WINDOW: usize = 48;

/// sha256 of `prompt` as built (system, NUL, user).
pub fn request_hash(prompt: &Prompt) -> String {
    baton_gateway::pair_hash(&prompt.system, &prompt.user)
}

const BASE: u64 = 0x0000_0100_0000_01b3;

/// Polynomial hash of a `WINDOW`-byte prefix.
fn window_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |h, &b| {
        h.wrapping_mul(BASE).wrapping_add(u64::from(b) + 1)
    })
}

/// Adds to `found` the indices of the `needles` that occur in `hay`. Candidate start
/// positions are found by the needles' first two bytes (a 64 Kibit table), and only
/// there is a `WINDOW`-byte prefix hashed and looked up: model outputs start with a
/// few distinct byte pairs (`{"`), so almost every position is skipped with one load.
fn find_occurring(hay: &str, needles: &[&str], found: &mut HashSet<usize>) {
    let bytes = hay.as_bytes();
    let candidates: Vec<(usize, &str)> = needles
        .iter()
        .enumerate()
        .filter(|(i, n)| n.len() >= WINDOW && n.len() <= hay.len() && !found.contains(i))
        .map(|(i, n)| (i, *n))
        .collect();
    if candidates.is_empty() || bytes.len() < WINDOW {
        return;
    }
    let mut starts = vec![0u64; 1024];
    let mut prefixes: HashSet<u64> = HashSet::with_capacity(candidates.len());
    for (_, n) in &candidates {
        let b = n.as_bytes();
        let pair = usize::from(b[0]) << 8 | usize::from(b[1]);
        starts[pair >> 6] |= 1 << (pair & 63);
        prefixes.insert(window_hash(&b[..WINDOW]));
    }
    // Model outputs nearly always open with the same byte (`{`): then the positions to
    // try are found by a byte search, which skips many bytes at a time.
    let first = candidates[0].1.as_bytes()[0];
    let one_first = first.is_ascii() && candidates.iter().all(|(_, n)| n.as_bytes()[0] == first);
    let last = bytes.len() - WINDOW;
    let mut pos = 0;
    while pos <= last {
        if one_first {
            // `pos` follows an ASCII byte (or is 0), so it is a char boundary.
            match hay[pos..].find(char::from(first)) {
                Some(at) if pos + at <= last => pos += at,
                _ => break,
            }
        }
        let at = pos;
        pos += 1;
        let pair = usize::from(bytes[at]) << 8 | usize::from(bytes[at + 1]);
        if starts[pair >> 6] & (1 << (pair & 63)) == 0 {
            continue;
        }
        if !prefixes.contains(&window_hash(&bytes[at..at + WINDOW])) {
            continue;
        }
        let rest = &bytes[at..];
        for (i, n) in &candidates {
            if rest.starts_with(n.as_bytes()) {
                found.insert(*i);
            }
        }
    }
}

#[cfg(test)]
fn count_occurring(hay: &str, needles: &[&str]) -> u32 {
    let mut found = HashSet::new();
    find_occurring(hay, needles, &mut found);
    found.len() as u32
}

/// Audits a turn's requests: `prompts[i]` is what the engine built for `calls[i]`, and
/// the call record says what the gateway sent. `own_outputs` are this turn's own outputs, which its later
/// calls legitimately quote (the handoff call quotes the result, a repair call the
/// answer it repairs); `prior_outputs` are every earlier turn's outputs.
/// `prior_outputs_leaked` counts the distinct earlier outputs found anywhere in the
/// turn's requests.
pub fn audit(
    package: &HandoffPackage,
    prompts: &[&Prompt],
    calls: &[CallRecord],
    own_outputs: &[&str],
    prior_outputs: &[String],
) -> TransferAudit {
    let needles: Vec<&str> = prior_outputs.iter().map(String::as_str).collect();
    let longest = needles.iter().map(|n| n.len()).max().unwrap_or(0);
    let mut found = HashSet::new();
    let mut package_only = true;
    for (i, prompt) in prompts.iter().enumerate() {
        // Built from the package: every call's user message starts with it (a repair
        // call with the failed call's, which does).
        let first = prompts[0];
        let prefix_ok = prompt.user.starts_with(&package.text);
        package_only &= prefix_ok;
        if i == 0 || prompt.system != first.system {
            find_occurring(&prompt.system, &needles, &mut found);
        }
        // The whole request is searched, package included: a compiler that pasted a
        // transcript would be caught too. A later call repeats the package, so only what
        // follows it (plus room for a match across the seam) is searched again. Only
        // this turn's own output is exempt.
        let mut from = 0;
        if i > 0 && prefix_ok {
            from = package.text.len().saturating_sub(longest.saturating_sub(1));
            while !prompt.user.is_char_boundary(from) {
                from -= 1;
            }
        }
        let mut tail = prompt.user[from..].to_string();
        if i > 0 {
            for own in own_outputs.iter().filter(|o| !o.is_empty()) {
                tail = tail.replacen(own, "", 1);
            }
        }
        find_occurring(&tail, &needles, &mut found);
    }
    TransferAudit {
        messages_per_call: calls.iter().map(|c| c.messages).collect(),
        request_hashes: calls
            .iter()
            .map(|c| {
                c.sent_hash
                    .clone()
                    .unwrap_or_else(|| c.request_hash.clone())
            })
            .collect(),
        prior_outputs_leaked: found.len() as u32,
        prior_outputs_checked: needles.iter().filter(|n| n.len() >= WINDOW).count() as u32,
        package_only,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_prior_output_present_and_no_other() {
        let a = "{\"summary\":\"first worker output that is long enough to count\"}".to_string();
        let b =
            "{\"summary\":\"second worker output, also long enough to count here\"}".to_string();
        let c =
            "{\"summary\":\"third worker output that never appears anywhere at all\"}".to_string();
        let hay = format!("prefix text {a} middle {b} end");
        let needles = [a.as_str(), b.as_str(), c.as_str()];
        assert_eq!(count_occurring(&hay, &needles), 2);
        assert_eq!(
            count_occurring(
                "nothing to see here, just a long enough haystack text",
                &needles
            ),
            0
        );
        assert_eq!(count_occurring(&a, &needles), 1);
        // Found among multi-byte chars, at the very end, and by the byte-pair table
        // when the outputs open with different bytes.
        let accented = format!("été {a} ünï {b}");
        assert_eq!(count_occurring(&accented, &needles), 2);
        assert_eq!(
            count_occurring(&format!("{}{a}", "日本".repeat(40)), &needles),
            1
        );
        let plain = "plain text output that is also long enough to count as one";
        let mixed = [a.as_str(), plain];
        assert_eq!(count_occurring(&format!("é {plain} and {a} é"), &mixed), 2);
    }

    fn package(text: &str) -> HandoffPackage {
        use baton_core::compiler::{Assignment, AssignmentKind};
        use baton_core::ids::{RunId, WorkerId};
        HandoffPackage {
            run_id: RunId("r".into()),
            turn: 1,
            worker: WorkerId::new("w"),
            assignment: Assignment {
                kind: AssignmentKind::Continuation,
                step_id: None,
                task: "t".into(),
            },
            budget: 100,
            tokens: 10,
            estimator: "heuristic".into(),
            text: text.into(),
            sections: Vec::new(),
            omitted_sections: Vec::new(),
            dropped: Vec::new(),
            over_budget: false,
            line: None,
        }
    }

    #[test]
    fn a_request_that_carries_an_earlier_output_is_counted_as_a_passed_conversation() {
        let prior =
            "{\"summary\":\"an earlier worker's whole raw answer, long enough\"}".to_string();
        let own =
            "{\"summary\":\"this turn's own answer, which the handoff call quotes\"}".to_string();
        let pkg = package("## Assigned task\nDo it");
        let p1 = baton_core::prompt::execute_prompt(&pkg);
        let p2 = baton_core::prompt::handoff_prompt(&pkg, &own);
        let calls = [sent_as_built(&p1), sent_as_built(&p2)];
        let clean = audit(
            &pkg,
            &[&p1, &p2],
            &calls,
            &[&own],
            std::slice::from_ref(&prior),
        );
        assert_eq!(clean.conversations_passed(), 0);
        assert_eq!(clean.prior_outputs_checked, 1);

        // A transcript smuggled into the handoff call, after the shared prefix.
        let mut leaky = p2.clone();
        leaky.user.push_str(&prior);
        let caught = audit(
            &pkg,
            &[&p1, &leaky],
            &[sent_as_built(&p1), sent_as_built(&leaky)],
            &[&own],
            std::slice::from_ref(&prior),
        );
        assert_eq!(caught.prior_outputs_leaked, 1);
        assert_eq!(caught.conversations_passed(), 1);

        // A package that pasted an earlier output is caught too.
        let pasted = package(&format!("## Assigned task\nDo it\n{prior}"));
        let p1 = baton_core::prompt::execute_prompt(&pasted);
        assert_eq!(
            audit(
                &pasted,
                &[&p1],
                &[sent_as_built(&p1)],
                &[],
                std::slice::from_ref(&prior)
            )
            .prior_outputs_leaked,
            1
        );

        // A request not built from the package breaks `package_only`.
        let mut foreign = baton_core::prompt::execute_prompt(&pkg);
        foreign.user = "something else entirely".into();
        assert!(!audit(&pkg, &[&foreign], &[sent_as_built(&foreign)], &[], &[]).package_only);
    }

    /// The record of a call whose gateway reported `sent`, as the turn records it.
    fn record(prompt: &Prompt, sent: &baton_gateway::Sent) -> CallRecord {
        use baton_core::ids::{Timestamp, WorkerId};
        CallRecord {
            call: baton_core::turn::CallKind::Execute,
            worker: WorkerId::new("w"),
            model: "mock/w".into(),
            messages: sent.messages,
            request_hash: request_hash(prompt),
            sent_hash: Some(sent.request_hash.clone()),
            tokens_sent: 0,
            tokens_received: 0,
            output: None,
            error: None,
            error_class: None,
            error_message: None,
            partial_output: None,
            started_at: Timestamp(0),
            duration_ms: 0,
            cost_micro_usd: None,
            usage: None,
            attempts: Vec::new(),
            retry_after_ms: None,
            quota_reset_at: None,
        }
    }

    /// A gateway that sent exactly the two messages it was handed.
    fn sent_as_built(prompt: &Prompt) -> CallRecord {
        record(
            prompt,
            &baton_gateway::Sent {
                messages: 2,
                request_hash: request_hash(prompt),
            },
        )
    }

    /// A gateway that puts one more message on the wire than it was handed (an earlier
    /// answer as a conversation turn, say): what it sent differs from what was built.
    #[derive(Debug)]
    struct AddsAMessage(baton_gateway::MockGateway);

    impl baton_gateway::Gateway for AddsAMessage {
        fn complete(
            &self,
            request: &baton_gateway::ModelRequest<'_>,
        ) -> baton_gateway::Result<baton_gateway::ModelResponse> {
            let mut response = self.0.complete(request)?;
            response.sent.messages += 1;
            response.sent.request_hash = "the hash of a longer body".into();
            Ok(response)
        }
    }

    /// Regression: every call's message count was the constant 2 and its hash the
    /// engine's own prompt, so "exactly [system, user]" could not fail. Now the audit
    /// takes what the gateway reports it sent, and a gateway that adds a message
    /// fails it.
    #[test]
    fn a_request_sent_with_an_extra_message_fails_the_audit() {
        use baton_gateway::Gateway;
        let pkg = package("## Assigned task\nDo it");
        let prompt = baton_core::prompt::execute_prompt(&pkg);
        let request = baton_gateway::ModelRequest {
            model: "demo",
            system: &prompt.system,
            user: &prompt.user,
            call: baton_core::turn::CallKind::Execute,
            turn: 1,
            schema: baton_core::claims::worker_result_schema(),
            max_tokens: None,
            temperature: None,
            workspace: None,
            cancel: None,
            output: None,
            hashed: None,
        };
        let honest = baton_gateway::MockGateway::new();
        let sent = honest.complete(&request).unwrap().sent;
        let clean = audit(&pkg, &[&prompt], &[record(&prompt, &sent)], &[], &[]);
        assert_eq!(clean.messages_per_call, [2]);
        assert_eq!(clean.request_hashes, [request_hash(&prompt)]);
        assert_eq!(clean.conversations_passed(), 0);

        let sent = AddsAMessage(honest).complete(&request).unwrap().sent;
        let caught = audit(&pkg, &[&prompt], &[record(&prompt, &sent)], &[], &[]);
        assert_eq!(caught.messages_per_call, [3]);
        assert_eq!(caught.request_hashes, ["the hash of a longer body"]);
        assert_eq!(caught.conversations_passed(), 1);
        // A gateway that measured nothing fails it too.
        let unmeasured = record(&prompt, &baton_gateway::Sent::default());
        assert_eq!(
            audit(&pkg, &[&prompt], &[unmeasured], &[], &[]).conversations_passed(),
            1
        );
    }
}
