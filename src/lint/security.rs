//! Security rules: shells and interpreters fed model input, option injection,
//! hardcoded credentials, mutators that claim to be read-only, unconfirmed mutations.

use std::sync::OnceLock;

use regex::{Regex, RegexSet};

use super::Subject;
use crate::code::Code;
use serde_json::{Map, Value};

use crate::argv::{Site, Values};
use crate::manifest::{Arg, ParamType, Parameter};
use crate::source::{Diagnostic, FieldPath, Severity, Target};
use crate::template::{Lead, Ref};

/// Programs that interpret a string argument as code, with the flags that introduce it.
/// `None`: every argument is code (`eval`).
fn script_flags(program: &str) -> Option<Option<&'static [&'static str]>> {
    Some(match program {
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "fish" | "ash" | "busybox" => Some(&["-c"]),
        "cmd" | "cmd.exe" => Some(&["/c", "/C", "/k", "/K"]),
        "powershell" | "powershell.exe" | "pwsh" => Some(&["-c", "-C", "-Command", "-command", "-EncodedCommand"]),
        "python" | "python2" | "python3" => Some(&["-c"]),
        "node" | "nodejs" | "deno" | "bun" => Some(&["-e", "--eval", "-p", "--print"]),
        "perl" => Some(&["-e", "-E"]),
        "ruby" => Some(&["-e"]),
        "php" => Some(&["-r"]),
        "osascript" => Some(&["-e"]),
        "eval" => None,
        _ => return None,
    })
}

use crate::operands::program_name as basename;

/// Flags like `-lc` (bash) also introduce a script.
fn is_script_flag(arg: &str, flags: &[&str], shell: bool) -> bool {
    flags.contains(&arg) || (shell && crate::operands::is_shell_script_flag(arg))
}

pub(super) fn check(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    shell_injection(s, out);
    option_injection(s, out);
    hardcoded_secrets(s, out);
    read_only_claims(s, out);
}

/// The argument list as plain strings (group members flattened), with where each is.
fn elements<'m>(s: &Subject<'m>) -> Vec<(Site<'m>, &'m str)> {
    let mut all = Vec::new();
    for (i, a) in s.m.command.args.iter().enumerate() {
        match a {
            Arg::One(t) => all.push((Site::Arg(i), t.as_str())),
            Arg::Group(g) => all.extend(g.iter().enumerate().map(|(j, t)| (Site::Member(i, j), t.as_str()))),
        }
    }
    all
}

fn uses_outside_input(s: &Subject<'_>, site: Site<'_>) -> Option<String> {
    let command = s.command?;
    let (_, t) = command.templates().into_iter().find(|(at, _)| *at == site)?;
    t.refs().iter().find_map(|r| match r {
        Ref::Param(p) => Some(format!("parameter `{p}`")),
        Ref::Context(k) => Some(format!("context value `{k}`")),
        Ref::Env(_) | Ref::Secret(_) => None,
    })
}

/// The index of the first operand in `args`: not an option, not an option's value
/// (`value_options`), and (for `env`) not a `VAR=value` assignment.
fn first_operand(args: &[&str], value_options: &[&str], assignments: bool) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if a == "--" {
            return (i + 1 < args.len()).then_some(i + 1);
        }
        if value_options.contains(&a) {
            i += 2;
        } else if a.starts_with('-') || (assignments && a.contains('=')) {
            i += 1;
        } else {
            return Some(i);
        }
    }
    None
}

fn injection(s: &Subject<'_>, site: Site<'_>, message: String, help: &str) -> Diagnostic {
    s.diag(Severity::Error, Code::ShellInjection, &site.path(), Target::Value, message).with_help(help)
}

