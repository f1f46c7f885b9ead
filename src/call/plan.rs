//! The plan: exactly what one call will start (argv, environment, working directory,
//! limits) and the masked view of it that is shown, asked about and recorded. Computed
//! once per call; paths are confined here.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::argv::{DashLead, Values};
use crate::call::arguments::Arguments;
use crate::call::mask::Secrets;
use crate::call::{Context, Decision, FieldError, ToolError};
use crate::environment::minimal_env;
use crate::policy::Tier;
use crate::runner::Invocation;
use crate::sandbox::Enforcement;
use crate::template::Lead;
use crate::tool::{Body, Tool};

/// What runs: a process, or a native tool in this process.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Process(Invocation),
    Native,
}

/// One call, planned.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) target: Target,
    /// Secret values in it (`{{secret.NAME}}`), masked wherever the call is shown.
    pub(crate) secrets: Secrets,
    /// The argv as shown: secrets masked.
    pub(crate) shown_argv: Vec<String>,
    /// The variables the manifest sets, secrets masked (the rest of the environment
    /// is the minimal base).
    pub(crate) shown_env: Vec<(String, String)>,
    /// The working directory as shown: secrets masked (the process gets the real one).
    pub(crate) shown_cwd: Option<PathBuf>,
    /// What the program reads on stdin, as shown: its size and its start, secrets masked.
    pub(crate) shown_stdin: Option<StdinPreview>,
    pub(crate) timeout: Duration,
    pub(crate) max_output_bytes: u64,
    /// What the kernel will enforce (a process; a native tool runs in packs' own process).
    pub(crate) enforcement: Option<std::sync::Arc<Enforcement>>,
}

impl Plan {
    /// Plan a call of `tool`. With `placeholder_secrets`, every `{{secret.NAME}}`
    /// renders as `***` (for manifest tests that only plan: such a plan never runs).
    pub(crate) fn new(
        tool: &Tool,
        args: &Arguments,
        context: &Context,
        placeholder_secrets: bool,
    ) -> Result<Self, ToolError> {
        let policy = tool.policy();
        let (argv, env, cwd, stdin, secrets, dash_leads) = match &tool.body {
            Body::Manifest { .. } => {
                let command = tool.command().unwrap_or(Err("it has no command")).map_err(|message| {
                    ToolError::BrokenTool { tool: tool.name().to_owned(), message: message.to_owned() }
                })?;
                let values = Values { given: &args.given, resolved: &args.resolved, context: context.values() };
                let rendered = if placeholder_secrets {
                    command.render_with_placeholder_secrets(&values)
                } else {
                    command.render(&values)
                };
                let r = rendered.map_err(|failure| {
                    if failure.message == crate::template::TOO_LONG {
                        // The values are too large for the template, as a too-long argument
                        // is: the caller's to fix.
                        let message = format!("`{}` {}; give less input", failure.field, crate::template::TOO_LONG);
                        let errors = vec![FieldError { field: String::new(), message, schema: None }];
                        return ToolError::Validation { tool: tool.name().to_owned(), errors };
                    }
                    ToolError::Render { file: tool.source().to_owned(), failure }
                })?;
                (r.argv, r.env, r.cwd.map(PathBuf::from), r.stdin, r.secrets, r.dash_leads)
            }
            Body::Executable => {
                let json = Value::Object(args.given.clone()).to_string();
                let argv = vec![tool.source().to_string_lossy().into_owned(), json];
                (argv, Vec::new(), None, None, Vec::new(), Vec::new())
            }
            Body::Native(_) => {
                let json = Value::Object(args.resolved.clone()).to_string();
                (vec![tool.name().to_owned(), json], Vec::new(), None, None, Vec::new(), Vec::new())
            }
        };
        let secrets = Secrets::new(&secrets);
        if let Some(text) = stdin.as_ref().filter(|s| s.len() > MAX_STDIN_BYTES) {
            return Err(ToolError::Validation {
                tool: tool.name().to_owned(),
                errors: vec![FieldError {
                    field: String::new(),
                    message: format!(
                        "`command.stdin` renders to {} bytes with these values, more than the {MAX_STDIN_BYTES} bytes (1 MiB) a tool's standard input may hold; give less input",
                        text.len()
                    ),
                    schema: None,
                }],
            });
        }
        // From here on an error may quote what was rendered (a path under a working
        // directory named by a secret): it is masked before it leaves.
        refuse_options(tool, &args.given, &argv, &dash_leads, &secrets).map_err(|e| e.masked(&secrets))?;
        let cwd = cwd.or_else(|| context.workspace_set().cloned());
        confine_paths(tool, &args.given, context, cwd.as_deref()).map_err(|e| e.masked(&secrets))?;
        let shown_argv = argv.iter().map(|a| secrets.mask(a)).collect();
        let shown_env = env.iter().map(|(k, v)| (k.clone(), secrets.mask(v))).collect();
        // Its own bytes (a directory name need not be UTF-8), unless a secret is masked in it.
        let shown_cwd = cwd.as_ref().map(|c| match c.to_str() {
            Some(text) => PathBuf::from(secrets.mask(text)),
            None => {
                let lossy = c.to_string_lossy();
                let masked = secrets.mask(&lossy);
                if masked == lossy { c.clone() } else { PathBuf::from(masked) }
            }
        });
        let shown_stdin = stdin.as_deref().map(|text| StdinPreview::of(text, &secrets));
        let enforcement = context
            .enforcement_kept(tool)
            .transpose()
            .map_err(|source| ToolError::Unconfinable { tool: tool.name().to_owned(), source }.masked(&secrets))?;
        let target = match &tool.body {
            Body::Native(_) => Target::Native,
            Body::Manifest { .. } | Body::Executable => Target::Process(Invocation {
                argv,
                env: minimal_env(&[policy.env_passthrough.as_slice(), context.pass_env()].concat(), env),
                clear_env: true,
                cwd: cwd.clone(),
                stdin: stdin.map(|s| std::sync::Arc::from(s.into_bytes())),
                timeout: policy.timeout(),
                max_output_bytes: policy.max_output_bytes,
                sandbox: None,
                limits: policy.limits(),
                image: tool.image().cloned(),
            }),
        };
        Ok(Self {
            target,
            secrets,
            shown_argv,
            shown_env,
            shown_cwd,
            shown_stdin,
            timeout: policy.timeout(),
            max_output_bytes: policy.max_output_bytes,
            enforcement,
        })
    }

