//! What a plan step works on: its own part of the work, or the work of the steps before
//! it (a review, a check, an audit, a summary, a report). The compiler's relevance floor
//! keeps other steps' completed work and artifacts out of a briefing unless they share
//! the task's terms; a step that covers earlier work must see them whatever its words.

use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The work a plan step covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepScope {
    /// Its own part: other steps' work is shown when it is recent or shares the task's
    /// own terms (the relevance floor).
    Own,
    /// The work of every earlier step: their completed work and artifacts are all
    /// candidates for its briefing, ranked and capped like any record, never left out
    /// as not relevant.
    Earlier,
}

/// Verbs (and nouns) that, opening a step's title, make it a step over earlier work whatever
/// follows: a step that reviews, audits or sums up has nothing else to work on.
const COVERING_VERBS: &[&str] = &[
    "review",
    "re-review",
    "audit",
    "assess",
    "evaluate",
    "critique",
    "inspect",
    "proofread",
    "summarise",
    "summarize",
    "recap",
    "summary",
];

/// Verbs that open a review as often as a piece of work of its own ("Verify the plan"
/// against "Verify email addresses", "Report on the work so far" against "Report
/// errors as JSON"): they count only with words that name earlier work.
const CHECKING_VERBS: &[&str] = &[
    "check",
    "double-check",
    "cross-check",
    "verify",
    "validate",
    "report",
    "confirm",
];

/// Words that name earlier work as a checking verb's object.
const EARLIER_WORK: &[&str] = &[
    "plan",
    "work",
    "steps",
    "changes",
    "change",
    "results",
    "result",
    "everything",
    "whole",
    "overall",
    "earlier",
    "previous",
    "so far",
    "findings",
    "progress",
];

/// Words before a verb or noun of review that leave the title a review ("Final review
/// of the API", "Peer review", "Sanity check the plan").
const QUALIFIERS: &[&str] = &[
    "final", "overall", "full", "code", "design", "peer", "security", "sanity", "quick", "last",
    "a", "an", "the",
];

impl StepScope {
    /// The name a plan (and `--step-scope`) gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            StepScope::Own => "own",
            StepScope::Earlier => "earlier",
        }
    }
}

impl FromStr for StepScope {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<StepScope> {
        match s.trim() {
            "own" => Ok(StepScope::Own),
            "earlier" => Ok(StepScope::Earlier),
            _ => Err(crate::Error::UnknownStepScope { value: s.into() }),
        }
    }
}

impl StepScope {
    /// The default scope of a step titled `title`: `Earlier` when the title opens with
    /// a verb (or a noun) of review — review, audit, assess, evaluate, critique,
    /// inspect, proofread, summarise, recap at any time; check, verify, validate,
    /// report, confirm when the title also names earlier work (the plan, the work, the
    /// steps, the changes, the results, everything, so far, …) — possibly after a
    /// qualifier (final, overall, peer, sanity, …). A step wrongly taken for a review
    /// only sees more of the earlier work; one wrongly missed loses it, so the rule
    /// leans to counting.
    pub fn of_title(title: &str) -> StepScope {
        let lower = title.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !(c.is_alphanumeric() || c == '-'))
            .filter(|w| !w.is_empty())
            .collect();
        let lead = words
            .iter()
            .position(|w| !QUALIFIERS.contains(w))
            .map_or("", |i| words[i]);
        let names_earlier_work = || {
            EARLIER_WORK.iter().any(|e| {
                if e.contains(' ') {
                    lower.contains(e)
                } else {
                    words.contains(e)
                }
            })
        };
        if COVERING_VERBS.contains(&lead)
            || (CHECKING_VERBS.contains(&lead) && names_earlier_work())
        {
            StepScope::Earlier
        } else {
            StepScope::Own
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StepScope;

    #[test]
    fn review_like_titles_cover_earlier_work_and_others_do_not() {
        let earlier = [
            "Review the plan",
            "review the whole architecture for inconsistencies and missing dependencies",
            "Review the PostgreSQL schema, the authentication design and the REST endpoints",
            "Final review of the API",
            "Code review",
            "Audit the security of the design",
            "Assess the risks of the migration",
            "Summarise the decisions for the client",
            "Summarize the work",
            "Summary of the findings",
            "Verify the plan against the objective",
            "Check the changes for regressions",
            "Sanity check everything",
            "Report on the progress so far",
            "Validate the results of steps 1-4",
            "Double-check the whole design",
            "Proofread the translation",
            "Re-review the endpoints after the fixes",
        ];
        let own = [
            "Implement the review endpoints",
            "Design the PostgreSQL schema",
            "Verify email addresses on signup",
            "Report errors as RFC 7807 problem documents",
            "Check in the generated client",
            "Validate request bodies with pydantic",
            "Write tests for the login flow",
            "Define the REST endpoints",
            "Add a health check endpoint",
            "",
        ];
        for t in earlier {
            assert_eq!(StepScope::of_title(t), StepScope::Earlier, "{t:?}");
        }
        for t in own {
            assert_eq!(StepScope::of_title(t), StepScope::Own, "{t:?}");
        }
    }

    #[test]
    fn a_scope_is_read_by_its_name_and_an_unknown_one_says_both() {
        for scope in [StepScope::Own, StepScope::Earlier] {
            assert_eq!(scope.as_str().parse::<StepScope>().unwrap(), scope);
        }
        let err = "review".parse::<StepScope>().unwrap_err().to_string();
        assert!(
            err.contains("\"own\"") && err.contains("\"earlier\""),
            "{err}"
        );
    }
}