fn shell_injection(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    let elements = elements(s);
    let args: Vec<crate::operands::Arg<'_>> =
        elements.iter().map(|(_, text)| crate::operands::Arg { text, literal: !text.contains("{{") }).collect();
    // `env`, `timeout`, `xargs`...: look at the program they run (and at who chooses it).
    let (program, rest): (String, Vec<(Site<'_>, &str)>) = match crate::operands::resolve(&s.m.command.program, &args) {
        crate::operands::Runs::Program { name, args, .. } => {
            (name.to_owned(), args.iter().map(|t| (elements[t.at].0, t.text)).collect())
        }
        crate::operands::Runs::Chosen { wrapper, at } => {
            let site = elements[at].0;
            if let Some(what) = uses_outside_input(s, site) {
                let message = format!("{what} chooses the program that `{wrapper}` runs: any command can be run");
                out.push(injection(
                    s,
                    site,
                    message,
                    "name the program in the manifest; pass values only as its arguments",
                ));
            }
            return;
        }
        crate::operands::Runs::Opaque { .. } => return,
    };
    let Some(flags) = script_flags(&program) else { return };
    let shell = crate::operands::is_shell(&program);
    let script_elements: Vec<Site<'_>> = match flags {
        None => rest.iter().map(|(site, _)| *site).collect(),
        Some(flags) => rest.windows(2).filter(|w| is_script_flag(w[0].1, flags, shell)).map(|w| w[1].0).collect(),
    };
    for site in script_elements {
        if let Some(what) = uses_outside_input(s, site) {
            let message = format!(
                "{what} is pasted into code that `{program}` runs: a value like `; rm -rf ~` becomes a command"
            );
            out.push(injection(s, site, message, "run the program directly with each value as its own argument, or pass values as arguments to a fixed script (`sh -c 'do \"$1\"' sh {{value}}`)"));
        }
    }
}

/// A value that starts with `-` the parameter accepts, if any: lint probes each argv
/// position with it.
fn dash_value(p: &Parameter) -> Option<Value> {
    if let Some(allowed) = &p.allowed {
        return allowed.iter().find(|v| crate::template::value_text(v).starts_with('-')).cloned();
    }
    match p.kind {
        ParamType::String => dash_string(p.pattern.as_deref()).map(Value::String),
        ParamType::Integer | ParamType::Number => {
            let negative_allowed = p.minimum.as_ref().and_then(serde_json::Number::as_f64).is_none_or(|m| m < 0.0);
            negative_allowed.then(|| Value::from(-1))
        }
        ParamType::Array => {
            let items = p.items.as_ref();
            let get = |k: &str| items.and_then(|i| i.get(k));
            if let Some(allowed) = get("enum").and_then(Value::as_array) {
                let v = allowed.iter().find(|v| crate::template::value_text(v).starts_with('-'))?;
                return Some(Value::Array(vec![v.clone()]));
            }
            let item = match get("type").and_then(Value::as_str) {
                Some("integer" | "number") => {
                    let negative_allowed = get("minimum").and_then(Value::as_f64).is_none_or(|m| m < 0.0);
                    negative_allowed.then(|| Value::from(-1))?
                }
                Some("boolean" | "object" | "array" | "null") => return None,
                _ => Value::String(dash_string(get("pattern").and_then(Value::as_str))?),
            };
            Some(Value::Array(vec![item]))
        }
        ParamType::Boolean | ParamType::Object => None,
    }
}

/// A string starting with `-` that `pattern` (if any) accepts.
fn dash_string(pattern: Option<&str>) -> Option<String> {
    const PROBES: &[&str] = &["-x", "--output=/x", "-", "-a", "-A", "-0", "-1", "--a", "-a/b", "-a.b", "-a b", "-rf"];
    let Some(pattern) = pattern else { return Some(PROBES[0].to_owned()) };
    let Ok(re) = Regex::new(pattern) else { return None };
    PROBES.iter().find(|p| re.is_match(p)).map(|p| (*p).to_owned())
}

