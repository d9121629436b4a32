//! API keys. A `Credential` is built from an environment variable (or a literal the
//! caller already holds), handed to the gateway that needs it, and never leaves it
//! (invariant 9): it has no `Serialize`, its `Debug` and `Display` print `[redacted]`,
//! its memory is zeroed when dropped (`secrecy`), and provider error bodies are scrubbed
//! of it before they become error messages. It is the one secret type: the engine holds
//! a roster's literal keys in it too.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::options::{ProviderOptions, parse_part};
use crate::{Error, Options, Result, split_model};

/// A provider secret. Only the HTTP layer of this crate reads it.
#[derive(Clone)]
pub struct Credential(SecretString);

impl PartialEq for Credential {
    fn eq(&self, other: &Self) -> bool {
        self.secret() == other.secret()
    }
}

impl Eq for Credential {}

impl Credential {
    /// Wraps a secret. Surrounding whitespace (a newline pasted with the key) is dropped.
    pub fn new(secret: impl Into<String>) -> Result<Self> {
        let secret = secret.into();
        let trimmed = secret.trim();
        if trimmed.is_empty() {
            return Err(Error::Auth {
                message: "the API key is empty".into(),
            });
        }
        Ok(Credential(SecretString::from(trimmed)))
    }

    pub(crate) fn secret(&self) -> &str {
        self.0.expose_secret()
    }

    /// Replaces every occurrence of the secret in `text`, for error bodies that echo it.
    pub(crate) fn scrub(&self, text: &str) -> String {
        // A dummy key of a few characters (local servers take anything) would turn every
        // occurrence of those letters into `[redacted]`, garbling the message and
        // spelling out the key by where it cut; real keys are long.
        let secret = self.secret();
        if secret.len() >= MIN_SCRUB_LEN && text.contains(secret) {
            text.replace(secret, "[redacted]")
        } else {
            text.to_string()
        }
    }

    /// `scrub` for bytes that are not UTF-8.
    fn scrub_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let secret = self.secret().as_bytes();
        if secret.len() < MIN_SCRUB_LEN {
            return bytes.to_vec();
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i..].starts_with(secret) {
                out.extend_from_slice(b"[redacted]");
                i += secret.len();
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        out
    }

    /// The vendor whose keys look like this one, when the shape says so.
    pub(crate) fn family(&self) -> Option<KeyFamily> {
        KeyFamily::of(self.secret())
    }
}

/// Every key the process holds, to scrub from whatever a model returns before it is
/// stored, reconciled or briefed to another worker: a provider echoing one worker's
/// key must not hand it to the next worker's provider (invariant 9). Holds the keys
/// themselves, so it prints none of them.
#[derive(Clone, Default)]
pub struct Redactor {
    keys: Vec<Credential>,
}

impl Redactor {
    pub fn add(&mut self, key: &Credential) {
        if !self.keys.contains(key) {
            self.keys.push(key.clone());
        }
    }

    /// `text` with every known key replaced by `[redacted]`, also where a JSON string
    /// spells it with escapes (`\u002d` for `-`): a claim is decoded before it is
    /// reconciled, so the escaped form would reach the record in clear.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for key in &self.keys {
            out = key.scrub(&out);
        }
        if out.contains('\\') {
            out = self.scrub_json_strings(&out);
        }
        out
    }

    /// Scrubs every known key from the file at `path` (a gate's whole log, of any size),
    /// a line at a time so the file is never held whole. The scrubbed copy is written
    /// beside it and renamed over it, so a reader never sees half of each; a file that
    /// holds no key is left as it is. Returns whether anything was replaced.
    pub fn scrub_file(&self, path: &Path) -> std::io::Result<bool> {
        if self.keys.is_empty() {
            return Ok(false);
        }
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".scrubbing");
        let tmp = path.with_file_name(name);
        let result = self.scrub_into(path, &tmp);
        match result {
            Ok(true) => std::fs::rename(&tmp, path).map(|()| true),
            other => {
                let _ = std::fs::remove_file(&tmp);
                other
            }
        }
    }

    fn scrub_into(&self, path: &Path, tmp: &Path) -> std::io::Result<bool> {
        let mut reader = BufReader::new(File::open(path)?);
        let mut out = BufWriter::new(File::create(tmp)?);
        let mut line = Vec::new();
        let mut changed = false;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            let scrubbed = match std::str::from_utf8(&line) {
                Ok(text) => self.scrub(text).into_bytes(),
                // A log may hold any bytes; a key is text, so it is found byte-wise.
                Err(_) => self
                    .keys
                    .iter()
                    .fold(line.clone(), |bytes, key| key.scrub_bytes(&bytes)),
            };
            changed |= scrubbed != line;
            out.write_all(&scrubbed)?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(changed)
    }

    /// Every JSON string literal in `text` that decodes to something holding a key is
    /// replaced by the encoding of its scrubbed value.
    fn scrub_json_strings(&self, text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut copied = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'"' {
                i += 1;
                continue;
            }
            // The literal's end: the next quote not escaped by a backslash.
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            if j >= bytes.len() {
                break;
            }
            let literal = &text[i..=j];
            if literal.contains('\\')
                && let Ok(decoded) = serde_json::from_str::<String>(literal)
            {
                let mut scrubbed = decoded.clone();
                for key in &self.keys {
                    scrubbed = key.scrub(&scrubbed);
                }
                if scrubbed != decoded
                    && let Ok(encoded) = serde_json::to_string(&scrubbed)
                {
                    out.push_str(&text[copied..i]);
                    out.push_str(&encoded);
                    copied = j + 1;
                }
            }
            i = j + 1;
        }
        out.push_str(&text[copied..]);
        out
    }
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} keys, [redacted])", self.keys.len())
    }
}

