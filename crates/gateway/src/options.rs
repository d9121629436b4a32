//! A worker's `options`, typed per provider: each gateway reads a serde struct with
//! `deny_unknown_fields` (`HttpOptions` in `providers`, `CommandOptions`, `MockOptions`,
//! `ScriptedOptions`), and the keys it knows are that struct's fields — one source, no
//! list kept beside it. Before the struct is read, a key nobody reads (a typo or a
//! misplaced setting) is refused with the keys that are read and the nearest of them;
//! a value of the wrong type is refused naming its key and what it takes. `replay` is
//! read by [`for_model_with_credential`](crate::for_model_with_credential) for every
//! provider.

use serde::de::{self, DeserializeOwned, Visitor};
use serde_json::Value;

use crate::{Error, Options, Result, split_model};

/// A provider's options as a struct (every field optional: absent means the default).
pub(crate) trait ProviderOptions: DeserializeOwned {
    /// What a value of `key` must be, for the message when it is not.
    fn expects(key: &str) -> &'static str;
}

/// Reads `options` as `T`, refusing unknown keys (with the nearest known one) and
/// naming the key whose value has the wrong type.
pub(crate) fn parse<T: ProviderOptions>(provider: &str, options: &Options) -> Result<T> {
    refuse_unknown(provider, options, fields::<T>())?;
    read(options)
}

/// Reads the keys of `options` that are `T`'s fields, leaving the others to whoever
/// reads them (the provider's own keys sit beside `replay` and the key lookup's), and
/// naming the key whose value has the wrong type.
pub(crate) fn parse_part<T: ProviderOptions>(options: &Options) -> Result<T> {
    let known = fields::<T>();
    let part: Options = options
        .iter()
        .filter(|(k, _)| known.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    read(&part)
}

/// `options` as `T`, a value of the wrong type refused naming its key.
fn read<T: ProviderOptions>(options: &Options) -> Result<T> {
    serde_json::from_value(Value::Object(options.clone())).map_err(|e| {
        // serde names the type, not the key: the key is the one whose value alone fails.
        let bad = options.iter().find(|(k, v)| {
            let mut one = Options::new();
            one.insert((*k).clone(), (*v).clone());
            serde_json::from_value::<T>(Value::Object(one)).is_err()
        });
        match bad {
            Some((key, value)) => Error::Config(format!(
                "options.{key} must be {}, got {value}",
                T::expects(key)
            )),
            None => Error::Config(format!("options: {e}")),
        }
    })
}

/// The field names of a struct deriving `Deserialize`, as serde's derive lists them
/// (the keys `deny_unknown_fields` accepts); empty for anything else. Public as
/// `struct_fields`, for the engine's roster hints.
pub fn fields<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names = FieldNames(None);
    let _ = T::deserialize(&mut names);
    names.0.unwrap_or(&[])
}

/// A deserializer that only records the fields a struct asks for.
struct FieldNames(Option<&'static [&'static str]>);

impl<'de> de::Deserializer<'de> for &mut FieldNames {
    type Error = de::value::Error;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        self.0 = Some(fields);
        Err(de::Error::custom("field names read"))
    }

    fn deserialize_any<V: Visitor<'de>>(
        self,
        _visitor: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
        identifier ignored_any
    }
}

/// Read before any provider is chosen: replays recorded answers for any worker.
pub(crate) const REPLAY: &str = "replay";

/// `options.replay`: a file of recorded answers, for any provider. Not
/// `deny_unknown_fields`: the provider's own keys sit beside it.
#[derive(serde::Deserialize)]
struct ReplayOption {
    replay: Option<String>,
}

impl ProviderOptions for ReplayOption {
    fn expects(_key: &str) -> &'static str {
        "a file path"
    }
}

/// The replay file a worker's options name, if any.
pub(crate) fn replay(options: &Options) -> Result<Option<String>> {
    parse_part::<ReplayOption>(options).map(|r| r.replay)
}

/// The option keys the gateway of `model` reads (without `replay`, which every
/// provider accepts).
pub fn known_options(model: &str) -> Result<&'static [&'static str]> {
    let (provider, _) = split_model(model)?;
    match provider {
        "mock" => Ok(fields::<crate::mock::MockOptions>()),
        "scripted" => Ok(fields::<crate::scripted::ScriptedOptions>()),
        "command" => Ok(fields::<crate::command::CommandOptions>()),
        other => match crate::providers::ProviderKind::from_prefix(other) {
            Some(_) => Ok(fields::<crate::providers::HttpOptions>()),
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
    let replayed = replay(options)?.is_some();
    // The provider's own keys are checked even beside a replay, which reads none of
    // them: the worker is meant to run for real one day.
    let mut own = options.clone();
    own.remove(REPLAY);
    match provider {
        "mock" => crate::mock::MockGateway::from_options(&own).map(drop),
        // A replayed scripted worker needs no script of its own.
        "scripted" if replayed => Ok(()),
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
    fn the_known_keys_are_the_structs_fields() {
        assert_eq!(
            fields::<crate::mock::MockOptions>(),
            ["delay_ms"],
            "one source: the struct"
        );
        assert!(fields::<crate::providers::HttpOptions>().contains(&"timeout_s"));
    }

    #[test]
    fn the_nearest_key_is_suggested_only_when_it_is_close() {
        let known = fields::<crate::providers::HttpOptions>();
        assert_eq!(nearest("timeuot_s", known), Some("timeout_s"));
        assert_eq!(nearest("api_bse", known), Some("api_base"));
        assert_eq!(nearest("strict", known), None);
        assert_eq!(nearest("max_retries", known), None);
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_key_and_what_it_takes() {
        let check = |model: &str, options: serde_json::Value| {
            check_options(model, options.as_object().unwrap())
                .unwrap_err()
                .to_string()
        };
        let err = check(
            "openai/gpt",
            serde_json::json!({"timeout_s": 30, "max_tokens": "many"}),
        );
        assert_eq!(
            err,
            "worker configuration: options.max_tokens must be a positive integer, got \"many\""
        );
        let err = check(
            "command/x",
            serde_json::json!({"command": "x", "env": ["A=1"]}),
        );
        assert!(err.contains("options.env must be a table"), "{err}");
        // Checked whether or not a sandbox reads it: a typed field is read in full.
        let err = check(
            "command/x",
            serde_json::json!({"command": "x", "sandbox_hide": "/secret"}),
        );
        assert!(
            err.contains("options.sandbox_hide must be a list of paths"),
            "{err}"
        );
        let err = check("mock/x", serde_json::json!({"replay": 3}));
        assert!(
            err.contains("options.replay must be a file path, got 3"),
            "{err}"
        );
    }
}
