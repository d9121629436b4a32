//! The o200k estimator against tiktoken-rs, the reference it must equal: the checked-in
//! tables, the pieces, and the counts on a corpus and on generated text.
//!
//! `BATON_REGENERATE=1 cargo test -p baton-core --lib o200k` rewrites the checked-in
//! tables from tiktoken-rs and regex-syntax (after a version bump of either) instead of
//! failing on a difference.

use std::sync::LazyLock;

use proptest::prelude::*;

use super::o200k::{self, rank, token, vocab_len};
use super::pretokenize::{Class, class_of, pieces, splits_after_line_break};
use super::{BpeEstimator, HeuristicEstimator, TokenEstimator, count_extended};

static TIKTOKEN: LazyLock<tiktoken_rs::CoreBPE> =
    LazyLock::new(|| tiktoken_rs::o200k_base().expect("tiktoken-rs loads o200k_base"));
static PATTERN: LazyLock<fancy_regex::Regex> = LazyLock::new(|| {
    fancy_regex::Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).expect("tiktoken's pattern")
});

fn regenerate() -> bool {
    std::env::var_os("BATON_REGENERATE").is_some_and(|v| v == "1")
}

/// Writes `generated` over the checked-in `path` when regenerating; otherwise asserts
/// they are equal.
fn check_generated(path: &str, checked_in: &[u8], generated: &[u8]) {
    if regenerate() {
        let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::write(&full, generated).expect("write the regenerated table");
        return;
    }
    assert!(
        checked_in == generated,
        "{path} is stale: regenerate it with BATON_REGENERATE=1 cargo test -p baton-core --lib o200k"
    );
}

fn tiktoken_pieces(text: &str) -> Vec<&str> {
    PATTERN
        .find_iter(text)
        .map(|m| m.expect("tiktoken's pattern matches").as_str())
        .collect()
}

fn our_pieces(text: &str) -> Vec<&str> {
    pieces(text)
        .map(|p| std::str::from_utf8(p).expect("pieces split at char boundaries"))
        .collect()
}

/// Equal counts, and equal pieces first, because a wrong split can hide behind a count
/// that happens to match.
fn assert_same(text: &str) {
    assert_eq!(
        our_pieces(text),
        tiktoken_pieces(text),
        "pieces of {text:?}"
    );
    assert_eq!(
        BpeEstimator.count(text),
        TIKTOKEN.encode_ordinary(text).len(),
        "tokens of {text:?}"
    );
}

#[test]
fn the_vocabulary_is_tiktokens_o200k_base() {
    let n = (0..)
        .take_while(|&r| TIKTOKEN.decode_bytes(&[r]).is_ok())
        .count();
    let mut generated = Vec::new();
    for r in 0..n as u32 {
        let t = TIKTOKEN.decode_bytes(&[r]).expect("rank decodes");
        generated.push(u8::try_from(t.len()).expect("tokens are under 256 bytes"));
        generated.extend_from_slice(&t);
    }
    // Ranks 0..199,998 are ordinary tokens; the special ones (199,999, 200,018) are not
    // text and are not counted by `encode_ordinary`.
    check_generated(
        "data/o200k_base.bin",
        include_bytes!("../../data/o200k_base.bin"),
        &generated,
    );
    if regenerate() {
        return;
    }
    assert_eq!(vocab_len(), 199_998);
    for r in 0..vocab_len() as u32 {
        assert_eq!(rank(token(r)), Some(r), "rank {r} is found by its bytes");
    }
}

#[test]
fn bytes_that_are_not_tokens_have_no_rank() {
    for text in [
        "",
        "zzqxj",
        " hello world and more",
        "\u{1F600}\u{1F600}\u{1F600}",
    ] {
        assert_eq!(rank(text.as_bytes()), None, "{text:?}");
    }
    assert!(rank(" hello".as_bytes()).is_some());
}

