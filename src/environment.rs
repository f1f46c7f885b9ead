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
    let wanted = |k: &str| BASE_ENV.contains(&k) || k.starts_with("LC_") || passthrough.iter().any(|p| p == k);
    let mut env: Vec<(String, String)> = match FROZEN.get() {
        // Sorted already.
        Some(frozen) => frozen.iter().filter(|(k, _)| wanted(k)).cloned().collect(),
        None => {
            let mut env: Vec<(String, String)> = std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .filter(|(k, _)| wanted(k))
                .collect();
            env.sort();
            env
        }
    };
    env.extend(NON_INTERACTIVE_ENV.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    env.extend(extra);
    env
}

/// packs' environment as [`freeze`] read it (its UTF-8 variables, sorted).
static FROZEN: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();

/// From now on [`minimal_env`] takes packs' variables from a copy read here, once, instead
/// of copying the whole environment (a lock and two allocations per variable) for every
/// call. For a long-lived server (`packs serve`): packs never changes its own environment
/// once started; a program embedding the library that does must not call this.
pub(crate) fn freeze() {
    FROZEN.get_or_init(|| {
        let mut env: Vec<(String, String)> =
            std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect();
        env.sort();
        env
    });
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

/// Variables that change how programs load or start: which libraries, modules or start-up
/// files they load, which helper commands they run. A call's values (parameters, context)
/// must never reach them (docs/MANIFEST.md has the list); the manifest's literals and the
/// operator's `{{env.X}}`/`{{secret.X}}` may.
pub(crate) const LOADER_VARIABLES: &[&str] = &[
    // The dynamic loader and glibc.
    "LD_*",
    "DYLD_*",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "RESOLV_HOST_CONF",
    "MALLOC_*",
    // Where programs and start-up files are found.
    "PATH",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_DIRS",
    // Shells.
    "BASH_ENV",
    "ENV",
    "BASH_FUNC_*",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "ZDOTDIR",
    "IFS",
    "CDPATH",
    // Interpreters and runtimes.
    "PYTHON*",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "LUA_INIT",
    "LUA_PATH",
    "LUA_CPATH",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    // Git's commands, hooks and configuration.
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_TEMPLATE_DIR",
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_*",
    "GIT_CONFIG_VALUE_*",
    // Helper commands other programs run.
    "PAGER",
    "MANPAGER",
    "SYSTEMD_PAGER",
    "EDITOR",
    "VISUAL",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    "LESSKEY",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
];

/// Whether `name` is one of [`LOADER_VARIABLES`] (an entry ending in `*` is a prefix).
pub(crate) fn is_loader_variable(name: &str) -> bool {
    LOADER_VARIABLES.iter().any(|entry| match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == *entry,
    })
}

#[cfg(test)]
mod tests {
    use super::is_loader_variable;

    #[test]
    fn loader_variables_by_name_and_prefix() {
        for name in ["LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "ENV", "PYTHONSTARTUP", "GIT_SSH_COMMAND", "PATH"] {
            assert!(is_loader_variable(name), "{name}");
        }
        for name in ["TZ", "LANG", "GIT_AUTHOR_NAME", "ENVIRONMENT", "LD", "PAGERS", "NODE_ENV"] {
            assert!(!is_loader_variable(name), "{name}");
        }
    }
}
