//! A command per node from a template ([`super::Launch::Template`]): `ssh {host} {agent}`.
//!
//! The template is split into words by the POSIX shell's quoting rules (Shell Command
//! Language, 2.2 Quoting) and nothing else: blanks (space, tab, newline) separate words;
//! `'…'` keeps everything literally; `"…"` keeps everything but a backslash before `$`,
//! `` ` ``, `"`, `\` or a newline; a backslash outside quotes keeps the next character (and
//! drops a backslash–newline pair). No expansion of any kind happens (`$HOME`, `*`,
//! `` `cmd` ``, `$(cmd)` and `~` stay as written): no shell is run. The placeholders are
//! substituted in the words afterwards, so a node name with blanks or quotes stays one
//! argument: `{host}` anywhere in a word, quoted or not; `{agent}`, the agent's command
//! (several arguments), as a word of its own.

use std::ffi::OsString;

use crate::error::TemplateError;

/// The node's placeholder.
const HOST: &str = "{host}";
/// The agent command's placeholder (a word of its own).
const AGENT: &str = "{agent}";

/// A template split into words, checked: it has a word, names `{host}` and has `{agent}` as
/// a word of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Template {
    words: Vec<String>,
}

impl Template {
    /// Splits and checks `template`.
    ///
    /// # Errors
    /// [`TemplateError`] naming the template and, for a quote left open or a backslash
    /// escaping nothing, the column (in characters, from 1).
    pub(super) fn parse(template: &str) -> Result<Template, TemplateError> {
        let words = split(template)?;
        let owned = || template.to_string();
        if words.is_empty() {
            return Err(TemplateError::Empty { template: owned() });
        }
        if !words.iter().any(|w| w.contains(HOST)) {
            return Err(TemplateError::NoHost { template: owned() });
        }
        if !words.iter().any(|w| w == AGENT) {
            return Err(TemplateError::NoAgent { template: owned() });
        }
        Ok(Template { words })
    }

    /// The command's arguments for `host`: each word with `{host}` replaced by `host`, and
    /// the word `{agent}` replaced by the agent's arguments.
    pub(super) fn argv(&self, host: &str, agent: &[OsString]) -> Vec<OsString> {
        let mut argv = Vec::with_capacity(self.words.len() + agent.len());
        for w in &self.words {
            if w == AGENT {
                argv.extend(agent.iter().cloned());
            } else {
                argv.push(w.replace(HOST, host).into());
            }
        }
        argv
    }
}