/// The char classes the pre-tokenizer tells apart, as regex-syntax (the Unicode tables
/// tiktoken's regex matches with) defines them.
fn reference_classes() -> Vec<Class> {
    let set = |pattern: &str| -> Vec<(u32, u32)> {
        let hir = regex_syntax::Parser::new()
            .parse(pattern)
            .expect("class parses");
        match hir.kind() {
            regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(c)) => c
                .ranges()
                .iter()
                .map(|r| (u32::from(r.start()), u32::from(r.end())))
                .collect(),
            other => panic!("{pattern} is not a Unicode class: {other:?}"),
        }
    };
    let mut classes = vec![Class::Other; 0x11_0000];
    let assign = [
        (r"[\p{Lu}\p{Lt}]", Class::Upper),
        (r"\p{Ll}", Class::Lower),
        (r"[\p{Lm}\p{Lo}]", Class::Letter),
        (r"\p{M}", Class::Mark),
        (r"\p{N}", Class::Number),
        (r"[\s--[\r\n]]", Class::Space),
        (r"[\r\n]", Class::Newline),
    ];
    for (pattern, class) in assign {
        for (start, end) in set(pattern) {
            for c in start..=end {
                assert_eq!(
                    classes[c as usize],
                    Class::Other,
                    "U+{c:04X} in two classes"
                );
                classes[c as usize] = class;
            }
        }
    }
    // What the pre-tokenizer relies on about `\p{L}`: it is exactly these three.
    let letters: usize = set(r"\p{L}")
        .iter()
        .map(|(s, e)| (e - s + 1) as usize)
        .sum();
    let counted = classes
        .iter()
        .filter(|c| matches!(c, Class::Upper | Class::Lower | Class::Letter))
        .count();
    assert_eq!(letters, counted);
    classes
}

#[test]
fn the_char_classes_are_regex_syntaxs() {
    let classes = reference_classes();
    let mut generated = String::from(
        "//! Generated from regex-syntax's Unicode tables by `o200k_tests.rs` \
         (`BATON_REGENERATE=1 cargo test -p baton-core --lib o200k`); do not edit.\n\
         //! Every char not in a range is `Other`; `\\r` and `\\n` are `Newline`.\n\n\
         use super::pretokenize::Class::{self, *};\n\n\
         #[rustfmt::skip]\n\
         pub(super) const RANGES: &[(u32, u32, Class)] = &[\n",
    );
    let mut c = 0usize;
    while c < classes.len() {
        let class = classes[c];
        let start = c;
        while c + 1 < classes.len() && classes[c + 1] == class {
            c += 1;
        }
        if class != Class::Other {
            generated.push_str(&format!("    (0x{start:X}, 0x{c:X}, {class:?}),\n"));
        }
        c += 1;
    }
    generated.push_str("];\n");
    check_generated(
        "src/tokens/unicode.rs",
        include_bytes!("unicode.rs"),
        generated.as_bytes(),
    );
    if regenerate() {
        return;
    }
    for (c, &class) in classes.iter().enumerate() {
        assert_eq!(class_of(c as u32), class, "U+{c:04X}");
    }
}

#[test]
fn contraction_letters_fold_only_to_their_ascii_cases_and_long_s() {
    for letter in ['s', 't', 'r', 'e', 'v', 'm', 'l', 'd'] {
        let hir = regex_syntax::Parser::new()
            .parse(&format!("(?i:{letter})"))
            .expect("parses");
        let mut chars = match hir.kind() {
            regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(c)) => c
                .ranges()
                .iter()
                .flat_map(|r| r.start()..=r.end())
                .collect::<Vec<char>>(),
            other => panic!("{other:?}"),
        };
        chars.sort_unstable();
        let mut expected = vec![letter.to_ascii_uppercase(), letter];
        if letter == 's' {
            expected.push('ſ');
        }
        expected.sort_unstable();
        assert_eq!(chars, expected, "(?i:{letter})");
    }
}