/// An ordinary value of the parameter's type, for the other parameters of a probe (so
/// that groups and blocks using them render).
fn plain_value(p: &Parameter) -> Value {
    if let Some(first) = p.allowed.as_ref().and_then(|a| a.first()) {
        return first.clone();
    }
    match p.kind {
        ParamType::String => Value::String("a".into()),
        ParamType::Integer | ParamType::Number => Value::from(1),
        ParamType::Boolean => Value::Bool(true),
        ParamType::Array => Value::Array(vec![Value::String("a".into())]),
        ParamType::Object => Value::Object(Map::new()),
    }
}

/// Every position where a call value could start an argv element with `-` before the
/// program's options end. Lint finds them with the run-time check itself: it renders the
/// command with every parameter (and context value) that accepts such a value set to one,
/// the other parameters absent, then present, and reads which elements each value leads
/// (`Rendered::dash_leads`). A value found leading is then emptied and the render repeated,
/// so a value behind it in the same element (`{{name}}{{ext}}` with `name` empty) is found
/// too. Each round finds something new or ends the search: linear for ordinary manifests.
fn option_injection(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    let Some(command) = s.command else { return };
    // A parameter named like a key of the render's data (`env`) renders the wrong values:
    // its `invalid-parameter-name` error comes first, the probes once it is renamed.
    if s.m.parameters.keys().any(|n| crate::names::parameter_name_problem(n).is_some()) {
        return;
    }
    let program = crate::operands::program_name(&s.m.command.program);
    let offered = || s.m.parameters.iter().filter(|(_, p)| p.is_offered());
    let dashes: Map<String, Value> = offered().filter_map(|(n, p)| Some((n.clone(), dash_value(p)?))).collect();
    let mut found: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    for others_present in [false, true] {
        let mut given = dashes.clone();
        if others_present {
            given.extend(offered().filter(|(n, _)| !dashes.contains_key(*n)).map(|(n, p)| (n.clone(), plain_value(p))));
        }
        // Only the context values the templates read (a render copies the whole map).
        let mut context: Map<String, Value> = command
            .refs()
            .filter_map(|r| match r {
                Ref::Context(k) => Some((k.clone(), Value::String("-x".into()))),
                _ => None,
            })
            .collect();
        loop {
            let mut resolved = given.clone();
            for (n, p) in &s.m.parameters {
                if let Some(d) = p.default.as_ref().filter(|_| !resolved.contains_key(n)) {
                    resolved.insert(n.clone(), d.clone());
                }
            }
            let values = Values { given: &given, resolved: &resolved, context: &context };
            #[cfg(test)]
            tests::RENDERS.with(|r| r.set(r.get() + 1));
            let Ok(rendered) = command.render_with_placeholder_secrets(&values) else { break };
            let mut new = false;
            for lead in &rendered.dash_leads {
                let mut names: Vec<String> = match &lead.lead {
                    Lead::Param(p) => vec![p.clone()],
                    Lead::Context(k) => vec![format!("context.{k}")],
                    Lead::Block => lead
                        .params
                        .iter()
                        .filter(|p| dashes.contains_key(*p) || p.starts_with("context."))
                        .cloned()
                        .collect(),
                };
                // The values that lead once these are emptied, from this same render: a
                // chain of n placeholders in one element costs one render, not n.
                names.extend(lead.next.iter().filter_map(|l| match l {
                    Lead::Param(p) => Some(p.clone()),
                    Lead::Context(k) => Some(format!("context.{k}")),
                    Lead::Block => None,
                }));
                for name in names {
                    if !found.insert((lead.field.clone(), name.clone())) {
                        continue;
                    }
                    new = true;
                    match name.strip_prefix("context.") {
                        Some(key) => {
                            context.insert(key.to_owned(), Value::String(String::new()));
                        }
                        None => empty(&mut given, &name),
                    }
                    let option = rendered.argv[lead.index - 1].as_str();
                    let option = (lead.index > 1 && option.starts_with('-') && option != "--" && !option.contains('='))
                        .then_some(option);
                    // `env -- sort {{f}}`: a `--` the wrapper reads, not the program it runs.
                    let wrapper_dash = (lead.program != program
                        && rendered.argv[1..lead.index].iter().any(|a| a == "--"))
                    .then_some(program);
                    let at = Place { program: &lead.program, option, wrapper_dash };
                    out.extend(injection_at(s, &name, at, &FieldPath::dotted(&lead.field)));
                }
            }
            if !new {
                break;
            }
        }
    }
}

