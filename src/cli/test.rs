//! `packs test`.

use super::print;
use crate::catalog::Catalog;
use crate::testing;

#[derive(clap::Args, Debug)]
pub(super) struct TestArgs {
    /// Only these tools (default: every tool with tests)
    names: Vec<String>,
    /// Output format: human (PASS/FAIL lines), json (one document), junit (JUnit XML for CI systems)
    #[arg(long, value_enum, default_value = "human")]
    format: Format,
}

/// `packs test --format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// PASS and FAIL lines, then a count
    Human,
    /// One JSON document: every test with its tool, name, outcome, duration and failures
    Json,
    /// JUnit XML (Jenkins' junit-10.xsd): a testsuite per tool, a testcase per test
    Junit,
}

/// One test's outcome, with the tool it belongs to and how long it took.
struct Ran {
    tool: String,
    file: String,
    outcome: testing::Outcome,
    seconds: f64,
}

/// Run the tests in `base`: the session's agent, workspace, sandbox, mode and pass-env apply,
/// with two named overrides: calls are approved (writing the test is the approval) and
/// never recorded (`--log` is refused).
pub(super) fn test(catalog: &Catalog, a: &TestArgs, base: &crate::call::Context) -> anyhow::Result<i32> {
    for name in &a.names {
        catalog.get(name)?;
    }
    let mut ran = Vec::new();
    for tool in catalog.tools().filter(|t| a.names.is_empty() || a.names.iter().any(|n| n == t.name())) {
        // Each test's time: the tests of one tool run one after another.
        let start = std::time::Instant::now();
        let outcomes = testing::run_tests_in(catalog, tool, base);
        let each = start.elapsed().as_secs_f64() / outcomes.len().max(1) as f64;
        for outcome in outcomes {
            ran.push(Ran {
                tool: tool.name().to_owned(),
                file: tool.source().display().to_string(),
                outcome,
                seconds: each,
            });
        }
    }
    // A tool `--locked` refused has tests that cannot run: each counts as a failure.
    for (name, reason) in catalog.refused().filter(|(n, _)| a.names.is_empty() || a.names.iter().any(|m| m == n)) {
        ran.push(Ran {
            tool: name.to_owned(),
            file: String::new(),
            outcome: testing::Outcome {
                label: format!("{name} / (its tests)"),
                failures: vec![format!("not run: {reason}")],
            },
            seconds: 0.0,
        });
    }
    let passed = ran.iter().filter(|r| r.outcome.passed()).count();
    let failed = ran.len() - passed;
    let out = match a.format {
        Format::Human => human(&ran, passed, failed),
        Format::Json => json(&ran, passed, failed),
        Format::Junit => junit(&ran),
    };
    print(&out)?;
    // A manifest that does not load cannot run its tests: that fails the run too.
    let broken = catalog.diagnostics.iter().filter(|d| d.severity == crate::source::Severity::Error).count();
    if broken > 0 {
        eprintln!("error: {broken} problem(s) kept manifests from loading; their tests did not run");
    }
    Ok(if failed > 0 || broken > 0 { 1 } else { 0 })
}

fn human(ran: &[Ran], passed: usize, failed: usize) -> String {
    let mut out = String::new();
    for r in ran {
        if r.outcome.passed() {
            out.push_str(&format!("PASS {}\n", r.outcome.label));
        } else {
            out.push_str(&format!("FAIL {}\n", r.outcome.label));
            for f in &r.outcome.failures {
                out.push_str(&format!("    {f}\n"));
            }
        }
    }
    out.push_str(&format!("{passed} passed, {failed} failed\n"));
    out
}

/// The name of a test within its tool (its label without `tool / `).
fn test_name(r: &Ran) -> &str {
    r.outcome.label.strip_prefix(&format!("{} / ", r.tool)).unwrap_or(&r.outcome.label)
}

fn json(ran: &[Ran], passed: usize, failed: usize) -> String {
    let tests: Vec<serde_json::Value> = ran
        .iter()
        .map(|r| {
            serde_json::json!({
                "tool": r.tool,
                "name": test_name(r),
                "file": r.file,
                "outcome": if r.outcome.passed() { "passed" } else { "failed" },
                "duration_ms": (r.seconds * 1000.0).round() as u64,
                "failures": r.outcome.failures,
            })
        })
        .collect();
    format!("{:#}\n", serde_json::json!({"passed": passed, "failed": failed, "tests": tests}))
}

/// Text fit for XML 1.0: escaped, and characters XML cannot hold (most control
/// characters) shown as U+FFFD.
fn xml(text: &str) -> String {
    let legal: String = text
        .chars()
        .map(|c| {
            if matches!(c, '\t' | '\n' | '\r') || !(c < ' ' || ('\u{fffe}'..='\u{ffff}').contains(&c)) {
                c
            } else {
                '\u{fffd}'
            }
        })
        .collect();
    quick_xml::escape::escape(legal.as_str()).into_owned()
}

fn junit(ran: &[Ran]) -> String {
    let mut tools: Vec<&str> = Vec::new();
    for r in ran {
        if !tools.contains(&r.tool.as_str()) {
            tools.push(&r.tool);
        }
    }
    let total_failed = ran.iter().filter(|r| !r.outcome.passed()).count();
    let total: f64 = ran.iter().map(|r| r.seconds).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"packs test\" tests=\"{}\" failures=\"{total_failed}\" errors=\"0\" time=\"{total:.3}\">\n",
        ran.len()
    ));
    for tool in tools {
        let cases: Vec<&Ran> = ran.iter().filter(|r| r.tool == tool).collect();
        let failures = cases.iter().filter(|r| !r.outcome.passed()).count();
        let time: f64 = cases.iter().map(|r| r.seconds).sum();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{time:.3}\" file=\"{}\">\n",
            xml(tool),
            cases.len(),
            xml(&cases[0].file)
        ));
        for r in cases {
            // The Jenkins xUnit schema (junit-10.xsd) takes no `file` on a testcase: a
            // tool's tests are all in its one manifest, named by its testsuite.
            let open = format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
                xml(tool),
                xml(test_name(r)),
                r.seconds
            );
            if r.outcome.passed() {
                out.push_str(&open);
                out.push_str("/>\n");
            } else {
                let first = r.outcome.failures.first().map(String::as_str).unwrap_or("failed");
                let first = first.lines().next().unwrap_or(first);
                out.push_str(&format!(
                    "{open}>\n      <failure message=\"{}\" type=\"expectation\">{}</failure>\n    </testcase>\n",
                    xml(first),
                    xml(&r.outcome.failures.join("\n"))
                ));
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
