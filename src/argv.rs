//! Argv rendering: templates in, one argv element per template out, no shell.
//!
//! Rules (docs/MANIFEST.md has them with examples):
//! - each `args` element renders to exactly one argv element, whatever the value holds;
//! - an element rendering to `""` is omitted, unless it is a single placeholder
//!   whose value the call gave;
//! - an element that is exactly `{{p}}` with an array value expands to one element per item;
//! - a group (`["--team", "{{team}}"]`) is omitted when a name it uses has no value or is
//!   `false`, and repeats once per item when it uses an array parameter.

use serde_json::{Map, Value};

use crate::manifest::{Arg, Command};
use crate::source::FieldPath;
use crate::template::{Data, Environment, Lead, Ref, Template, TemplateError};

/// A manifest's command with every template compiled.
#[derive(Debug, Clone)]
pub(crate) struct CommandTemplate {
    program: String,
    params: Vec<String>,
    args: Vec<ArgTemplate>,
    env: Vec<(String, Template)>,
    cwd: Option<Template>,
    stdin: Option<Template>,
}

#[derive(Debug, Clone)]
enum ArgTemplate {
    One(Template),
    Group(Vec<Template>),
}

/// The argv, environment and working directory of one call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Rendered {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Variables set for the child (on top of its inherited environment).
    pub env: Vec<(String, String)>,
    /// Working directory, when the manifest sets one and it rendered non-empty.
    pub cwd: Option<String>,
    /// What the program reads on stdin, when the manifest sets `command.stdin` (even
    /// when it rendered empty: the program then reads an empty pipe).
    pub stdin: Option<String>,
    /// The secret values used (`{{secret.NAME}}`), to be masked wherever shown.
    #[serde(skip)]
    pub secrets: Vec<String>,
    /// The elements a value starts with `-` before the program's options end.
    #[serde(skip)]
    pub dash_leads: Vec<DashLead>,
}

/// Where a command template is written in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Site<'a> {
    /// `command.args.N`
    Arg(usize),
    /// `command.args.N.M`: a member of a group.
    Member(usize, usize),
    /// `command.env.NAME`
    Env(&'a str),
    /// `command.cwd`
    Cwd,
    /// `command.stdin`
    Stdin,
}

impl Site<'_> {
    /// The field path, for locating it in the manifest's text.
    pub(crate) fn path(self) -> FieldPath {
        let command = FieldPath::dotted("command");
        match self {
            Self::Arg(i) => command.key("args").index(i),
            Self::Member(i, j) => command.key("args").index(i).index(j),
            Self::Env(name) => command.key("env").key(name),
            Self::Cwd => command.key("cwd"),
            Self::Stdin => command.key("stdin"),
        }
    }
}

impl std::fmt::Display for Site<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Arg(i) => write!(f, "command.args.{i}"),
            Self::Member(i, j) => write!(f, "command.args.{i}.{j}"),
            Self::Env(name) => write!(f, "command.env.{name}"),
            Self::Cwd => f.write_str("command.cwd"),
            Self::Stdin => f.write_str("command.stdin"),
        }
    }
}

/// An argv element whose leading `-` came from a value, where the program still reads
/// options (see [`crate::operands`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DashLead {
    /// Its index in the argv (0 is the program).
    pub index: usize,
    /// The manifest element (`command.args.2`, `command.args.3.1`).
    pub field: String,
    /// Whose value leads.
    pub lead: Lead,
    /// The parameters and `context.KEY` values the element's template reads (for
    /// [`Lead::Block`]).
    pub params: Vec<String>,
    /// The values that would lead next, in order, were `lead` and the ones before them
    /// empty (see [`crate::template::Template::lead`]).
    pub next: Vec<Lead>,
    /// The program that would read it as an option: the command's program, or the one a
    /// wrapper runs (`sort` in `env -- sort {{f}}`).
    pub program: String,
}