/// Give `name` a value that renders nothing, so that what follows it can lead.
fn empty(given: &mut Map<String, Value>, name: &str) {
    match given.get(name) {
        Some(Value::String(_)) => {
            given.insert(name.to_owned(), Value::String(String::new()));
        }
        Some(Value::Array(_)) => {
            given.insert(name.to_owned(), Value::Array(Vec::new()));
        }
        _ => {
            given.remove(name);
        }
    }
}

/// Where a value could start an option: the program that reads it (the command's, or the
/// one a wrapper runs), the literal option before it, and the wrapper whose `--` comes
/// before it (that `--` ends only the wrapper's options).
struct Place<'a> {
    program: &'a str,
    option: Option<&'a str>,
    wrapper_dash: Option<&'a str>,
}

fn injection_at(s: &Subject<'_>, name: &str, at: Place<'_>, path: &FieldPath) -> Option<Diagnostic> {
    let Place { program, option, wrapper_dash } = at;
    let allowed = s.m.parameters.get(name).is_some_and(|p| p.allow_leading_dash);
    let what = if name.starts_with("context.") { format!("context value `{name}`") } else { format!("`{name}`") };
    let (message, help) = match (option, allowed) {
        (Some(_), true) => return None,
        (None, true) => (
            format!(
                "{what} sets `allow_leading_dash` but is not an option's value here: a value like `--output=/etc/passwd` becomes an option of `{program}`"
            ),
            "put \"--\" before it, or drop `allow_leading_dash`".to_owned(),
        ),
        (Some(option), false) => (
            format!(
                "{what} follows `{option}` (its value, if `{option}` takes one): a value starting with `-` is refused at run time, since `{program}` might read it as an option"
            ),
            format!(
                "if `{option}` takes a value that may start with `-` (a negative number, a pattern), set `\"allow_leading_dash\": true`; otherwise give {what} a `pattern` that rejects a leading `-` (`^[^-]`), so the model knows"
            ),
        ),
        (None, false) if let Some(wrapper) = wrapper_dash => (
            format!(
                "{what} can start an argument of `{program}` with `-`: the `--` before it ends the options of `{wrapper}`, which runs `{program}`, and `{program}` still reads options, so packs refuses such values at run time"
            ),
            format!(
                "put a \"--\" of `{program}`'s own after `{program}` and its options (`{wrapper} -- {program} -- {{{{{name}}}}}`, if `{program}` honours `--`), or give {what} a `pattern` that rejects a leading `-` (`^[^-]`), so the model knows"
            ),
        ),
        (None, false) if program == "find" => (
            format!(
                "{what} can start an argument of `find` with `-`: find reads a value like `-delete` as an expression even after `--`, so packs refuses such values at run time"
            ),
            format!("give {what} a `pattern` that rejects a leading `-` (`^[^-]`), so the model knows"),
        ),
        (None, false) => (
            format!(
                "{what} can start an argument with `-` with no `--` before it: a value like `--output=/etc/passwd` would be read as an option, so packs refuses such values at run time"
            ),
            format!(
                "put \"--\" before it (if `{program}` honours `--`), or give {what} a `pattern` that rejects a leading `-` (`^[^-]`), so the model knows"
            ),
        ),
    };
    Some(s.diag(Severity::Warning, Code::OptionInjection, path, Target::Value, message).with_help(help))
}

