//! Runtime rules: the program exists, the timeout and exit codes make sense, and
//! the few-shot examples are calls a model could copy.

use super::{Options, ProgramCache, Subject};
use crate::code::Code;
use crate::formats::functiongemma;
use crate::source::{Diagnostic, FieldPath, Severity, Target};
use crate::template::CONTEXT_KEYS;

/// Longest timeout that is not suspicious (an hour).
const MAX_TIMEOUT_SECS: u64 = 3600;

pub(super) fn check(s: &Subject<'_>, options: &Options, programs: &ProgramCache, out: &mut Vec<Diagnostic>) {
    let program = &s.m.command.program;
    if !program.trim().is_empty() && !programs.exists(program) {
        let severity = if options.strict { Severity::Error } else { Severity::Warning };
        out.push(
            s.diag(
                severity,
                Code::ProgramNotFound,
                &FieldPath::dotted("command.program"),
                Target::Value,
                format!("`{program}` is not on PATH here"),
            )
            .with_help("install it where packs runs, or use an absolute path"),
        );
    }
    let timeout = s.m.policy.timeout_secs;
    if timeout == 0 || timeout > MAX_TIMEOUT_SECS {
        let why = if timeout == 0 {
            "0 means the default (30 s), not \"no timeout\"".to_owned()
        } else {
            format!("more than {MAX_TIMEOUT_SECS} s (an hour)")
        };
        out.push(s.diag(
            Severity::Warning,
            Code::TimeoutOutOfRange,
            &FieldPath::dotted("policy.timeout_secs"),
            Target::Value,
            format!("`timeout_secs` is {timeout}: {why}"),
        ));
    }
    for (i, place) in s.m.policy.writable.iter().enumerate() {
        let trimmed = place.trim().trim_end_matches('/');
        let broad = ["", "/home", "/root", "/etc", "/usr", "/var", "/tmp", "/opt", "/srv", "{{env.HOME}}", "~"];
        let relative = !trimmed.is_empty() && !trimmed.starts_with('/') && !trimmed.starts_with("{{");
        let message = if broad.contains(&trimmed) {
            format!("`{place}` lets the tool write far beyond what it needs: the confinement of its tier is gone")
        } else if relative {
            format!("`{place}` is not an absolute path: it is left out (a writable place must be absolute)")
        } else {
            continue;
        };
        out.push(
            s.diag(
                Severity::Warning,
                Code::BroadWritable,
                &FieldPath::dotted("policy.writable").index(i),
                Target::Value,
                message,
            )
            .with_help("name the one directory the tool needs, such as a cache: \"{{env.HOME}}/.npm\""),
        );
    }
    broad_readable(s, out);
    credentials(s, out);
    let codes = &s.m.policy.allowed_exit_codes;
    let path = FieldPath::dotted("policy.allowed_exit_codes");
    if codes.is_empty() {
        out.push(s.diag(
            Severity::Error,
            Code::InvalidExitCodes,
            &path,
            Target::Value,
            "`allowed_exit_codes` is empty: every run would fail",
        ));
    }
    for (i, c) in codes.iter().enumerate() {
        if !(0..=255).contains(c) {
            out.push(s.diag(
                Severity::Error,
                Code::InvalidExitCodes,
                &path.index(i),
                Target::Value,
                format!("exit code {c} cannot happen: exit codes are 0 to 255"),
            ));
        }
    }
    examples(s, out);
    tests(s, out);
}

/// The `tests` a manifest carries must be runnable as written.
fn tests(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    for (i, t) in s.m.tests.iter().enumerate() {
        let path = FieldPath::dotted("tests").index(i);
        let mut bad = |at: FieldPath, message: String| {
            out.push(s.diag(Severity::Error, Code::InvalidTest, &at, Target::Value, message));
        };
        for key in t.context.keys() {
            if !CONTEXT_KEYS.contains(&key.as_str()) {
                bad(
                    path.key("context"),
                    format!("unknown context key `{key}`; known keys: {}", CONTEXT_KEYS.join(", ")),
                );
            }
        }
        if let Some(re) = &t.expect.stdout_matches
            && let Err(e) = regex::Regex::new(re)
        {
            bad(
                path.key("expect").key("stdout_matches"),
                format!(
                    "`stdout_matches` is not a valid regular expression: {}",
                    e.to_string().lines().last().unwrap_or_default().trim_start_matches("error: ")
                ),
            );
        }
        if t.expect.argv.is_some() && !t.dry_run {
            bad(path.key("expect").key("argv"), "`expect.argv` is only checked by a `dry_run` test".into());
        }
        let e = &t.expect;
        let run_only = e.exit_code.is_some()
            || e.ok.is_some()
            || e.stdout_contains.is_some()
            || e.stdout_matches.is_some()
            || e.output_equals.is_some();
        if t.dry_run && run_only {
            bad(path.key("dry_run"), "a `dry_run` test can check only `argv` and `error`; nothing runs".into());
        }
    }
}