/// The argv being built, with what is known of each element's first character.
struct Out {
    argv: Vec<String>,
    /// Per argument after the program: written as plain text by the manifest, and the
    /// value leading it when it starts with `-`.
    origins: Vec<Origin>,
}

struct Origin {
    literal: bool,
    site: Site<'static>,
    lead: Option<(Lead, Vec<String>, Vec<Lead>)>,
}

impl Out {
    fn push(&mut self, text: String, origin: Origin) {
        self.argv.push(text);
        self.origins.push(origin);
    }
}

/// A template that failed to render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: cannot render `{template}`: {message}")]
pub struct RenderFailure {
    /// Where the template is (`command.args.3`).
    pub field: String,
    /// The template text.
    pub template: String,
    /// Why it could not be rendered (a missing value, an unset secret...).
    pub message: String,
}

/// The values one call renders with.
#[derive(Debug, Clone)]
pub(crate) struct Values<'a> {
    /// What the call (or context, or a literal) gave.
    pub given: &'a Map<String, Value>,
    /// `given` plus each parameter's declared default.
    pub resolved: &'a Map<String, Value>,
    /// The caller's context (`url`, `cwd`, ...).
    pub context: &'a Map<String, Value>,
}

/// One render: the values the call gave, and the data templates render with (every
/// declared parameter present, absent ones as null).
struct Scope<'a> {
    given: &'a Map<String, Value>,
    data: &'a Data,
    context: &'a Map<String, Value>,
    environment: &'a Environment,
}

impl Scope<'_> {
    /// The value of a name a group uses, if it counts as present (not absent, null or false).
    fn present(&self, r: &Ref) -> Option<&Value> {
        let v = match r {
            Ref::Param(p) => self.data.resolved(p),
            Ref::Context(k) => self.context.get(k),
            Ref::Env(n) => self.environment.env.get(n),
            Ref::Secret(n) => self.environment.secrets.get(n),
        };
        v.filter(|v| !v.is_null() && **v != Value::Bool(false))
    }

    /// Keep an element that rendered to `s`? Empty ones go, unless the element is plain
    /// text (`""` written in the manifest) or a single placeholder whose value the call gave.
    fn keep(&self, t: &Template, s: &str) -> bool {
        !s.is_empty()
            || t.is_literal()
            || t.placeholder().is_some_and(|p| self.given.get(p).is_some_and(|v| !v.is_null()))
    }
}