    /// Replace every secret value in `text` with `***`.
    pub(crate) fn mask(&self, text: &str) -> String {
        self.secrets.mask(text)
    }
}

/// The most bytes `command.stdin` may render to (1 MiB): over it, the call is refused
/// before anything runs.
pub(crate) const MAX_STDIN_BYTES: usize = 1024 * 1024;

/// How many characters of stdin a dry run or an approval request shows.
const STDIN_PREVIEW_CHARS: usize = 200;

/// What a call writes to the program's standard input (`command.stdin`), as a person is
/// shown it: its size, and its first 200 characters with secret values as `***`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StdinPreview {
    /// How many bytes the program gets (the real text, before masking).
    pub bytes: u64,
    /// The start of the text, secrets masked: at most 200 characters.
    pub text: String,
    /// Whether `text` is only the start.
    pub cut: bool,
}

impl StdinPreview {
    fn of(text: &str, secrets: &Secrets) -> Self {
        let masked = secrets.mask(text);
        let end = masked.char_indices().nth(STDIN_PREVIEW_CHARS).map(|(i, _)| i);
        Self { bytes: text.len() as u64, text: masked[..end.unwrap_or(masked.len())].to_owned(), cut: end.is_some() }
    }

    /// One line for a person: `14 bytes: $'{"a":1}\n'` (control characters escaped).
    pub fn summary(&self) -> String {
        let text = crate::visible::word(&self.text);
        match (self.bytes, self.cut) {
            (0, _) => "0 bytes (empty)".to_owned(),
            (n, false) => format!("{n} bytes: {text}"),
            (n, true) => format!("{n} bytes, starting {text}"),
        }
    }
}

/// A dry run: what a call would run and what the rules would say, secrets masked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Planned {
    /// The tool's name.
    pub tool: String,
    /// The tool's permission tier.
    pub tier: Tier,
    /// The argv that would run, secrets as `***` (a native tool: its name and its
    /// arguments as JSON).
    pub argv: Vec<String>,
    /// The working directory, when set.
    pub cwd: Option<PathBuf>,
    /// The variables the manifest sets, secrets as `***`.
    pub env: Vec<(String, String)>,
    /// What the program would read on stdin (`command.stdin`); `None`: `/dev/null`.
    pub stdin: Option<StdinPreview>,
    /// The timeout.
    pub timeout: Duration,
    /// The most stdout kept.
    pub max_output_bytes: u64,
    /// What the rules would decide (a dry run asks no one).
    pub decision: Decision,
    /// What the kernel would enforce (`None` for a native tool, which runs in-process).
    pub sandbox: Option<Enforcement>,
}