/// Keys shorter than this are not scrubbed from messages (see `scrub`).
const MIN_SCRUB_LEN: usize = 8;

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential([redacted])")
    }
}

impl fmt::Display for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Vendors whose key prefixes are distinctive enough to recognise a key offered to the
/// wrong provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyFamily {
    Anthropic,
    OpenRouter,
    OpenAi,
    Google,
    Groq,
    Xai,
}

impl KeyFamily {
    fn of(secret: &str) -> Option<Self> {
        // Order matters: the Anthropic and OpenRouter prefixes also start with `sk-`.
        if secret.starts_with("sk-ant-") {
            Some(KeyFamily::Anthropic)
        } else if secret.starts_with("sk-or-") {
            Some(KeyFamily::OpenRouter)
        } else if secret.starts_with("sk-") {
            Some(KeyFamily::OpenAi)
        } else if secret.starts_with("AIza") {
            Some(KeyFamily::Google)
        } else if secret.starts_with("gsk_") {
            Some(KeyFamily::Groq)
        } else if secret.starts_with("xai-") {
            Some(KeyFamily::Xai)
        } else {
            None
        }
    }

    pub(crate) fn article_name(self) -> &'static str {
        match self {
            KeyFamily::Anthropic => "an Anthropic",
            KeyFamily::OpenRouter => "an OpenRouter",
            KeyFamily::OpenAi => "an OpenAI (or OpenAI-style `sk-`)",
            KeyFamily::Google => "a Google (Gemini)",
            KeyFamily::Groq => "a Groq",
            KeyFamily::Xai => "an xAI",
        }
    }
}

/// Resolves a worker's key: from the environment variable `api_key_env`, or from a
/// `literal` the caller already holds (a command-line flag, a secrets manager). Neither
/// gives `Ok(None)`. A missing or empty variable is an `Auth` error naming the variable,
/// never a value.
pub fn resolve_credential(
    api_key_env: Option<&str>,
    literal: Option<&str>,
) -> Result<Option<Credential>> {
    match (api_key_env, literal) {
        (Some(_), Some(_)) => Err(Error::Config(
            "give the API key either through an environment variable or directly, not both".into(),
        )),
        (Some(var), None) if var.trim().is_empty() => Err(Error::Config(
            "api_key_env is empty; write the name of the environment variable that holds the key (api_key_env = \"PROVIDER_API_KEY\"), or remove it to use the provider's usual variable".into(),
        )),
        (Some(var), None) => match std::env::var(var) {
            Ok(value) if !value.trim().is_empty() => Credential::new(value).map(Some),
            Ok(_) => Err(Error::Auth {
                message: format!("environment variable {var} is set but empty"),
            }),
            Err(std::env::VarError::NotPresent) => Err(Error::Auth {
                message: format!(
                    "environment variable {var} is not set; export it with the key (or point the worker's api_key_env elsewhere)"
                ),
            }),
            Err(std::env::VarError::NotUnicode(_)) => Err(Error::Auth {
                message: format!("environment variable {var} is not valid UTF-8"),
            }),
        },
        (None, Some(value)) => Credential::new(value).map(Some),
        (None, None) => Ok(None),
    }
}