impl CommandTemplate {
    /// Compile every template of `cmd`; errors carry the field path of the template.
    pub(crate) fn compile(cmd: &Command, params: &[&str]) -> Result<Self, Vec<(FieldPath, TemplateError)>> {
        let mut errors = Vec::new();
        let declared = crate::template::Declared::new(params);
        let mut compile = |site: Site<'_>, src: &str| match Template::parse_declared(src, &declared) {
            Ok(t) => Some(t),
            Err(e) => {
                errors.push((site.path(), e));
                None
            }
        };
        let args: Vec<Option<ArgTemplate>> = cmd
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                Arg::One(s) => compile(Site::Arg(i), s).map(ArgTemplate::One),
                Arg::Group(items) => {
                    let members: Vec<_> =
                        items.iter().enumerate().map(|(j, s)| compile(Site::Member(i, j), s)).collect();
                    members.into_iter().collect::<Option<Vec<_>>>().map(ArgTemplate::Group)
                }
            })
            .collect();
        let env: Vec<_> = cmd.env.iter().map(|(k, v)| compile(Site::Env(k), v).map(|t| (k.clone(), t))).collect();
        let cwd = cmd.cwd.as_ref().map(|c| compile(Site::Cwd, c));
        let stdin = cmd.stdin.as_ref().map(|c| compile(Site::Stdin, c));
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Self {
            program: cmd.program.clone(),
            params: params.iter().map(|p| (*p).to_owned()).collect(),
            args: args.into_iter().flatten().collect(),
            env: env.into_iter().flatten().collect(),
            cwd: cwd.flatten(),
            stdin: stdin.flatten(),
        })
    }

    /// Every template with where it is written, in manifest order.
    pub(crate) fn templates(&self) -> Vec<(Site<'_>, &Template)> {
        let mut all = Vec::new();
        for (i, a) in self.args.iter().enumerate() {
            match a {
                ArgTemplate::One(t) => all.push((Site::Arg(i), t)),
                ArgTemplate::Group(ts) => all.extend(ts.iter().enumerate().map(|(j, t)| (Site::Member(i, j), t))),
            }
        }
        all.extend(self.env.iter().map(|(k, t)| (Site::Env(k), t)));
        all.extend(self.cwd.iter().map(|t| (Site::Cwd, t)));
        all.extend(self.stdin.iter().map(|t| (Site::Stdin, t)));
        all
    }

    /// Every name the templates read, in manifest order (may repeat).
    pub(crate) fn refs(&self) -> impl Iterator<Item = &Ref> {
        self.each_template().flat_map(Template::refs)
    }

    /// Every template, in manifest order (without building field paths).
    fn each_template(&self) -> impl Iterator<Item = &Template> {
        self.process_templates().chain(self.stdin.iter())
    }

    /// The templates whose text becomes the process itself: its arguments, variables
    /// and working directory (not its stdin, which is data).
    fn process_templates(&self) -> impl Iterator<Item = &Template> {
        let args = self.args.iter().flat_map(|a| match a {
            ArgTemplate::One(t) => std::slice::from_ref(t),
            ArgTemplate::Group(ts) => ts.as_slice(),
        });
        args.chain(self.env.iter().map(|(_, t)| t)).chain(self.cwd.iter())
    }

    /// Whether the parameter `name` is read by `command.stdin` and by no other template:
    /// its value reaches the program only as data on stdin, never in an argument, a
    /// variable or a path (so it may hold a NUL byte).
    pub(crate) fn only_on_stdin(&self, name: &str) -> bool {
        let reads = |t: &Template| t.refs().iter().any(|r| matches!(r, Ref::Param(p) if p == name));
        self.stdin.as_ref().is_some_and(reads) && !self.process_templates().any(reads)
    }

    /// Render argv, env, cwd and stdin for one call. `env.` and `secret.` values are read
    /// from packs' own environment; a secret that is not set is an error when the render
    /// reads it (not in a branch that is not taken, nor in a group another absent name omits).
    pub(crate) fn render(&self, values: &Values<'_>) -> Result<Rendered, RenderFailure> {
        let environment = Environment::read(self.refs());
        self.render_in(values, &environment)
    }

    /// Render with every `{{secret.NAME}}` as `***` (dry-run tests).
    pub(crate) fn render_with_placeholder_secrets(&self, values: &Values<'_>) -> Result<Rendered, RenderFailure> {
        let environment = Environment::read_with_placeholder_secrets(self.refs());
        self.render_in(values, &environment)
    }

    fn render_in(&self, values: &Values<'_>, environment: &Environment) -> Result<Rendered, RenderFailure> {
        let mut resolved = values.resolved.clone();
        for p in &self.params {
            if !resolved.contains_key(p) {
                resolved.insert(p.clone(), Value::Null);
            }
        }
        let data = Data::of(resolved, values.given, values.context, environment);
        let scope = Scope { given: values.given, data: &data, context: values.context, environment };
        let mut out = Out { argv: vec![self.program.clone()], origins: Vec::with_capacity(self.args.len()) };
        for (i, arg) in self.args.iter().enumerate() {
            match arg {
                ArgTemplate::One(t) => render_one(t, &scope, Site::Arg(i), &mut out)?,
                ArgTemplate::Group(members) => render_group(members, &scope, i, &mut out)?,
            }
        }
        let Out { argv, origins } = out;
        let args: Vec<crate::operands::Arg<'_>> =
            argv[1..].iter().zip(&origins).map(|(text, o)| crate::operands::Arg { text, literal: o.literal }).collect();
        let options = crate::operands::options(&self.program, &args);
        let dash_leads = origins
            .into_iter()
            .take(options.end)
            .enumerate()
            .filter_map(|(i, o)| {
                o.lead.map(|(lead, params, next)| DashLead {
                    index: i + 1,
                    field: o.site.to_string(),
                    lead,
                    params,
                    next,
                    program: options.reader(i).to_owned(),
                })
            })
            .collect();
        let mut env = Vec::with_capacity(self.env.len());
        for (k, t) in &self.env {
            let v = render(t, &data, Site::Env(k))?;
            if scope.keep(t, &v) {
                env.push((k.clone(), v));
            }
        }
        let cwd = match &self.cwd {
            Some(t) => Some(render(t, &data, Site::Cwd)?).filter(|c| !c.is_empty()),
            None => None,
        };
        let stdin = match &self.stdin {
            Some(t) => Some(render(t, &data, Site::Stdin)?),
            None => None,
        };
        Ok(Rendered { argv, env, cwd, stdin, secrets: environment.secret_values(), dash_leads })
    }
}