impl Planned {
    /// The command as a person should read it (see [`ApprovalRequest::command_line`](crate::ApprovalRequest::command_line)).
    pub fn command_line(&self) -> String {
        crate::visible::command_line(&self.argv)
    }

    pub(crate) fn new(tool: &Tool, plan: Plan, decision: Decision) -> Self {
        Self {
            tool: tool.name().to_owned(),
            tier: tool.tier(),
            argv: plan.shown_argv,
            cwd: plan.shown_cwd,
            env: plan.shown_env,
            stdin: plan.shown_stdin,
            timeout: plan.timeout,
            max_output_bytes: plan.max_output_bytes,
            decision,
            sandbox: plan.enforcement.map(std::sync::Arc::unwrap_or_clone),
        }
    }
}

/// A value from the call or the context never becomes an option: an argv element it
/// starts with `-`, before the program's options end (after `--`, or a shell's script), is
/// refused, whatever the element's shape (a whole value, a splatted array item, a group
/// member, `{{name}}{{ext}}`, a negative number), unless the parameter sets
/// `allow_leading_dash`. Defaults and the operator's `env.`/`secret.` values are the
/// manifest's and the operator's, and may.
fn refuse_options(
    tool: &Tool,
    given: &Map<String, Value>,
    argv: &[String],
    leads: &[DashLead],
    secrets: &Secrets,
) -> Result<(), ToolError> {
    let Some(m) = tool.manifest() else { return Ok(()) };
    let hostile =
        |p: &str| given.contains_key(p) && m.parameters.get(p).is_some_and(|d| d.is_offered() && !d.allow_leading_dash);
    let mut errors: Vec<FieldError> = Vec::new();
    for lead in leads {
        let field = match &lead.lead {
            Lead::Param(p) => hostile(p).then(|| p.clone()),
            Lead::Context(key) => Some(format!("context.{key}")),
            // A value a block wrote leads: refused when the block reads a value the call
            // gave, or any context value (the context is the client's, as with `Lead::Context`).
            Lead::Block => lead.params.iter().find(|p| p.starts_with("context.") || hostile(p)).cloned(),
        };
        let Some(field) = field else { continue };
        if errors.iter().any(|e| e.field == field) {
            continue;
        }
        let shown = secrets.mask(&argv[lead.index]);
        errors.push(FieldError {
            schema: tool.validation_schema().get("properties").and_then(|p| p.get(&field)).cloned(),
            field,
            message: format!(
                "{shown:?} starts with `-`, and `{}` would read it as an option; give a value that does not start with `-` (the manifest can put \"--\" before `{}` or set `allow_leading_dash`)",
                lead.program, lead.field
            ),
        });
    }
    if errors.is_empty() { Ok(()) } else { Err(ToolError::Validation { tool: tool.name().to_owned(), errors }) }
}

/// Every value of a path parameter (`format: path`, on the parameter or its `items`) must
/// lead inside the workspace when the tool opens it: resolved from the tool's working
/// directory, each symbolic link by its target whether the target exists or not, and
/// never through a link the kernel resolves per process (`/proc/self/cwd`, `/dev/fd/N`).
fn confine_paths(
    tool: &Tool,
    given: &Map<String, Value>,
    context: &Context,
    cwd: Option<&Path>,
) -> Result<(), ToolError> {
    let Some(m) = tool.manifest() else { return Ok(()) };
    if !m.parameters.values().any(crate::manifest::Parameter::is_path) {
        return Ok(());
    }
    let workspace = context.workspace();
    let root = std::fs::canonicalize(&workspace).unwrap_or(workspace);
    let here = std::env::current_dir().unwrap_or_else(|_| root.clone());
    // The tool starts in `cwd` (relative to packs' own directory, as the runner starts it).
    let base = cwd.map_or_else(|| here.clone(), |c| here.join(c));
    let mut errors = Vec::new();
    for (name, _) in m.parameters.iter().filter(|(_, p)| p.is_path()) {
        let values: Vec<&str> = match given.get(name) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(Value::String(s)) => vec![s.as_str()],
            _ => Vec::new(),
        };
        for v in values {
            let outcome = resolve(&base, v).and_then(|resolved| {
                if resolved.starts_with(&root) {
                    Ok(())
                } else {
                    Err(format!("resolves to {}, outside the workspace", resolved.display()))
                }
            });
            if let Err(why) = outcome {
                errors.push(FieldError {
                    field: name.clone(),
                    message: format!("{v:?} {why}; paths must stay inside the workspace {}", root.display()),
                    schema: tool.validation_schema().get("properties").and_then(|s| s.get(name)).cloned(),
                });
            }
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ToolError::Validation { tool: tool.name().to_owned(), errors }) }
}