/// Mixed English, code, JSON, Unicode of every class, long whitespace runs, numbers,
/// and pieces long enough for the heap merge.
fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = [
        "hello world",
        "It's the team's decision: we'll ship, they're sure, I'd say we've won; I'M SURE THEY'LL AGREE, DON'T YOU?",
        "O'Neil's rock'n'roll 'tis 're 've 'll 'd 'm 's 't ' 'S 'ſ x'ſ X'ſ 'Re 'rE 'LL 'lL",
        "Decision D12 (reaffirmed 3×): use PostgreSQL 16 for the task-management API — not SQLite.",
        "## Unresolved issues\n- [critical] I4: login endpoint is not rate limited (since turn 7)\n",
        "fn main() {\n    let x: Vec<u8> = vec![0x7f, 255, 1_000];\n\tprintln!(\"{x:?}\");\n}\n",
        "def f(a, b=2, *args, **kw):\n    return {'a': a, \"b\": b}  # comment\r\n\r\n\n\n",
        r#"{"id":"T3","status":"open","tags":["auth","api"],"score":0.875,"nested":{"k":[1,2,3]}}"#,
        "{\n  \"objective\": \"Build a small task-management API\",\n  \"budget\": 2000\n}\n",
        "SELECT t.id, count(*) FROM tasks t WHERE t.done = false GROUP BY 1 ORDER BY 2 DESC;",
        "cd /work && CARGO_TARGET_DIR=/tmp/t cargo test -p baton-core -- --nocapture 2>&1 | tail -n 20",
        "https://example.com/a/b/c?x=1&y=%20two#frag //comment /// doc //\n/\r\n//",
        "HTTPServerError camelCaseXMLParser snake_case_name __init__ ALLCAPS MiXeD iPhone eBay",
        "1234567890 3.14159 1,000,000 -42 +7 0xdeadbeef 2026-12-01T22:44:41Z 555-0100 1e-9",
        "١٢٣ ４５６ ⅠⅡⅢ ²³ ½ ๑๒๓",
        "naïve café résumé Ångström façade über straße ÆØÅ œuvre",
        "e\u{301}cole a\u{301}\u{302}b \u{301}start (\u{301}) \u{301}\u{302} x \u{301}ABC z\u{301}Q",
        "日本語のテキストとカタカナ、漢字。中文文本，标点符号！한국어 텍스트입니다.",
        "Русский ТЕКСТ Текст ελληνικά ΕΛΛΗΝΙΚΆ עברית العربية हिन्दी में लिखा ไทย ภาษา",
        "ǅungla ǈ ǋ ʰʷ ˈstress ꜰᴀᴋᴇ ℌ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ＦＵＬＬ ｗｉｄｔｈ",
        "emoji 😀👍🏽 👩‍👩‍👧 🇯🇵🇫🇷 ❤️ ✓ ✗ → ← ∑∫√ ≤ ≥ ≠ ∞ €£¥ ©®™",
        "tabs\tand\tmore\t\t\tx\u{b}\u{c}\u{85}next\u{a0}nbsp\u{3000}ideographic\u{2028}ls\u{2029}ps",
        "trailing spaces   ",
        "   leading spaces",
        "\n\n\n",
        "  \n  x",
        " \t \n \t x",
        "a\r\nb\rc\nd\r\n\r\ne",
        "\u{0}\u{1}\u{1f}\u{7f} controls \u{1c}\u{1d}\u{1e}",
        "!!!??? ... --- === *** ### ``` ~~~ ''' \"\"\" (((( )))) [[[ ]]] {{{ }}} <<<>>>",
        " (hello) ((world)) [x] {y} <z> \"q\" 'r' `s`",
        "",
        " ",
        "x",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    texts.push(" ".repeat(1000));
    texts.push(format!("a{}b", " ".repeat(300)));
    texts.push(format!("x\n{}\n{}y", "\t".repeat(150), " ".repeat(150)));
    texts.push("\n".repeat(500));
    texts.push("ab".repeat(400));
    texts.push("a".repeat(250));
    texts.push("=".repeat(120) + "\n" + &"-".repeat(240));
    texts.push("0123456789".repeat(30));
    texts.push("QmFzZTY0IGVuY29kZWQgZGF0YSBsb25nIGVub3VnaCB0byBiZSBtb3JlIHRoYW4gMTAwIGJ5dGVzIGluIGEgc2luZ2xlIHBpZWNl".repeat(3));
    texts.push("日本語".repeat(60));
    texts.push("😀".repeat(40));
    texts.push("e\u{301}".repeat(80));
    // Real prose and code: this crate's own sources.
    for source in [
        include_str!("mod.rs"),
        include_str!("o200k.rs"),
        include_str!("pretokenize.rs"),
        include_str!("../compiler/fill.rs"),
        include_str!("../../../../README.md"),
    ] {
        texts.push(source.to_string());
    }
    texts
}