/// Render one template of the command, at most [`crate::template::MAX_RENDER_BYTES`].
fn render(t: &Template, data: &Data, site: Site<'_>) -> Result<String, RenderFailure> {
    t.render_capped(data).map_err(|e| RenderFailure {
        field: site.to_string(),
        template: t.source().to_owned(),
        message: e.reason().to_string(),
    })
}

fn render_one(t: &Template, scope: &Scope<'_>, site: Site<'static>, out: &mut Out) -> Result<(), RenderFailure> {
    if let Some(p) = t.placeholder() {
        let given = scope.given.get(p).filter(|v| !v.is_null());
        if let Some(Value::Array(items)) = given.or_else(|| scope.data.resolved(p)) {
            for item in items {
                let text = crate::template::value_text(item);
                let lead = (given.is_some() && text.starts_with('-'))
                    .then(|| (Lead::Param(p.to_owned()), Vec::new(), Vec::new()));
                out.push(text, Origin { literal: false, site, lead });
            }
            return Ok(());
        }
    }
    let s = render(t, scope.data, site)?;
    if scope.keep(t, &s) {
        let lead = if s.starts_with('-') && !t.source().starts_with('-') {
            t.lead(scope.data, &s).map(|(lead, next)| (lead, read_values(t), next))
        } else {
            None
        };
        out.push(s, Origin { literal: t.is_literal(), site, lead });
    }
    Ok(())
}

/// The parameters and `context.KEY` values a template reads, for a [`Lead::Block`].
fn read_values(t: &Template) -> Vec<String> {
    t.refs()
        .iter()
        .filter_map(|r| match r {
            Ref::Param(p) => Some(p.clone()),
            Ref::Context(k) => Some(format!("context.{k}")),
            Ref::Env(_) | Ref::Secret(_) => None,
        })
        .collect()
}

