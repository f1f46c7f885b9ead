//! `packs test`: the `tests` a manifest carries, run through the real pipeline.
//!
//! A test gives arguments (and context), and what to expect: an exit code, `ok`,
//! text in the output, a regular expression, the exact output, an error kind or
//! message, or, with `"dry_run": true`, the exact argv (secrets as `***`), so
//! network and mutating tools are tested without running anything.

use serde_json::Value;

use crate::call::{Call, Context, ToolError, ToolResult};
use crate::catalog::Catalog;
use crate::tool::Tool;
use crate::tool_test::{Expect, ToolTest};

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

/// Run every test of `tool` (a tool of `catalog`) through the call pipeline. Calls are
/// approved: writing the test is the approval. They are not recorded in an audit log.
pub fn run_tests(catalog: &Catalog, tool: &Tool) -> Vec<Outcome> {
    run_tests_in(catalog, tool, &Context::new())
}

/// Run every test of `tool` with `base`'s agent, workspace, sandbox mode, mode and
/// pass-env (each test adds its own context values); approved and not recorded all the same.
pub(crate) fn run_tests_in(catalog: &Catalog, tool: &Tool, base: &Context) -> Vec<Outcome> {
    let tests = tool.manifest().map(|m| m.tests.as_slice()).unwrap_or_default();
    tests
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let label = format!("{} / {}", tool.name(), t.name.clone().unwrap_or_else(|| format!("#{}", i + 1)));
            let failures = match observe(catalog, tool, t, base) {
                Ok(observed) => check(&t.expect, &observed),
                Err(setup) => vec![setup],
            };
            Outcome { label, failures }
        })
        .collect()
}

fn observe(catalog: &Catalog, tool: &Tool, t: &ToolTest, base: &Context) -> Result<Observed, String> {
    let mut context = base.clone();
    for (k, v) in &t.context {
        context.set(k, v.clone()).map_err(|e| e.to_string())?;
    }
    let call = Call::new(tool.name(), Value::Object(t.args.clone())).context(&context).manifest_test();
    Ok(if t.dry_run {
        match call.dry_run(catalog) {
            Ok(planned) => Observed::Planned(planned.argv),
            Err(e) => Observed::Failed(e),
        }
    } else {
        match call.run(catalog) {
            Ok(r) => Observed::Ran(r),
            Err(e) => Observed::Failed(e),
        }
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
    if let Some(want) = &expect.stdout_contains
        && !output.contains(want.as_str())
    {
        fail("output containing", format!("{want:?}"), format!("{output:?}"));
    }
    if let Some(pattern) = &expect.stdout_matches {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(output) => {}
            Ok(_) => fail("output matching", pattern.clone(), format!("{output:?}")),
            Err(e) => fail("a valid stdout_matches regex", pattern.clone(), e.to_string()),
        }
    }
    if let Some(want) = &expect.output_equals
        && output.trim_end() != want.trim_end()
    {
        fail("output", format!("{want:?}"), format!("{output:?}"));
    }
    if expect.argv.is_some() {
        fail("argv", "a dry_run test".into(), "the test ran the tool; set \"dry_run\": true".into());
    }
    failures
}