/// Most symbolic links followed in one path (the kernel's limit).
const MAX_LINKS: usize = 40;

/// Where `value` leads when opened from `base`, resolved one component at a time as
/// the kernel resolves it: `..` after a link climbs from the link's target; a link is
/// replaced by its target even when the target does not exist (a dangling link is where
/// a writing tool would create its file); below a name that does not exist the rest is
/// taken as written, and may not climb with `..`. A path through `/proc` or `/dev/fd`
/// is refused: the kernel resolves those in the process that opens them, not in packs.
fn resolve(base: &Path, value: &str) -> Result<PathBuf, String> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    use std::path::Component;

    let parts = |p: &Path| -> Vec<OsString> {
        p.components()
            .filter_map(|c| match c {
                Component::RootDir => Some(OsString::from("/")),
                Component::ParentDir => Some(OsString::from("..")),
                Component::Normal(n) => Some(n.to_owned()),
                Component::CurDir | Component::Prefix(_) => None,
            })
            .collect()
    };
    let value = Path::new(value);
    let mut pending: VecDeque<OsString> = VecDeque::new();
    if value.is_relative() {
        pending.extend(parts(base));
    }
    pending.extend(parts(value));
    let mut resolved = PathBuf::from("/");
    let mut exists = true;
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        if part == "/" {
            resolved = PathBuf::from("/");
            exists = true;
            continue;
        }
        if part == ".." {
            if !exists {
                return Err("climbs out with `..` below a path that does not exist".into());
            }
            resolved.pop();
            continue;
        }
        resolved.push(&part);
        if is_magic(&resolved) {
            return Err(format!(
                "goes through {}, which the kernel resolves in the process that opens it; name the file itself",
                resolved.display()
            ));
        }
        if !exists {
            continue;
        }
        match std::fs::symlink_metadata(&resolved) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return Err("cannot be resolved (too many levels of symbolic links)".into());
                }
                let target = std::fs::read_link(&resolved).map_err(|e| format!("cannot be resolved ({e})"))?;
                resolved.pop();
                for p in parts(&target).into_iter().rev() {
                    pending.push_front(p);
                }
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => exists = false,
            Err(e) => return Err(format!("cannot be resolved ({e})")),
        }
    }
    Ok(resolved)
}

