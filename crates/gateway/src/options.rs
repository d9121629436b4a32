//! Checking a worker's `options` against what its gateway reads, before anything is
//! built: a key nobody reads is a typo or a misplaced setting, and is refused with the
//! keys that are read and the nearest of them.
//!
//! Each gateway keeps its list of keys next to the code that reads them (`KNOWN_OPTIONS`
//! in `providers`, `command`, `mock` and `scripted`); `replay` is read by
//! [`for_model_with_credential`](crate::for_model_with_credential) for every provider.

use crate::{Error, Options, Result, split_model};

/// Read before any provider is chosen: replays recorded answers for any worker.
pub(crate) const REPLAY: &str = "replay";

/// The option keys the gateway of `model` reads (without `replay`, which every
/// provider accepts).
pub fn known_options(model: &str) -> Result<&'static [&'static str]> {
    let (provider, _) = split_model(model)?;
    match provider {
        "mock" => Ok(crate::mock::KNOWN_OPTIONS),
        "scripted" => Ok(crate::scripted::KNOWN_OPTIONS),
        "command" => Ok(crate::command::KNOWN_OPTIONS),
        other => match crate::providers::ProviderKind::from_prefix(other) {
            Some(_) => Ok(crate::providers::KNOWN_OPTIONS),
            None => Err(Error::UnknownProvider {
                provider: other.to_string(),
                model: model.to_string(),
                known: crate::KNOWN_PROVIDERS,
            }),
        },
    }
}

/// Checks a worker's options without building its gateway, reading any file or
/// environment variable, or needing its key: every key must be one its provider reads,
/// and every value of the type that key takes. A gateway built from options that pass
/// may still fail on what is outside them (a missing key, script file or `bwrap`).
pub fn check_options(model: &str, options: &Options) -> Result<()> {
    let (provider, name) = split_model(model)?;
    let known = known_options(model)?;
    refuse_unknown(provider, options, &[known, &[REPLAY]].concat())?;
    if let Some(replay) = options.get(REPLAY)
        && !replay.is_string()
    {
        return Err(Error::Config(format!(
            "options.replay must be a file path, got {replay}"
        )));
    }
    // The provider's own keys are checked even beside a replay, which reads none of
    // them: the worker is meant to run for real one day.
    let mut own = options.clone();
    own.remove(REPLAY);
    match provider {
        "mock" => crate::mock::MockGateway::from_options(&own).map(drop),
        // A replayed scripted worker needs no script of its own.
        "scripted" if options.contains_key(REPLAY) => Ok(()),
        "scripted" => crate::scripted::script_path(model, &own).map(drop),
        "command" => crate::command::CommandGateway::check(name, &own),
        other => match crate::providers::ProviderKind::from_prefix(other) {
            Some(kind) => crate::providers::HttpGateway::check(kind, name, &own),
            None => Ok(()),
        },
    }
}

/// Refuses the first key of `options` that is not in `known`, naming the nearest known
/// key when one is close.
pub(crate) fn refuse_unknown(provider: &str, options: &Options, known: &[&str]) -> Result<()> {
    if options.contains_key("api_key") {
        // Keys are roster data's one exception: they must not be stored (invariant 9).
        return Err(Error::Config(
            "options.api_key is not accepted (keys must not live in the roster); set api_key_env to the name of an environment variable".into(),
        ));
    }
    let Some(key) = options.keys().find(|k| !known.contains(&k.as_str())) else {
        return Ok(());
    };
    Err(Error::UnknownOption {
        provider: provider.to_string(),
        key: key.clone(),
        suggestion: nearest(key, known).map(str::to_string),
        known: known.join(", "),
    })
}

/// The known key closest to `key` by edit distance, when it is close enough to be the
/// one meant: at most two edits (a swapped pair of letters is two), or a third of the
/// key's length for long keys.
fn nearest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let limit = (key.chars().count() / 3).max(2);
    known
        .iter()
        .map(|k| (edit_distance(key, k), *k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("timeout_s", "timeout_s"), 0);
        assert_eq!(edit_distance("timeuot_s", "timeout_s"), 2);
        assert_eq!(edit_distance("delay", "delay_ms"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn the_nearest_key_is_suggested_only_when_it_is_close() {
        let known = crate::providers::KNOWN_OPTIONS;
        assert_eq!(nearest("timeuot_s", known), Some("timeout_s"));
        assert_eq!(nearest("api_bse", known), Some("api_base"));
        assert_eq!(nearest("strict", known), None);
        assert_eq!(nearest("max_retries", known), None);
    }
}