#[test]
fn counts_equal_tiktokens_on_a_mixed_corpus() {
    for text in corpus() {
        assert_same(&text);
        // Every suffix of the short texts too: each starts a piece at a new place.
        if text.len() < 200 {
            for (i, _) in text.char_indices() {
                assert_same(&text[i..]);
            }
        }
    }
}

/// The worker and the step the briefing tests compile for.
pub(super) fn briefed() -> (crate::compiler::WorkerProfile, crate::compiler::Assignment) {
    use crate::compiler::{Assignment, AssignmentKind, WorkerProfile};
    let worker = WorkerProfile {
        id: crate::ids::WorkerId::new("w2"),
        model: "mock/beta".into(),
        family: "beta".into(),
        role: None,
    };
    let assignment = Assignment {
        kind: AssignmentKind::Step,
        step_id: Some("T3".into()),
        task: "Implement token authentication with refresh token rotation".into(),
    };
    (worker, assignment)
}

#[test]
fn briefings_count_as_tiktoken_counts_them() {
    use crate::compiler::compile;
    let (worker, assignment) = briefed();
    for state in [
        crate::synthetic::demo_sized_state(),
        crate::synthetic::state_with_items(400, 3),
    ] {
        for budget in [300, 2000] {
            let package = compile(&state, &assignment, &worker, budget, &BpeEstimator);
            assert_eq!(package.estimator, "bpe-o200k");
            assert_same(&package.text);
            assert_eq!(
                package.tokens,
                TIKTOKEN.encode_ordinary(&package.text).len()
            );
        }
    }
}

/// Every request's user message is its briefing and then the call's own text; counted
/// by extending the briefing's count, it counts as tiktoken counts it whole.
#[test]
fn requests_counted_from_their_briefing_count_as_tiktoken_counts_them() {
    use crate::compiler::{Assignment, AssignmentKind, compile};
    use crate::prompt;
    let (worker, _) = briefed();
    let mut recounted = 0;
    let mut states = vec![crate::synthetic::demo_sized_state()];
    states
        .extend((0..6).map(|seed| crate::synthetic::state_with_items(40 + 60 * seed, seed as u64)));
    for state in &states {
        for (step, task) in [
            (
                Some("T3"),
                "Implement token authentication with refresh token rotation",
            ),
            (
                None,
                "Continue: review what is left and say what comes next.",
            ),
        ] {
            let assignment = Assignment {
                kind: if step.is_some() {
                    AssignmentKind::Step
                } else {
                    AssignmentKind::Continuation
                },
                step_id: step.map(Into::into),
                task: task.into(),
            };
            for budget in [60, 300, 800, 2000, 3000] {
                let package = compile(state, &assignment, &worker, budget, &BpeEstimator);
                let answer = "{\"summary\": \"did it\", \"last_action\": \"wrote it.\"}";
                for user in [
                    prompt::combined_prompt(&package).user,
                    prompt::execute_prompt(&package).user,
                    prompt::handoff_prompt(&package, answer).user,
                ] {
                    let whole = TIKTOKEN.encode_ordinary(&user).len();
                    assert_eq!(
                        count_extended(&BpeEstimator, &package.text, package.tokens, &user),
                        whole,
                        "budget {budget}, briefing ending {:?}",
                        &package.text[package.text.len().saturating_sub(80)..]
                    );
                    recounted += 1;
                }
            }
        }
    }
    assert!(recounted >= 200, "{recounted} requests");
}