fn secret_patterns() -> &'static RegexSet {
    static SET: OnceLock<RegexSet> = OnceLock::new();
    SET.get_or_init(|| {
        RegexSet::new([
            r"gh[pousr]_[A-Za-z0-9]{36,}",
            r"github_pat_[A-Za-z0-9_]{22,}",
            r"sk-(proj-|ant-)?[A-Za-z0-9_-]{20,}",
            r"\b(AKIA|ASIA)[0-9A-Z]{16}\b",
            r"xox[abposr]-[A-Za-z0-9-]{10,}",
            r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
        ])
        .unwrap_or_else(|_| RegexSet::empty())
    })
}

fn hardcoded_secrets(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    for (written, _, message) in secrets(s) {
        out.push(
            s.diag(Severity::Error, Code::HardcodedSecret, &written.path(), Target::Value, message)
                .with_help("read it from the environment with `{{secret.NAME}}` and rotate the one committed here"),
        );
    }
}

/// A text the manifest writes that could hold a credential.
#[derive(Debug, Clone, Copy)]
pub(super) enum Written<'m> {
    /// In the command: an argument or an `env` value.
    Command(Site<'m>),
    /// A parameter's default.
    Default(&'m str),
}

impl Written<'_> {
    fn path(self) -> FieldPath {
        match self {
            Self::Command(site) => site.path(),
            Self::Default(name) => FieldPath::dotted("parameters").key(name).key("default"),
        }
    }
}

/// Every text the manifest writes a credential into (an argument, an `env` value, stdin, a
/// parameter's default), with where it is and why it looks like one.
pub(super) fn secrets<'m>(s: &Subject<'m>) -> Vec<(Written<'m>, &'m str, String)> {
    let mut texts: Vec<(Written<'m>, &'m str)> =
        elements(s).into_iter().map(|(site, text)| (Written::Command(site), text)).collect();
    texts.extend(s.m.command.env.iter().map(|(k, v)| (Written::Command(Site::Env(k)), v.as_str())));
    texts.extend(s.m.command.stdin.iter().map(|v| (Written::Command(Site::Stdin), v.as_str())));
    for (name, p) in &s.m.parameters {
        if let Some(d) = p.default.as_ref().and_then(|d| d.as_str()) {
            texts.push((Written::Default(name), d));
        }
    }
    let mut found = Vec::new();
    for (written, text) in texts {
        if secret_patterns().is_match(text) {
            found.push((written, text, "this looks like a credential written into the manifest".to_owned()));
        } else if let Some(name) = secret_named_literal(written, text) {
            let message =
                format!("`{name}` looks like a credential's name, and its value is written into the manifest");
            found.push((written, text, message));
        }
    }
    found
}

/// The secret-looking name a literal value is given under, if any: an environment
/// variable (`DB_PASSWORD`), a parameter's default (`api_key`), or an argument
/// `--token=VALUE` / `AWS_SECRET_ACCESS_KEY=VALUE`. A value with a placeholder, or empty,
/// is not a literal.
fn secret_named_literal<'t>(written: Written<'t>, text: &'t str) -> Option<&'t str> {
    let (name, value) = match written {
        Written::Command(Site::Env(name)) | Written::Default(name) => (name, text),
        Written::Command(Site::Arg(_) | Site::Member(..)) => {
            let (name, value) = text.split_once('=')?;
            (name.trim_start_matches('-'), value)
        }
        Written::Command(Site::Cwd | Site::Stdin) => return None,
    };
    let literal = !value.trim().is_empty() && !value.contains("{{");
    (literal && is_secret_name(name)).then_some(name)
}

/// Whether a name ends in a credential's noun: its last word ends in `password`, `passwd`,
/// `passphrase`, `secret`, `token`, `credential(s)` or `apikey` (`PGPASSWORD`), or its last
/// words are `api key`, `access key`, `private key`, `secret key` (words split at `_`, `-`,
/// `.` and case changes). `TOKEN_URL` and
/// `MAX_TOKENS` are not secrets; `GITHUB_TOKEN` and `AWS_SECRET_ACCESS_KEY` are.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if (matches!(c, '_' | '-' | '.') || (c.is_uppercase() && prev_lower)) && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        if c.is_alphanumeric() {
            current.push(c.to_ascii_lowercase());
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    if !current.is_empty() {
        words.push(current);
    }
    let last = words.last().map(String::as_str);
    let before = words.len().checked_sub(2).map(|i| words[i].as_str());
    // The last word may run nouns together (`PGPASSWORD`, `AUTHTOKEN`).
    let nouns = ["password", "passwd", "passphrase", "secret", "token", "credential", "credentials", "apikey"];
    last.is_some_and(|w| nouns.iter().any(|n| w.ends_with(n)))
        || (last == Some("key") && matches!(before, Some("api" | "access" | "private" | "secret")))
}