fn render_group(members: &[Template], scope: &Scope<'_>, i: usize, out: &mut Out) -> Result<(), RenderFailure> {
    let refs: Vec<&Ref> = members.iter().flat_map(|t| t.refs()).collect();
    // A group is omitted when a name it uses has no value; a secret is never optional.
    if refs.iter().any(|r| !matches!(r, Ref::Secret(_)) && scope.present(r).is_none()) {
        return Ok(());
    }
    let mut arrays = refs.iter().filter_map(|r| match (r, scope.present(r)) {
        (Ref::Param(p), Some(Value::Array(items))) => Some((p.as_str(), items)),
        _ => None,
    });
    let Some((name, items)) = arrays.next() else {
        for (j, t) in members.iter().enumerate() {
            render_one(t, scope, Site::Member(i, j), out)?;
        }
        return Ok(());
    };
    if let Some((other, _)) = arrays.find(|(p, _)| *p != name) {
        return Err(RenderFailure {
            field: Site::Arg(i).to_string(),
            template: format!("{:?}", members.iter().map(Template::source).collect::<Vec<_>>()),
            message: format!("a group may repeat over one array parameter, but uses `{name}` and `{other}`"),
        });
    }
    // One copy of the values for the whole group, the item rebound in it each time (a copy
    // per item, each holding the array, cost the square of its length).
    let mut given = scope.given.clone();
    let mut item_data = scope.data.clone();
    for item in items {
        given.insert(name.to_owned(), item.clone());
        item_data.set(name, item);
        let per_item =
            Scope { given: &given, data: &item_data, context: scope.context, environment: scope.environment };
        for (j, t) in members.iter().enumerate() {
            render_one(t, &per_item, Site::Member(i, j), out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::split_command_line;
    use serde_json::json;

    fn argv(cmd: Command, params: &[&str], given: Value, defaults: Value) -> Vec<String> {
        let t = CommandTemplate::compile(&cmd, params).unwrap();
        let given = given.as_object().unwrap().clone();
        let mut resolved = defaults.as_object().unwrap().clone();
        resolved.extend(given.clone());
        let context = Map::new();
        t.render(&Values { given: &given, resolved: &resolved, context: &context }).unwrap().argv
    }

    fn cmd(program: &str, args: Vec<Arg>) -> Command {
        Command { program: program.into(), args, env: Default::default(), cwd: None, stdin: None }
    }
    fn one(s: &str) -> Arg {
        Arg::One(s.into())
    }
    fn group(items: &[&str]) -> Arg {
        Arg::Group(items.iter().map(|s| s.to_string()).collect())
    }

    fn rendered(
        c: &Command,
        params: &[&str],
        given: Value,
        defaults: Value,
        context: Value,
    ) -> Result<Rendered, RenderFailure> {
        let t = CommandTemplate::compile(c, params).unwrap();
        let given = given.as_object().unwrap().clone();
        let mut resolved = defaults.as_object().unwrap().clone();
        resolved.extend(given.clone());
        let context = context.as_object().unwrap().clone();
        t.render(&Values { given: &given, resolved: &resolved, context: &context })
    }

    fn lead(index: usize, field: &str, lead: Lead, params: &[&str], program: &str) -> DashLead {
        let params = params.iter().map(|p| (*p).to_owned()).collect();
        DashLead { index, field: field.into(), lead, params, next: Vec::new(), program: program.into() }
    }

    #[test]
    fn a_value_that_leads_with_a_dash_before_the_options_end_is_reported_with_its_element_and_reader() {
        // `timeout 5 sort {{f}} --key={{k}} -- {{g}}`: `f` is read by `sort` as an option,
        // `--key=` is the manifest's own dash, and `g` comes after sort's `--`.
        let c = cmd("timeout", vec![one("5"), one("sort"), one("{{f}}"), one("--key={{k}}"), one("--"), one("{{g}}")]);
        let r = rendered(&c, &["f", "k", "g"], json!({"f": "-r", "k": "-1", "g": "-x"}), json!({}), json!({})).unwrap();
        assert_eq!(r.argv, ["timeout", "5", "sort", "-r", "--key=-1", "--", "-x"]);
        assert_eq!(r.dash_leads, [lead(3, "command.args.2", Lead::Param("f".into()), &["f"], "sort")]);
        // Read by the wrapper itself (its duration), it is the wrapper's option.
        let c = cmd("timeout", vec![group(&["-s", "{{sig}}"]), one("{{d}}"), one("sort")]);
        let r = rendered(&c, &["sig", "d"], json!({"sig": "KILL", "d": "-5"}), json!({}), json!({})).unwrap();
        assert_eq!(r.dash_leads, [lead(3, "command.args.1", Lead::Param("d".into()), &["d"], "timeout")]);
    }

    #[test]
    fn a_splat_item_leads_only_when_the_call_gave_it() {
        let c = cmd("sort", vec![one("{{files}}")]);
        let r = rendered(&c, &["files"], json!({"files": ["a", "-b"]}), json!({}), json!({})).unwrap();
        assert_eq!(r.argv, ["sort", "a", "-b"]);
        assert_eq!(r.dash_leads, [lead(2, "command.args.0", Lead::Param("files".into()), &[], "sort")]);
        // A default is the manifest's: it may lead with a dash.
        let r = rendered(&c, &["files"], json!({}), json!({"files": ["-r", "a"]}), json!({})).unwrap();
        assert_eq!(r.argv, ["sort", "-r", "a"]);
        assert_eq!(r.dash_leads, []);
    }

    #[test]
    fn a_value_a_block_writes_first_names_what_the_block_reads() {
        let c =
            cmd("sort", vec![one("{{#each vs}}{{this}}{{/each}}{{context.selection}}"), group(&["-m", "{{member}}"])]);
        let r = rendered(
            &c,
            &["vs", "member"],
            json!({"vs": ["-x"], "member": "-y"}),
            json!({}),
            json!({"selection": "s"}),
        )
        .unwrap();
        assert_eq!(r.argv, ["sort", "-xs", "-m", "-y"]);
        assert_eq!(
            r.dash_leads,
            [
                lead(1, "command.args.0", Lead::Block, &["vs", "context.selection"], "sort"),
                lead(3, "command.args.1.1", Lead::Param("member".into()), &["member"], "sort"),
            ]
        );
    }

    #[test]
    fn a_failure_names_the_element_and_its_template() {
        const UNSET: &str = "{{secret.PACKS_TEST_SURELY_UNSET_SECRET}}";
        let failure = |c: &Command| rendered(c, &[], json!({}), json!({}), json!({})).unwrap_err();
        let f = failure(&cmd("x", vec![one("a"), group(&["--token", UNSET])]));
        assert_eq!((f.field.as_str(), f.template.as_str()), ("command.args.1.1", UNSET));
        assert!(f.message.contains("PACKS_TEST_SURELY_UNSET_SECRET` is not set"), "{}", f.message);
        assert_eq!(failure(&cmd("x", vec![one(UNSET)])).field, "command.args.0");
        let mut c = cmd("x", vec![]);
        c.env.insert("TOKEN".into(), UNSET.into());
        assert_eq!(failure(&c).field, "command.env.TOKEN");
        let c = Command { cwd: Some(UNSET.into()), ..cmd("x", vec![]) };
        assert_eq!(failure(&c).field, "command.cwd");
        let c = Command { stdin: Some(UNSET.into()), ..cmd("x", vec![]) };
        assert_eq!(failure(&c).field, "command.stdin");
    }

    #[test]
    fn a_group_repeats_over_one_array_however_often_it_uses_it() {
        let c = cmd("x", vec![group(&["--pair", "{{a}}", "{{a}}.bak"])]);
        assert_eq!(
            argv(c, &["a"], json!({"a": ["p", "q"]}), json!({})),
            ["x", "--pair", "p", "p.bak", "--pair", "q", "q.bak"]
        );
        let c = cmd("x", vec![one("-v"), group(&["--map", "{{a}}", "{{b}}"])]);
        let f = rendered(&c, &["a", "b"], json!({"a": ["p"], "b": ["q"]}), json!({}), json!({})).unwrap_err();
        assert_eq!(f.field, "command.args.1");
        assert_eq!(f.message, "a group may repeat over one array parameter, but uses `a` and `b`");
    }

    #[test]
    fn env_and_secret_values_are_read_from_packs_environment() {
        let path = std::env::var("PATH").expect("PATH is set where tests run");
        let c = cmd("x", vec![one("{{env.PATH}}"), group(&["--token", "{{secret.PACKS_TEST_SURELY_UNSET_SECRET}}"])]);
        let t = CommandTemplate::compile(&c, &[]).unwrap();
        let (given, resolved, context) = (Map::new(), Map::new(), Map::new());
        let values = Values { given: &given, resolved: &resolved, context: &context };
        // A dry run renders the unset secret as `***`, and masks it.
        let r = t.render_with_placeholder_secrets(&values).unwrap();
        assert_eq!(r.argv, ["x", &path, "--token", "***"]);
        assert_eq!(r.secrets, ["***"]);
        // A real run needs it.
        assert_eq!(t.render(&values).unwrap_err().field, "command.args.1.1");
        let t = CommandTemplate::compile(&cmd("x", vec![one("{{secret.PATH}}")]), &[]).unwrap();
        let r = t.render(&values).unwrap();
        assert_eq!((r.argv, r.secrets), (vec!["x".to_owned(), path.clone()], vec![path]));
    }

    #[test]
    fn only_a_parameter_that_reaches_the_program_on_stdin_alone_is_stdin_only() {
        let mut c = cmd("x", vec![one("--name={{in_arg}}")]);
        c.env.insert("V".into(), "{{in_env}}".into());
        c.cwd = Some("{{in_cwd}}".into());
        c.stdin = Some("{{data}} {{in_arg}} {{in_env}} {{in_cwd}}".into());
        let params = ["data", "in_arg", "in_env", "in_cwd", "unread"];
        let t = CommandTemplate::compile(&c, &params).unwrap();
        let only: Vec<&str> = params.into_iter().filter(|p| t.only_on_stdin(p)).collect();
        assert_eq!(only, ["data"]);
        // Without `command.stdin` nothing is.
        let t = CommandTemplate::compile(&cmd("x", vec![]), &["unread"]).unwrap();
        assert!(!t.only_on_stdin("unread"));
    }

    #[test]
    fn the_working_directory_is_unset_when_it_renders_empty() {
        let c = Command { cwd: Some("{{dir}}".into()), ..cmd("x", vec![]) };
        let cwd = |given| rendered(&c, &["dir"], given, json!({}), json!({})).unwrap().cwd;
        assert_eq!(cwd(json!({})), None);
        assert_eq!(cwd(json!({"dir": "sub"})), Some("sub".to_owned()));
    }

    #[test]
    fn every_template_is_listed_with_its_site_in_manifest_order() {
        let mut c = cmd("x", vec![one("a"), group(&["b", "{{p}}"])]);
        c.env.insert("E".into(), "e".into());
        c.cwd = Some("d".into());
        c.stdin = Some("s".into());
        let t = CommandTemplate::compile(&c, &["p"]).unwrap();
        let listed: Vec<(String, String, &str)> = t
            .templates()
            .into_iter()
            .map(|(site, t)| (site.to_string(), site.path().to_string(), t.source()))
            .collect();
        let want = [
            ("command.args.0", "a"),
            ("command.args.1.0", "b"),
            ("command.args.1.1", "{{p}}"),
            ("command.env.E", "e"),
            ("command.cwd", "d"),
            ("command.stdin", "s"),
        ];
        let want: Vec<(String, String, &str)> =
            want.iter().map(|(f, s)| ((*f).to_owned(), (*f).to_owned(), *s)).collect();
        assert_eq!(listed, want);
    }

    #[test]
    fn hostile_values_stay_one_element() {
        let nasty = "a b; rm -rf / $(id) `id` \"q\" 'q' \n * -x";
        let a = argv(split_command_line("echo -- {{v}}").unwrap(), &["v"], json!({"v": nasty}), json!({}));
        assert_eq!(a, ["echo", "--", nasty]);
    }

    #[test]
    fn empty_elements_are_omitted_unless_given() {
        let c = cmd("x", vec![one("{{a}}"), one("{{#if f}}-f{{/if}}"), one("pre{{a}}")]);
        assert_eq!(argv(c.clone(), &["a", "f"], json!({}), json!({})), ["x", "pre"]);
        assert_eq!(argv(c, &["a", "f"], json!({"a": ""}), json!({})), ["x", "", "pre"]);
    }

    #[test]
    fn a_group_repeated_over_an_array_copies_the_values_once() {
        // A copy of every value per item (the array included) cost the square of its length.
        let tags: Vec<String> = (0..20_000).map(|i| format!("t{i}")).collect();
        let c = cmd("x", vec![group(&["--tag", "{{tags}}"]), group(&["--n", "{{#if n}}{{n}}{{/if}}", "{{tags}}"])]);
        let before = crate::template::DATA_COPIES.with(std::cell::Cell::get);
        let a = argv(c, &["tags", "n"], json!({"tags": tags, "n": 1}), json!({}));
        let copies = crate::template::DATA_COPIES.with(std::cell::Cell::get) - before;
        assert_eq!(a.len(), 1 + 20_000 * 2 + 20_000 * 3);
        assert_eq!(a[1..7], ["--tag", "t0", "--tag", "t1", "--tag", "t2"]);
        assert_eq!(a[a.len() - 3..], ["--n", "1", "t19999"]);
        assert!(copies <= 2, "{copies} copies of the values");
    }

    #[test]
    fn groups_omit_and_repeat() {
        let c = cmd("x", vec![group(&["--team", "{{team}}"]), group(&["--tag", "{{tags}}"]), group(&["-v"])]);
        let p = &["team", "tags"];
        assert_eq!(argv(c.clone(), p, json!({}), json!({})), ["x", "-v"]);
        assert_eq!(
            argv(c.clone(), p, json!({"tags": ["a", "b c"]}), json!({"team": "ENG"})),
            ["x", "--team", "ENG", "--tag", "a", "--tag", "b c", "-v"]
        );
        assert_eq!(argv(c, p, json!({"tags": []}), json!({})), ["x", "-v"]);
        let flag = cmd("x", vec![group(&["--human", "{{#if h}}{{/if}}"])]);
        assert_eq!(argv(flag.clone(), &["h"], json!({"h": false}), json!({})), ["x"]);
        assert_eq!(argv(flag, &["h"], json!({"h": true}), json!({})), ["x", "--human"]);
    }

    #[test]
    fn splat_and_value_rendering() {
        let c = cmd("x", vec![one("{{files}}"), one("n={{n}}"), one("{{obj}}")]);
        let a = argv(c, &["files", "n", "obj"], json!({"files": ["a", "-b"], "n": 15, "obj": {"k": [1]}}), json!({}));
        assert_eq!(a, ["x", "a", "-b", "n=15", r#"{"k":[1]}"#]);
    }

    #[test]
    fn literal_empty_is_kept_and_absent_optionals_render_in_blocks() {
        let c = cmd("ssh-keygen", vec![one("-N"), one(""), one("{{#each tags}}{{this}}{{/each}}")]);
        assert_eq!(argv(c, &["tags"], json!({}), json!({})), ["ssh-keygen", "-N", ""]);
    }

    #[test]
    fn groups_and_env_values_follow_the_environment() {
        let mut c = cmd("x", vec![group(&["--proxy", "{{env.PACKS_TEST_SURELY_UNSET_VAR}}"])]);
        c.env.insert("TZ".into(), "{{tz}}".into());
        c.env.insert("LIT".into(), "".into());
        let t = CommandTemplate::compile(&c, &["tz"]).unwrap();
        let (given, resolved, context) = (Map::new(), Map::new(), Map::new());
        let r = t.render(&Values { given: &given, resolved: &resolved, context: &context }).unwrap();
        assert_eq!(r.argv, ["x"]);
        assert_eq!(r.env, [("LIT".to_owned(), String::new())]);
    }

    #[test]
    fn compile_errors_carry_paths() {
        let c = cmd("x", vec![one("ok"), group(&["--a", "{{nope}}"])]);
        let errs = CommandTemplate::compile(&c, &["a"]).unwrap_err();
        assert_eq!(errs[0].0.to_string(), "command.args.1.1");
    }
}
