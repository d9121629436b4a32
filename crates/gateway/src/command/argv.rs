//! The command template: split into argv with shell-like quoting (no shell is ever
//! invoked), then placeholders substituted token by token, so a workspace path with a
//! space in it stays one argument.

use crate::{Error, Result};

/// The placeholders a template may use.
pub(crate) const PLACEHOLDERS: &[&str] = &[
    "briefing_file",
    "workspace",
    "claim_file",
    "last_message_file",
];

/// Splits a command line the way a POSIX shell splits words, without expansion
/// (`shlex`): spaces, tabs and newlines separate words; `'…'` is literal; inside `"…"` a
/// backslash escapes `"`, `\`, `$` and `` ` `` (and is kept before anything else);
/// outside quotes a backslash escapes the next character; `''` gives an empty argument;
/// a word that starts with `#` begins a comment.
pub(crate) fn split(line: &str) -> Result<Vec<String>> {
    let words = shlex::split(line).ok_or_else(|| {
        Error::Config(format!(
            "options.command has an unterminated quote or ends with a lone backslash: {line}"
        ))
    })?;
    if words.is_empty() {
        return Err(Error::Config("options.command is empty".into()));
    }
    Ok(words)
}

/// Refuses `{name}` placeholders this provider does not know (a typo such as
/// `{briefing}` would otherwise reach the agent as a literal argument). Braces that
/// do not enclose a bare identifier (`{}`, JSON) are left alone.
pub(crate) fn check_placeholders(argv: &[String]) -> Result<()> {
    for arg in argv {
        let mut rest = arg.as_str();
        while let Some(open) = rest.find('{') {
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else { break };
            let name = &after[..close];
            let identifier = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if identifier && !PLACEHOLDERS.contains(&name) {
                return Err(Error::Config(format!(
                    "options.command uses an unknown placeholder {{{name}}}; known: {{briefing_file}}, {{workspace}}, {{claim_file}}, {{last_message_file}}"
                )));
            }
            rest = &after[close + 1..];
        }
    }
    Ok(())
}

/// Whether any argument names `{placeholder}`.
pub(crate) fn uses(argv: &[String], placeholder: &str) -> bool {
    let needle = format!("{{{placeholder}}}");
    argv.iter().any(|a| a.contains(&needle))
}

/// Substitutes `(placeholder, value)` pairs in every argument.
pub(crate) fn substitute(argv: &[String], values: &[(&str, &str)]) -> Vec<String> {
    argv.iter()
        .map(|arg| {
            let mut out = arg.clone();
            for (name, value) in values {
                let needle = format!("{{{name}}}");
                if out.contains(&needle) {
                    out = out.replace(&needle, value);
                }
            }
            out
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(line: &str) -> Vec<String> {
        split(line).unwrap()
    }

    #[test]
    fn splits_like_a_shell_without_expanding() {
        assert_eq!(
            s("claude -p --output-format json"),
            ["claude", "-p", "--output-format", "json"]
        );
        assert_eq!(
            s(r#"a 'b c' "d \"e\" \$HOME \n" f\ g '' """#),
            ["a", "b c", r#"d "e" $HOME \n"#, "f g", "", ""]
        );
        assert_eq!(s("  x\t\ty  "), ["x", "y"]);
        assert_eq!(s("--msg='hello world'"), ["--msg=hello world"]);
        assert_eq!(s("agent --flag # a note"), ["agent", "--flag"]);
    }

    #[test]
    fn bad_templates_are_config_errors() {
        for bad in ["", "   ", "a 'b", "a \"b", "a \\"] {
            assert_eq!(
                split(bad).unwrap_err().class(),
                crate::ErrorClass::Config,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn placeholders_are_substituted_per_argument() {
        let argv = s("agent --brief {briefing_file} --cwd={workspace} '{\"a\":1}'");
        check_placeholders(&argv).unwrap();
        assert!(uses(&argv, "briefing_file"));
        assert!(!uses(&argv, "claim_file"));
        let out = substitute(
            &argv,
            &[("briefing_file", "/w s/b.md"), ("workspace", "/w s")],
        );
        assert_eq!(
            out,
            ["agent", "--brief", "/w s/b.md", "--cwd=/w s", "{\"a\":1}"]
        );
        let err = check_placeholders(&s("agent {briefing}")).unwrap_err();
        assert!(err.to_string().contains("{briefing}"), "{err}");
        check_placeholders(&s("agent {} {A}")).unwrap();
    }
}