/// Why a command changes things, if it is a known mutator.
fn mutation(s: &Subject<'_>) -> Option<String> {
    let program = basename(&s.m.command.program);
    let args: Vec<&str> = elements(s).into_iter().map(|(_, a)| a).collect();
    let has = |flags: &[&str]| args.iter().any(|a| flags.iter().any(|f| a == f || a.starts_with(&format!("{f}="))));
    // The subcommand: the first operand after global options (and their values).
    let global_value_options: &[&str] = match program {
        "git" => &["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"],
        "kubectl" => &["-n", "--namespace", "--context", "--kubeconfig", "--cluster", "--user", "-s", "--server"],
        "docker" | "podman" => &["-H", "--host", "-c", "--context", "--config", "-l", "--log-level"],
        "cargo" => &["-C", "--config", "-Z"],
        "npm" | "pnpm" | "yarn" => &["-C", "--prefix", "--dir", "--cwd"],
        _ => &[],
    };
    let sub =
        |cmds: &[&str]| first_operand(&args, global_value_options, false).is_some_and(|i| cmds.contains(&args[i]));
    // `sed -i`, `-i.bak`, `-ni`, `--in-place=.bak`: in-place editing, however spelled.
    let sed_in_place = || {
        args.iter().any(|a| {
            a.starts_with("--in-place")
                || a.strip_prefix('-').is_some_and(|flags| flags.chars().find(|c| !"nrEsuz".contains(*c)) == Some('i'))
        })
    };
    let why = match program {
        "rm" | "rmdir" | "mv" | "cp" | "dd" | "shred" | "truncate" | "chmod" | "chown" | "chgrp" | "ln" | "touch"
        | "mkdir" | "tee" | "install" | "mkfs" | "kill" | "pkill" | "killall" | "reboot" | "shutdown" => {
            format!("`{program}` changes files or processes")
        }
        "git"
            if sub(&[
                "commit",
                "push",
                "reset",
                "checkout",
                "switch",
                "rebase",
                "merge",
                "clean",
                "rm",
                "mv",
                "tag",
                "branch",
                "stash",
                "restore",
                "cherry-pick",
                "revert",
                "pull",
                "am",
                "apply",
            ]) =>
        {
            "this `git` subcommand changes the repository".into()
        }
        "curl"
            if has(&[
                "-d",
                "--data",
                "--data-raw",
                "--data-binary",
                "--data-urlencode",
                "-F",
                "--form",
                "-T",
                "--upload-file",
                "--json",
            ]) || args.windows(2).any(|w| {
                matches!(w[0], "-X" | "--request")
                    && !w[1].eq_ignore_ascii_case("GET")
                    && !w[1].eq_ignore_ascii_case("HEAD")
            }) =>
        {
            "`curl` sends data (a POST, PUT or DELETE request)".into()
        }
        "wget" if has(&["--post-data", "--post-file", "--method"]) => "`wget` sends data".into(),
        "kubectl"
            if sub(&[
                "apply", "delete", "create", "patch", "replace", "scale", "edit", "label", "annotate", "rollout",
                "drain", "cordon",
            ]) =>
        {
            "this `kubectl` subcommand changes the cluster".into()
        }
        "docker" | "podman"
            if sub(&["rm", "rmi", "run", "stop", "kill", "build", "push", "pull", "exec", "create", "start"]) =>
        {
            format!("this `{program}` subcommand changes containers or images")
        }
        "npm" | "pnpm" | "yarn" | "pip" | "pip3" | "cargo" | "apt" | "apt-get" | "brew" | "gem"
            if sub(&["install", "uninstall", "remove", "publish", "add", "update", "upgrade"]) =>
        {
            format!("`{program}` installs or publishes packages")
        }
        "systemctl" if sub(&["start", "stop", "restart", "enable", "disable", "kill", "reload"]) => {
            "`systemctl` changes services".into()
        }
        "sed" if sed_in_place() => "`sed -i` edits files in place".into(),
        _ => return None,
    };
    Some(why)
}

