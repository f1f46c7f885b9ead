//! Names: what a tool or parameter name may look like, and did-you-mean suggestions.

/// Longest tool name accepted.
pub(crate) const MAX_NAME_LEN: usize = 64;

/// The closest known key, if one is close enough to be a typo; else the one known key
/// that `key` is the leading words of (`output` for `output_equals`, `exit` for
/// `exit_code`; none when several are: `stdout` names two).
pub(crate) fn did_you_mean<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let close = known
        .iter()
        .map(|k| (strsim_distance(key, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4) && *d < key.chars().count())
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k);
    close.or_else(|| {
        let mut leading =
            known.iter().filter(|k| !key.is_empty() && k.strip_prefix(key).is_some_and(|r| r.starts_with('_')));
        match (leading.next(), leading.next()) {
            (Some(k), None) => Some(*k),
            _ => None,
        }
    })
}

/// Levenshtein distance (small inputs: key names).
fn strsim_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// `^[a-z][a-z0-9_]*$`
pub(crate) fn is_snake_case(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some('a'..='z')) && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
}

/// Identifiers a parameter may not be named: a template reads them as something else
/// (`{{env.HOME}}`, `{{secret.TOKEN}}`, `{{context.url}}` and their maps; `this`, the whole
/// set of values; `true`, `false`, `null` and `else`, words of handlebars), so a parameter
/// of that name would render the wrong value, or a map of the operator's environment or
/// secrets.
pub(crate) const RESERVED_PARAMETER_NAMES: &[&str] =
    &["context", "env", "secret", "this", "true", "false", "null", "else"];

/// Why `name` cannot name a parameter, if it cannot.
pub(crate) fn parameter_name_problem(name: &str) -> Option<String> {
    if !is_identifier(name) {
        return Some(format!("parameter name `{name}` must be letters, digits and `_`, not starting with a digit"));
    }
    let reads = match name {
        "context" | "env" | "secret" => format!("the map of `{{{{{name}.KEY}}}}` values"),
        "this" => "the whole set of values".to_owned(),
        _ if RESERVED_PARAMETER_NAMES.contains(&name) => "a word of the template language".to_owned(),
        _ => return None,
    };
    Some(format!("parameter name `{name}` is reserved: a template reads `{name}` as {reads}"))
}

/// `^[A-Za-z_][A-Za-z0-9_]*$`
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some('a'..='z' | 'A'..='Z' | '_')) && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A name that is not one of the values a setting accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value `{given}`; expected one of: {}", expected.join(", "))]
pub struct UnknownName {
    /// The name given.
    pub given: String,
    /// The names accepted.
    pub expected: &'static [&'static str],
}

/// An enum of named values (formats a command line or a configuration chooses by name):
/// each variant has a fixed name and a one-line help, and the enum gets `ALL`, `as_str`,
/// `help`, `Display` and `FromStr` (with [`UnknownName`]). Front-ends build their own
/// parsers from these; the library needs no command-line crate.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( #[doc = $doc:literal] $(#[$attr:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $( #[doc = $doc] $(#[$attr])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];
            const NAMES: &'static [&'static str] = &[$($text),+];

            /// The value's name (as a command line spells it).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }

            /// What the value means, in one line.
            pub fn help(self) -> &'static str {
                match self {
                    $(Self::$variant => $doc.trim(),)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::names::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $crate::names::UnknownName { given: s.to_owned(), expected: Self::NAMES })
            }
        }
    };
}
pub(crate) use named_enum;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_finds_typos_and_leading_words() {
        let top = ["name", "description", "policy", "output", "tests"];
        assert_eq!(did_you_mean("polcy", &top), Some("policy"));
        assert_eq!(did_you_mean("colour", &top), None);
        let expect = ["exit_code", "ok", "stdout_contains", "stdout_matches", "output_equals"];
        assert_eq!(did_you_mean("output", &expect), Some("output_equals"));
        assert_eq!(did_you_mean("exit", &expect), Some("exit_code"));
        // Two keys start with `stdout_`: no guess.
        assert_eq!(did_you_mean("stdout", &expect), None);
        assert_eq!(did_you_mean("", &expect), None);
    }
}