/// Paths whose meaning depends on the process that opens them.
fn is_magic(path: &Path) -> bool {
    path.starts_with("/proc")
        || path.starts_with("/dev/fd")
        || ["/dev/stdin", "/dev/stdout", "/dev/stderr"].iter().any(|p| path == Path::new(p))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::call::Call;
    use crate::catalog::Catalog;
    use crate::sandbox::SandboxMode;

    /// A pack directory holding `manifests`, loaded, and a context with it as workspace.
    fn pack(manifests: &[Value]) -> (tempfile::TempDir, Catalog, Context) {
        let (dir, catalog) = super::super::tests::pack(manifests);
        let context = Context::new().with_sandbox(SandboxMode::Off).with_workspace(dir.path().to_owned());
        (dir, catalog, context)
    }

    fn fields(e: ToolError) -> Vec<String> {
        match e {
            ToolError::Validation { errors, .. } => errors.into_iter().map(|e| e.field).collect(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn a_default_may_lead_with_a_dash_and_each_hostile_value_is_named_once() {
        let (_dir, catalog, ctx) = pack(&[json!({"name": "ls", "description": "d",
            "parameters": {"flag": {"type": "string", "default": "-l"}, "a": {"type": "string"},
                           "tags": {"type": "array", "items": {"type": "string"}}},
            "command": {"program": "ls", "args": ["{{flag}}", "{{a}}", "{{tags}}"]}})]);
        let planned = Call::new("ls", json!({})).context(&ctx).dry_run(&catalog).unwrap();
        assert_eq!(planned.argv, ["ls", "-l"]);
        assert_eq!(planned.command_line(), "ls -l");
        let e = Call::new("ls", json!({"tags": ["-a", "-b"]})).context(&ctx).dry_run(&catalog).unwrap_err();
        assert_eq!(fields(e), ["tags"]);
        let e = Call::new("ls", json!({"a": "-x", "tags": ["-a"]})).context(&ctx).dry_run(&catalog).unwrap_err();
        assert_eq!(fields(e), ["a", "tags"]);
    }

    #[test]
    fn a_value_a_block_writes_first_is_refused_when_the_block_reads_what_the_call_gave() {
        let (_dir, catalog, ctx) = pack(&[json!({"name": "b", "description": "d",
            "parameters": {"vs": {"type": "array", "items": {"type": "string"}}},
            "command": {"program": "echo", "args": ["{{#each vs}}{{this}}{{/each}}"]}})]);
        let e = Call::new("b", json!({"vs": ["-n", "x"]})).context(&ctx).dry_run(&catalog).unwrap_err();
        assert_eq!(fields(e), ["vs"]);
        let planned = Call::new("b", json!({"vs": ["n", "-x"]})).context(&ctx).dry_run(&catalog).unwrap();
        assert_eq!(planned.argv, ["echo", "n-x"]);
    }

    #[test]
    fn stdin_may_hold_up_to_a_mebibyte_and_is_previewed_by_its_start() {
        let (_dir, catalog, ctx) = pack(&[json!({"name": "feed", "description": "d",
            "parameters": {"text": {"type": "string"}}, "command": {"program": "cat", "stdin": "{{text}}"}})]);
        let planned = Call::new("feed", json!({"text": "x".repeat(100_000)})).context(&ctx).dry_run(&catalog).unwrap();
        let stdin = planned.stdin.unwrap();
        assert_eq!((stdin.bytes, stdin.text.len(), stdin.cut), (100_000, STDIN_PREVIEW_CHARS, true));
        assert_eq!(stdin.summary(), format!("100000 bytes, starting {}", "x".repeat(200)));
        let secrets = Secrets::new(&["k3y".to_owned()]);
        let short = StdinPreview::of("a k3y", &secrets);
        assert_eq!((short.bytes, short.text.as_str(), short.cut), (5, "a ***", false));
        assert_eq!(short.summary(), "5 bytes: 'a ***'");
        assert_eq!(StdinPreview::of("", &secrets).summary(), "0 bytes (empty)");
    }

    #[test]
    fn resolving_follows_forty_links_and_no_more() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(base.join("target")).unwrap();
        for i in 0..MAX_LINKS {
            let to = if i + 1 == MAX_LINKS { "target".to_owned() } else { format!("l{}", i + 1) };
            std::os::unix::fs::symlink(to, base.join(format!("l{i}"))).unwrap();
        }
        assert_eq!(resolve(&base, "l0/x"), Ok(base.join("target/x")));
        std::os::unix::fs::symlink("l0", base.join("one_more")).unwrap();
        assert_eq!(resolve(&base, "one_more"), Err("cannot be resolved (too many levels of symbolic links)".into()));
        std::os::unix::fs::symlink("loop_b", base.join("loop_a")).unwrap();
        std::os::unix::fs::symlink("loop_a", base.join("loop_b")).unwrap();
        assert!(resolve(&base, "loop_a").unwrap_err().contains("too many levels"));
        // Below a file, the path is an error of its own, not a name that does not exist yet.
        std::fs::write(base.join("file"), "").unwrap();
        assert!(resolve(&base, "file/x").unwrap_err().starts_with("cannot be resolved ("));
    }

    #[test]
    fn the_per_process_links_of_dev_are_refused_and_other_dev_paths_are_not() {
        // Each is named itself, not by where its link (into `/proc`, on Linux) leads.
        for (path, magic) in [
            ("/dev/fd/0", "/dev/fd"),
            ("/dev/stdin", "/dev/stdin"),
            ("/dev/stdout", "/dev/stdout"),
            ("/dev/stderr", "/dev/stderr"),
            ("/proc/1/root", "/proc"),
        ] {
            let e = resolve(Path::new("/"), path).unwrap_err();
            assert_eq!(
                e,
                format!(
                    "goes through {magic}, which the kernel resolves in the process that opens it; name the file itself"
                )
            );
        }
        assert_eq!(resolve(Path::new("/"), "/dev/null"), Ok(PathBuf::from("/dev/null")));
        assert_eq!(resolve(Path::new("/"), "/dev/stdinx"), Ok(PathBuf::from("/dev/stdinx")));
    }
}