fn read_only_claims(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    let explicit = s.raw.pointer("/policy/read_only").is_some();
    if !explicit
        && s.m.policy.read_only
        && let Some(why) = mutation(s)
    {
        out.push(
            s.diag(
                Severity::Warning,
                Code::ImplicitReadOnly,
                &FieldPath::dotted("command"),
                Target::Key,
                format!("{why}, but the manifest relies on the default `read_only: true`"),
            )
            .with_help("set `\"policy\": {\"read_only\": false}` (and consider `confirm_before_run`)"),
        );
    }
    let p = &s.m.policy;
    if !p.read_only && p.requires_network && !p.confirm_before_run {
        out.push(
            s.diag(
                Severity::Warning,
                Code::UnconfirmedMutation,
                &FieldPath::dotted("policy"),
                Target::Key,
                "the tool changes things over the network (`read_only: false`, `requires_network: true`) without `confirm_before_run`",
            )
            .with_help("set `\"confirm_before_run\": true` so a person approves each call"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::is_secret_name;
    use crate::code::Code;

    thread_local! {
        /// Renders of a command by the option-injection probes on this thread.
        pub(super) static RENDERS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// Lint's work on one manifest grows with its size and its diagnostics, not their
    /// product (issue 29): a chain of placeholders in one element, each able to lead it
    /// once those before it are empty, is found from one render per probe, not one per
    /// link; and n separate elements are found in one render too.
    #[test]
    fn option_probes_render_a_bounded_number_of_times() {
        let dir = tempfile::tempdir().unwrap();
        for n in [50, 400] {
            let names: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
            let parameters: serde_json::Map<String, serde_json::Value> =
                names.iter().map(|p| (p.clone(), serde_json::json!({"type": "string", "description": "v"}))).collect();
            let chain: String = names.iter().map(|p| format!("{{{{{p}}}}}")).collect();
            let mut args: Vec<String> = names.iter().map(|p| format!("{{{{{p}}}}}")).collect();
            args.push(chain);
            let manifest = serde_json::json!({"name": "big", "description": "d", "parameters": parameters,
                "command": {"program": "echo", "args": args}});
            let path = dir.path().join(format!("big{n}.tool.json"));
            std::fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
            RENDERS.with(|r| r.set(0));
            let options = crate::lint::Options::default();
            let (_, diagnostics) = crate::lint::lint_manifest(&path, &options, &Default::default());
            let found = diagnostics.iter().filter(|d| d.code == Code::OptionInjection).count();
            // Each value leads its own element, and leads the chain once those before it
            // are empty: two warnings each.
            assert_eq!(found, 2 * n, "{n} parameters");
            let renders = RENDERS.with(|r| r.get());
            // Two probes (the others absent, then present), each rendering until nothing
            // new leads: a few renders, whatever n.
            assert!(renders <= 6, "{n} parameters took {renders} renders");
        }
    }

    #[test]
    fn secret_names_end_in_a_credential_noun() {
        for name in [
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "api_key",
            "apiKey",
            "client-secret",
            "OPENAI_APIKEY",
            "token",
            "x.credentials",
            "PGPASSWORD",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in
            ["TOKEN_URL", "MAX_TOKENS", "PWD", "SSH_KEY_PATH", "DB_PASSWORD_FILE", "keyboard", "secretary", "KEY"]
        {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