/// A wrong count for the known part is not trusted: the text is counted whole.
#[test]
fn a_known_count_that_is_wrong_or_a_text_that_does_not_extend_it_counts_whole() {
    let known = "## Task\nDo it.\n## Objective\nShip";
    let text = format!("{known}\n\n---\n## Your answer\nNow.");
    let whole = BpeEstimator.count(&text);
    assert_eq!(
        count_extended(&BpeEstimator, known, BpeEstimator.count(known), &text),
        whole
    );
    assert_eq!(count_extended(&BpeEstimator, known, 0, &text), whole);
    assert_eq!(
        count_extended(&BpeEstimator, "something else", 3, &text),
        whole
    );
    // An estimator that names no cut counts the whole text.
    assert_eq!(
        count_extended(&HeuristicEstimator, known, 1_000, &text),
        HeuristicEstimator.count(&text)
    );
}

/// A cut after a line break is refused before whitespace and `/`: there a join changes
/// the pieces (a newline run grows, `[\r\n/]*` goes on).
#[test]
fn a_cut_before_whitespace_or_a_slash_is_refused_because_a_join_changes_the_pieces() {
    for (a, b) in [
        ("x\n", "\ny"),
        ("x\n", " \ny"),
        ("x\n", "\r\ny"),
        ("x.\n", "/y"),
        ("x\n", "\u{a0}\ny"),
    ] {
        let next = b.chars().next().unwrap_or_default();
        assert!(!splits_after_line_break(next), "{next:?}");
        let mut parts = tiktoken_pieces(a);
        parts.extend(tiktoken_pieces(b));
        assert_ne!(tiktoken_pieces(&format!("{a}{b}")), parts, "{a:?} + {b:?}");
    }
}

/// Fragments that meet at every kind of boundary the pattern distinguishes.
const FRAGMENTS: &[&str] = &[
    "a", "Z", "word", " the", "CAPS", "Mixed", "'s", "'T", "'re", "'VE", "'ll", "'d", "'m", "'",
    "ſ", "'ſ", "é", "\u{301}", "\u{302}", "ǅ", "ʰ", "日", "本", "한", "ß", "Σ", "σ", "0", "12",
    "345", "٣", "½", "Ⅻ", " ", "  ", "\t", "\n", "\r", "\r\n", "\u{a0}", "\u{3000}", "\u{85}",
    "\u{b}", ".", ",", "!", "?", "/", "//", "(", ")", "{", "}", "\"", "-", "_", "=", "#", "`",
    "😀", "🏽", "\u{200d}", "\u{0}", "\u{7f}", "→",
];

proptest! {
    #[test]
    fn counts_equal_tiktokens_on_generated_text(
        parts in proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..60)
    ) {
        let text = parts.concat();
        prop_assert_eq!(our_pieces(&text), tiktoken_pieces(&text));
        prop_assert_eq!(o200k::count(&text), TIKTOKEN.encode_ordinary(&text).len());
    }

    #[test]
    fn counts_equal_tiktokens_on_any_text(text in any::<String>()) {
        prop_assert_eq!(our_pieces(&text), tiktoken_pieces(&text));
        prop_assert_eq!(o200k::count(&text), TIKTOKEN.encode_ordinary(&text).len());
    }
}

proptest! {
    // Cuts before a rejected char are a few in a hundred cases: many cases, so that
    // a wrong acceptance is met.
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Cut after any line break before a char `splits_after_line_break` accepts, a text
    /// has tiktoken's pieces of its two parts and their two counts added up.
    #[test]
    fn a_text_cut_after_a_line_break_counts_as_its_parts(
        before in proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..30),
        next in proptest::sample::select(FRAGMENTS),
        after in proptest::collection::vec(proptest::sample::select(FRAGMENTS), 0..30),
    ) {
        let a = before.concat() + "\n";
        let b = format!("{next}{}", after.concat());
        let joined = format!("{a}{b}");
        if b.chars().next().is_some_and(splits_after_line_break) {
            let mut parts = tiktoken_pieces(&a);
            parts.extend(tiktoken_pieces(&b));
            prop_assert_eq!(tiktoken_pieces(&joined), parts);
            prop_assert_eq!(
                TIKTOKEN.encode_ordinary(&joined).len(),
                TIKTOKEN.encode_ordinary(&a).len() + TIKTOKEN.encode_ordinary(&b).len()
            );
            prop_assert_eq!(
                count_extended(&BpeEstimator, &a, o200k::count(&a), &joined),
                o200k::count(&joined)
            );
        }
    }
}