/// The words of `template` by the shell's quoting rules (see the module docs).
fn split(template: &str) -> Result<Vec<String>, TemplateError> {
    let mut words = Vec::new();
    let mut word = String::new();
    // Whether a word is under way (`''` is a word, an empty one).
    let mut in_word = false;
    let mut chars = template.chars().enumerate().peekable();
    let column = |i: usize| i + 1;
    while let Some((i, c)) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\\' => match chars.next() {
                // A line continuation: both go.
                Some((_, '\n')) => {}
                Some((_, next)) => {
                    word.push(next);
                    in_word = true;
                }
                None => {
                    return Err(TemplateError::TrailingBackslash {
                        template: template.to_string(),
                        column: column(i),
                    });
                }
            },
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some((_, '\'')) => break,
                        Some((_, inner)) => word.push(inner),
                        None => {
                            return Err(TemplateError::UnclosedQuote {
                                template: template.to_string(),
                                quote: '\'',
                                column: column(i),
                            });
                        }
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.peek() {
                            Some((_, '\n')) => {
                                chars.next();
                            }
                            Some(&(_, e @ ('$' | '`' | '"' | '\\'))) => {
                                chars.next();
                                word.push(e);
                            }
                            // Any other character: the backslash is kept.
                            _ => word.push('\\'),
                        },
                        Some((_, inner)) => word.push(inner),
                        None => {
                            return Err(TemplateError::UnclosedQuote {
                                template: template.to_string(),
                                quote: '"',
                                column: column(i),
                            });
                        }
                    }
                }
            }
            other => {
                word.push(other);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(t: &str) -> Vec<String> {
        split(t).unwrap()
    }

    fn args(t: &str, host: &str) -> Vec<String> {
        let agent: Vec<OsString> = vec!["/shared/mpir".into(), "agent".into()];
        Template::parse(t)
            .unwrap()
            .argv(host, &agent)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn words_follow_the_shells_quoting_rules() {
        // Expected values: what `sh -c 'for a in …; do printf "[%s]" "$a"; done'` prints
        // (dash and bash agree), minus the expansions the shell would make.
        assert_eq!(words("a  b\tc\nd"), ["a", "b", "c", "d"]);
        assert_eq!(words("'a b' \"c d\" e\\ f"), ["a b", "c d", "e f"]);
        assert_eq!(words("'it''s' x'y'\"z\""), ["its", "xyz"]);
        assert_eq!(words("'' \"\" x"), ["", "", "x"]);
        // Inside single quotes nothing is special, a backslash included.
        assert_eq!(words(r#"'a\b "c"'"#), [r#"a\b "c""#]);
        // Inside double quotes a backslash escapes only $ ` " \ and a newline.
        assert_eq!(words(r#""a\$b\`c\"d\\e\nf""#), [r#"a$b`c"d\e\nf"#]);
        assert_eq!(words("\"a\\\nb\""), ["ab"]);
        // Outside quotes it escapes anything; backslash-newline joins lines.
        assert_eq!(words(r#"a\'b \"c\" \\"#), ["a'b", "\"c\"", "\\"]);
        assert_eq!(words("a\\\nb"), ["ab"]);
        // No expansion: variables, globs, command substitution and ~ stay as written.
        assert_eq!(
            words("$HOME * `id` $(id) ~ \"$USER\""),
            ["$HOME", "*", "`id`", "$(id)", "~", "$USER"]
        );
        // Operators are characters like any other: no shell is run.
        assert_eq!(words("a;b | c && d"), ["a;b", "|", "c", "&&", "d"]);
    }

    #[test]
    fn an_open_quote_or_a_last_backslash_is_refused_with_its_column() {
        for (t, quote, column) in [
            ("ssh 'node {host} {agent}", '\'', 5),
            ("ssh {host} \"{agent}", '"', 12),
            ("ssh {host} {agent} \"a\\\"", '"', 20),
            ("é 'x", '\'', 3),
        ] {
            let e = split(t).unwrap_err();
            assert_eq!(
                e,
                TemplateError::UnclosedQuote {
                    template: t.into(),
                    quote,
                    column
                },
                "{t}"
            );
            let text = e.to_string();
            assert!(
                text.contains(&format!("{t:?}")) && text.contains(&format!("column {column}")),
                "{text}"
            );
        }
        let e = split("ssh {host} {agent} \\").unwrap_err();
        assert!(
            matches!(e, TemplateError::TrailingBackslash { column: 20, .. }),
            "{e:?}"
        );
    }

    #[test]
    fn hostile_templates_are_refused() {
        for (t, want) in [
            ("", "empty"),
            ("   \t\n ", "empty"),
            ("ssh {agent}", "{host}"),
            ("ssh {hos t} {agent}", "{host}"),
            ("ssh {host} x{agent}", "{agent}"),
            ("ssh {host} '{agent} x'", "{agent}"),
        ] {
            let e = Template::parse(t).unwrap_err();
            assert!(e.to_string().contains(want), "{t:?}: {e}");
        }
    }

    #[test]
    fn placeholders_are_substituted_after_splitting() {
        // Inside quotes, {host} is substituted and the quotes' blanks stay in the word.
        assert_eq!(
            args("ssh -o 'ProxyCommand=nc {host} 22' {host} {agent}", "n1"),
            [
                "ssh",
                "-o",
                "ProxyCommand=nc n1 22",
                "n1",
                "/shared/mpir",
                "agent"
            ]
        );
        // A quoted {agent} word is the agent's command, as an unquoted one.
        assert_eq!(
            args("rsh {host} \"{agent}\"", "n1"),
            ["rsh", "n1", "/shared/mpir", "agent"]
        );
        // A node name with blanks, quotes, a backslash or shell syntax stays one argument
        // and is never parsed again.
        for host in [
            "node 7",
            "no'de",
            "no\"de",
            "a\\b",
            "$(reboot)",
            "n1; rm -rf /",
            "node1.cluster.example",
        ] {
            let a = args("ssh -l u {host} {agent}", host);
            assert_eq!(
                a,
                ["ssh", "-l", "u", host, "/shared/mpir", "agent"],
                "{host}"
            );
            let a = args("pdsh -w 'x {host}' {agent}", host);
            assert_eq!(a[2], format!("x {host}"), "{host}");
        }
    }
}
