//! The environment a tool starts with: a minimal base, never packs' whole environment.

/// Variables a tool gets from packs' environment without asking: enough to find
/// programs, a home, a locale, a terminal type and a temporary directory.
pub(crate) const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG", "TERM", "TMPDIR"];

/// Set for every tool so nothing waits for input that will never come.
pub(crate) const NON_INTERACTIVE_ENV: &[(&str, &str)] =
    &[("GIT_TERMINAL_PROMPT", "0"), ("PAGER", "cat"), ("GIT_EDITOR", "true")];

/// The whole environment of a tool: [`BASE_ENV`] and `LC_*` from packs' own environment,
/// the `passthrough` names, the non-interactive defaults, then `extra` (the manifest's `env`).
pub(crate) fn minimal_env(passthrough: &[String], extra: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| BASE_ENV.contains(&k.as_str()) || k.starts_with("LC_") || passthrough.iter().any(|p| p == k))
        .collect();
    env.sort();
    env.extend(NON_INTERACTIVE_ENV.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    env.extend(extra);
    env
}

/// Whether `name` can name a variable: not empty, without `=` or a NUL byte.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        Err("a variable name cannot be empty".into())
    } else if name.contains(['=', '\0']) {
        Err(format!("{name:?} is not a variable name (it holds `=` or a NUL byte)"))
    } else {
        Ok(())
    }
}
