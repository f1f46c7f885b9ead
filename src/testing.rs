//! `packs test`: the `tests` a manifest carries, run through the real pipeline.
//!
//! A test gives arguments (and context), and what to expect: an exit code, `ok`,
//! text in the output, a regular expression, the exact output, an error kind or
//! message, or, with `"dry_run": true`, the exact argv (secrets as `***`), so
//! network and mutating tools are tested without running anything.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::dispatch::{self, ApproveAll, Context, ToolError, ToolResult};
use crate::tool::Tool;

/// Keys of one test, for did-you-mean help.
pub(crate) const TEST_KEYS: &[&str] = &["name", "args", "context", "dry_run", "expect"];
/// Keys of `expect`.
pub(crate) const EXPECT_KEYS: &[&str] =
    &["exit_code", "ok", "stdout_contains", "stdout_matches", "output_equals", "error", "argv"];

/// One entry of a manifest's `tests`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct ToolTest {
    /// A label (default: its position, `#1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The call's arguments.
    pub args: Map<String, Value>,
    /// Context values (`url`, `cwd`, ...).
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub context: IndexMap<String, String>,
    /// Plan only; compare `expect.argv` and run nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// What must hold.
    pub expect: Expect,
}

/// What a test expects. Every field given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct Expect {
    /// The tool's exit code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The result's `ok`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// Text the output contains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_contains: Option<String>,
    /// A regular expression the output matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_matches: Option<String>,
    /// The exact output (trailing whitespace ignored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_equals: Option<String>,
    /// An error kind (`validation`, `not_found`, `permission_denied`...) or text the error contains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// With `dry_run`: the exact argv (secrets as `***`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
}

/// The result of one test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `tool` / `name`.
    pub label: String,
    /// Each expectation that failed, as `expected … / got …` lines.
    pub failures: Vec<String>,
}

impl Outcome {
    /// True when every expectation held.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// What a test observed.
enum Observed {
    Ran(ToolResult),
    Planned(Vec<String>),
    Failed(ToolError),
}

/// Run every test of `tool`. Calls are approved: writing the test is the approval.
pub fn run_tests(tool: &Tool) -> Vec<Outcome> {
    let tests = tool.manifest().map(|m| m.tests.as_slice()).unwrap_or_default();
    tests
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let label = format!("{} / {}", tool.name(), t.name.clone().unwrap_or_else(|| format!("#{}", i + 1)));
            let failures = match observe(tool, t) {
                Ok(observed) => check(&t.expect, &observed),
                Err(setup) => vec![setup],
            };
            Outcome { label, failures }
        })
        .collect()
}

fn observe(tool: &Tool, t: &ToolTest) -> Result<Observed, String> {
    let mut context = Context::new();
    for (k, v) in &t.context {
        context.set(k, v.clone())?;
    }
    let args = match dispatch::prepare(tool, Value::Object(t.args.clone()), &context) {
        Ok(a) => a,
        Err(e) => return Ok(Observed::Failed(e)),
    };
    if t.dry_run {
        return Ok(match dispatch::plan_with_placeholder_secrets(tool, &args, &context) {
            Ok(plan) => Observed::Planned(plan.invocation.argv),
            Err(e) => Observed::Failed(e),
        });
    }
    let result = dispatch::plan(tool, &args, &context)
        .and_then(|plan| dispatch::authorize(tool, &plan, &context, &ApproveAll).map(|()| plan))
        .and_then(|plan| dispatch::execute(tool, &plan, &context, |_, _| {}));
    Ok(match result {
        Ok(r) => Observed::Ran(r),
        Err(e) => Observed::Failed(e),
    })
}

fn check(expect: &Expect, observed: &Observed) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fail = |what: &str, expected: String, got: String| {
        failures.push(format!("{what}\n      expected: {expected}\n      got:      {got}"));
    };
    let (result, error) = match observed {
        Observed::Ran(r) => (Some(r), r.error.clone()),
        Observed::Failed(e) => (None, Some(format!("{} ({})", e, e.kind()))),
        Observed::Planned(argv) => {
            match &expect.argv {
                Some(want) if want != argv => fail("argv", format!("{want:?}"), format!("{argv:?}")),
                _ => {}
            }
            if let Some(e) = &expect.error {
                fail("error", e.clone(), "no error (the call planned)".into());
            }
            let needs_a_run = expect.exit_code.is_some()
                || expect.ok.is_some()
                || expect.stdout_contains.is_some()
                || expect.stdout_matches.is_some()
                || expect.output_equals.is_some();
            if needs_a_run {
                fail(
                    "expectations a dry run can check",
                    "only `argv` or `error`".into(),
                    "`exit_code`, `ok` or output expectations, which need the tool to run; drop `dry_run` or them"
                        .into(),
                );
            }
            return failures;
        }
    };
    if let Some(want) = &expect.error {
        match (observed, &error) {
            (Observed::Failed(e), _) if e.kind() == want || e.to_string().contains(want.as_str()) => {}
            (Observed::Ran(_), Some(msg)) if msg.contains(want.as_str()) => {}
            _ => fail("error", want.clone(), error.clone().unwrap_or_else(|| "no error".into())),
        }
    } else if let Observed::Failed(e) = observed {
        fail("a result", "the tool to run".into(), format!("{e} ({})", e.kind()));
        return failures;
    }
    let output = result.map(|r| r.output.as_str()).unwrap_or_default();
    if let Some(want) = expect.exit_code {
        let got = result.and_then(|r| r.exit_code);
        if got != Some(want) {
            fail("exit code", want.to_string(), got.map_or_else(|| "none".into(), |c| c.to_string()));
        }
    }
    if let Some(want) = expect.ok {
        let got = result.is_some_and(|r| r.ok);
        if got != want {
            fail(
                "ok",
                want.to_string(),
                format!("{got}{}", error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()),
            );
        }
    }
    if let Some(want) = &expect.stdout_contains {
        if !output.contains(want.as_str()) {
            fail("output containing", format!("{want:?}"), format!("{output:?}"));
        }
    }
    if let Some(pattern) = &expect.stdout_matches {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(output) => {}
            Ok(_) => fail("output matching", pattern.clone(), format!("{output:?}")),
            Err(e) => fail("a valid stdout_matches regex", pattern.clone(), e.to_string()),
        }
    }
    if let Some(want) = &expect.output_equals {
        if output.trim_end() != want.trim_end() {
            fail("output", format!("{want:?}"), format!("{output:?}"));
        }
    }
    if expect.argv.is_some() {
        fail("argv", "a dry_run test".into(), "the test ran the tool; set \"dry_run\": true".into());
    }
    failures
}