fn examples(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    for (i, example) in s.m.examples.iter().enumerate() {
        let path = FieldPath::dotted("examples").index(i);
        let mut bad =
            |message: String| out.push(s.diag(Severity::Error, Code::InvalidExample, &path, Target::Value, message));
        // `{{url}}`-style placeholders name context keys, filled when the prompt is built.
        let mut rest = example.as_str();
        while let Some(start) = rest.find("{{") {
            let Some(len) = rest[start..].find("}}") else {
                bad("an unclosed `{{` in the example".into());
                break;
            };
            let key = rest[start + 2..start + len].trim();
            if !CONTEXT_KEYS.contains(&key) {
                bad(format!(
                    "`{{{{{key}}}}}` is not a context key; examples may use {}",
                    CONTEXT_KEYS.iter().map(|k| format!("{{{{{k}}}}}")).collect::<Vec<_>>().join(", ")
                ));
            }
            rest = &rest[start + len + 2..];
        }
        let calls = match functiongemma::parse_calls(example) {
            Ok(c) => c,
            Err(e) => {
                bad(format!("the example is not a FunctionGemma call: {}", e.message));
                continue;
            }
        };
        let Some(call) = calls.first() else {
            bad(format!("the example has no call; write it as `call:{}{{key:<escape>value<escape>}}`", s.m.name));
            continue;
        };
        if call.name != s.m.name {
            bad(format!("the example calls `{}`, not this tool (`{}`)", call.name, s.m.name));
        }
        for key in call.args.keys() {
            if !s.m.parameters.get(key).is_some_and(|p| p.is_offered()) {
                bad(format!("the example passes `{key}`, which is not a parameter the model can set"));
            }
        }
    }
}

/// `broad-readable`: a `policy.readable` place that narrows nothing (`/`), little (a home
/// directory, `/home`), or is left out (not absolute): the manifest promises narrowed reads
/// it does not get.
fn broad_readable(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    let Some(places) = &s.m.policy.readable else { return };
    for (i, place) in places.iter().enumerate() {
        let trimmed = place.trim().trim_end_matches('/');
        let message = if trimmed.is_empty() && place.contains('/') {
            format!("`{place}` narrows nothing: the tool reads everything it could read without `readable`")
        } else if ["{{env.HOME}}", "/home", "/root"].contains(&trimmed) {
            format!("`{place}` opens every home file but the credential stores: the narrowing barely narrows")
        } else if !trimmed.starts_with('/') && !trimmed.starts_with("{{") {
            format!("`{place}` is not an absolute path: it is left out (a readable place must be absolute)")
        } else {
            continue;
        };
        out.push(
            s.diag(
                Severity::Warning,
                Code::BroadReadable,
                &FieldPath::dotted("policy.readable").index(i),
                Target::Value,
                message,
            )
            .with_help("name the places the tool reads, such as \"{{workspace}}\" or \"{{env.HOME}}/notes\""),
        );
    }
}

/// `reads-credentials`: a tool that opts out of the read confinement, and a confined tool
/// whose command or defaults name a credential store it will not be able to read.
fn credentials(s: &Subject<'_>, out: &mut Vec<Diagnostic>) {
    let policy = &s.m.policy;
    if policy.reads_credentials {
        out.push(
            s.diag(
                Severity::Warning,
                Code::ReadsCredentials,
                &FieldPath::dotted("policy.reads_credentials"),
                Target::Value,
                "the tool may read your keys and tokens (`~/.ssh`, `~/.aws`...) and return them to the model",
            )
            .with_help("remove it unless the tool cannot work without them (a `git push` over SSH)"),
        );
        return;
    }
    let has_path = s.m.parameters.values().any(crate::manifest::Parameter::is_path);
    if !matches!(policy.tier(has_path), crate::policy::Tier::ReadOnly | crate::policy::Tier::Workspace) {
        return;
    }
    let mut strings = Vec::new();
    collect_strings(s.raw.get("command"), FieldPath::dotted("command"), &mut strings);
    if let Some(params) = s.raw.get("parameters").and_then(serde_json::Value::as_object) {
        for (name, param) in params {
            let path = FieldPath::dotted("parameters").key(name).key("default");
            collect_strings(param.get("default"), path, &mut strings);
        }
    }
    for (path, text) in strings {
        let Some(store) = named_credential_store(&text) else { continue };
        out.push(
            s.diag(
                Severity::Warning,
                Code::ReadsCredentials,
                &path,
                Target::Value,
                format!("`~/{store}` is a credential store: this {} tool cannot read it", policy.tier(has_path)),
            )
            .with_help("state `policy.reads_credentials: true` if the tool really needs it (docs/SANDBOX.md)"),
        );
    }
}

/// Every string in `value`, with its field path.
fn collect_strings(value: Option<&serde_json::Value>, path: FieldPath, out: &mut Vec<(FieldPath, String)>) {
    match value {
        Some(serde_json::Value::String(text)) => out.push((path, text.clone())),
        Some(serde_json::Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                collect_strings(Some(item), path.index(i), out);
            }
        }
        Some(serde_json::Value::Object(map)) => {
            for (key, item) in map {
                collect_strings(Some(item), path.key(key), out);
            }
        }
        _ => {}
    }
}

/// The credential store (of the default list) `text` names under the home directory
/// (`~/.ssh`, `$HOME/.aws`, `{{env.HOME}}/.kube`), if any.
fn named_credential_store(text: &str) -> Option<&'static str> {
    let homes = ["~/", "$HOME/", "${HOME}/", "{{env.HOME}}/"];
    crate::reads::DEFAULT_DENIED.iter().copied().find(|store| {
        homes.iter().any(|home| {
            let named = format!("{home}{store}");
            text.match_indices(&named).any(|(i, _)| {
                let rest = &text[i + named.len()..];
                rest.is_empty() || rest.starts_with(['/', ' ', '"', '\'', ';', ')'])
            })
        })
    })
}