/// The options the key lookup reads, before any gateway is built. Not
/// `deny_unknown_fields`: the provider's own keys sit beside them, and its gateway
/// refuses the ones nobody reads.
#[derive(Deserialize)]
struct KeyOptions {
    api_key_env: Option<String>,
    /// Refused whatever its value (`null` too): keys must not live in the roster.
    #[serde(default, deserialize_with = "given")]
    api_key: bool,
}

/// A command worker's `preset`, whose CLI's own variable is its key.
#[derive(Deserialize)]
struct PresetOption {
    preset: Option<String>,
}

impl ProviderOptions for KeyOptions {
    fn expects(_key: &str) -> &'static str {
        "the name of an environment variable"
    }
}

impl ProviderOptions for PresetOption {
    fn expects(_key: &str) -> &'static str {
        "the name of a preset"
    }
}

/// True for any value at all: the field was given.
fn given<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

/// The credential a worker's options ask for: `options.api_key_env` names the variable
/// (it must be set); without it, the provider's conventional variable
/// (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, …) is used when set.
/// Keys are deliberately not read from the options themselves: options are roster
/// data and may be stored, keys must not be (invariant 9).
pub fn credential_for(model: &str, options: &Options) -> Result<Option<Credential>> {
    let read: KeyOptions = parse_part(options)?;
    if read.api_key {
        return Err(Error::Config(
            "options.api_key is not accepted (keys must not live in the roster); set options.api_key_env to the name of an environment variable".into(),
        ));
    }
    if let Some(var) = read.api_key_env {
        return resolve_credential(Some(&var), None);
    }
    let (provider, _) = split_model(model)?;
    if provider == "command" {
        // A preset agent's key is its CLI's own variable (`ANTHROPIC_API_KEY` for
        // Claude Code): optional, since a CLI may be logged in another way.
        let preset = match parse_part::<PresetOption>(options)?.preset {
            Some(name) => Some(crate::command::named_preset(&name)?),
            None => None,
        };
        return match preset.and_then(crate::command::Preset::key_source) {
            Some(var) => resolve_credential(Some(var), None),
            None => Ok(None),
        };
    }
    let Some(kind) = crate::providers::ProviderKind::from_prefix(provider) else {
        return Ok(None);
    };
    match kind.default_key_env() {
        Some(var) => match std::env::var(var) {
            Ok(value) if !value.trim().is_empty() => Credential::new(value).map(Some),
            _ => Ok(None),
        },
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_secret() {
        let c = Credential::new("sk-ant-api03-secret\n").unwrap();
        assert_eq!(format!("{c:?}"), "Credential([redacted])");
        assert_eq!(format!("{c}"), "[redacted]");
        assert_eq!(
            format!("{:?}", Some(c.clone())),
            "Some(Credential([redacted]))"
        );
        assert_eq!(c.secret(), "sk-ant-api03-secret");
        assert_eq!(
            c.scrub("bad key sk-ant-api03-secret given"),
            "bad key [redacted] given"
        );
    }

    #[test]
    fn the_redactor_scrubs_every_key_it_holds_and_prints_none() {
        let mut r = Redactor::default();
        r.add(&Credential::new("sk-proj-first-0123456789").unwrap());
        r.add(&Credential::new("sk-ant-second-0123456789").unwrap());
        assert_eq!(
            r.scrub("a sk-proj-first-0123456789 b sk-ant-second-0123456789 c"),
            "a [redacted] b [redacted] c"
        );
        assert!(!format!("{r:?}").contains("first"));
    }

    #[test]
    fn a_file_is_scrubbed_whole_keeping_every_other_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gate.log");
        let mut log = b"first line\nkey=sk-proj-first-0123456789 here\n".to_vec();
        // Not UTF-8, and no newline at the end: both still scrubbed, nothing else lost.
        log.extend_from_slice(b"\xff\xfe sk-ant-second-0123456789\n");
        log.extend_from_slice(&b"x".repeat(100_000));
        log.extend_from_slice(b"sk-proj-first-0123456789");
        std::fs::write(&path, &log).unwrap();
        let mut r = Redactor::default();
        r.add(&Credential::new("sk-proj-first-0123456789").unwrap());
        r.add(&Credential::new("sk-ant-second-0123456789").unwrap());
        assert!(r.scrub_file(&path).unwrap());
        let mut want = b"first line\nkey=[redacted] here\n\xff\xfe [redacted]\n".to_vec();
        want.extend_from_slice(&b"x".repeat(100_000));
        want.extend_from_slice(b"[redacted]");
        assert!(std::fs::read(&path).unwrap() == want);
        // Nothing left to scrub: untouched, and no scratch file stays behind.
        assert!(!r.scrub_file(&path).unwrap());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn a_missing_variable_is_named_and_no_value_is_shown() {
        let err = resolve_credential(Some("BATON_TEST_SURELY_UNSET_VAR"), None).unwrap_err();
        assert_eq!(err.class(), crate::ErrorClass::Auth);
        assert!(
            err.to_string().contains("BATON_TEST_SURELY_UNSET_VAR"),
            "{err}"
        );
        assert_eq!(resolve_credential(None, None).unwrap(), None);
        assert!(resolve_credential(None, Some("  ")).is_err());
        assert!(resolve_credential(Some("X"), Some("y")).is_err());
        let lit = resolve_credential(None, Some("abc")).unwrap().unwrap();
        assert_eq!(lit.secret(), "abc");
    }

    #[test]
    fn key_shapes() {
        let fam = |s: &str| KeyFamily::of(s);
        assert_eq!(fam("sk-ant-api03-x"), Some(KeyFamily::Anthropic));
        assert_eq!(fam("sk-proj-x"), Some(KeyFamily::OpenAi));
        assert_eq!(fam("sk-or-v1-x"), Some(KeyFamily::OpenRouter));
        assert_eq!(fam("AIzaSyX"), Some(KeyFamily::Google));
        assert_eq!(fam("gsk_x"), Some(KeyFamily::Groq));
        assert_eq!(fam("xai-x"), Some(KeyFamily::Xai));
        assert_eq!(fam("0123abcd"), None);
    }

    /// Regression: an empty variable name was looked up as "" and reported as an
    /// unset variable with no name, an authentication failure.
    #[test]
    fn an_empty_variable_name_is_a_configuration_error_not_an_unset_key() {
        for name in ["", "  "] {
            let err = resolve_credential(Some(name), None).unwrap_err();
            assert!(matches!(err, Error::Config(_)), "{err:?}");
            assert!(err.to_string().contains("api_key_env is empty"), "{err}");
        }
    }

    #[test]
    fn options_never_carry_a_literal_key() {
        let mut o = Options::new();
        o.insert("api_key".into(), "sk-x".into());
        assert!(credential_for("openai/gpt-4.1", &o).is_err());
    }

    #[test]
    fn the_key_options_are_typed_and_a_bad_one_is_refused_by_name() {
        let lookup = |model: &str, options: serde_json::Value| {
            credential_for(model, options.as_object().unwrap()).map_err(|e| e.to_string())
        };
        let err = lookup("openai/gpt", serde_json::json!({"api_key_env": 3})).unwrap_err();
        assert!(
            err.contains("options.api_key_env must be the name of an environment variable, got 3"),
            "{err}"
        );
        // Refused whatever its value, `null` included: a key must not sit in the roster.
        for value in [serde_json::json!("sk-x"), serde_json::Value::Null] {
            let err = lookup("openai/gpt", serde_json::json!({"api_key": value})).unwrap_err();
            assert!(err.contains("options.api_key is not accepted"), "{err}");
        }
        // A preset that is not one, or not a name, was taken for "no preset, no key".
        let err = lookup("command/a", serde_json::json!({"preset": 3})).unwrap_err();
        assert!(
            err.contains("options.preset must be the name of a preset, got 3"),
            "{err}"
        );
        let err = lookup("command/a", serde_json::json!({"preset": "claud"})).unwrap_err();
        assert!(err.contains("unknown options.preset \"claud\""), "{err}");
        // The provider's own keys sit beside them, for its gateway to check.
        assert_eq!(
            lookup("ollama/llama3", serde_json::json!({"timeout_s": 5})),
            Ok(None)
        );
    }

    #[test]
    fn a_key_spelled_with_json_escapes_is_scrubbed_too() {
        let mut r = Redactor::default();
        r.add(&Credential::new("sk-SENTINEL-abc123xyz").unwrap());
        let reply = r#"{"summary":"done sk-SENTINEL\u002dabc123xyz","last_action":"ok \"q\" sk-SENTINEL-abc123xyz"}"#;
        let scrubbed = r.scrub(reply);
        let v: serde_json::Value = serde_json::from_str(&scrubbed).unwrap();
        let all = v.to_string();
        assert!(!all.contains("sk-SENTINEL"), "{all}");
        assert_eq!(v["summary"], "done [redacted]");
        assert_eq!(v["last_action"], "ok \"q\" [redacted]");
        // Text without escapes is left as the plain pass made it.
        assert_eq!(r.scrub("plain text"), "plain text");
        assert_eq!(r.scrub(r#"a \ b "unterminated"#), r#"a \ b "unterminated"#);
    }
}
