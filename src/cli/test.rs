//! `packs test`.

use super::print;
use crate::catalog::Catalog;
use crate::testing;

#[derive(clap::Args, Debug)]
pub(super) struct TestArgs {
    /// Only these tools (default: every tool with tests)
    names: Vec<String>,
}

pub(super) fn test(catalog: &Catalog, a: &TestArgs) -> anyhow::Result<i32> {
    for name in &a.names {
        catalog.get(name)?;
    }
    let (mut passed, mut failed) = (0, 0);
    let mut out = String::new();
    for tool in catalog.tools().filter(|t| a.names.is_empty() || a.names.iter().any(|n| n == t.name())) {
        for outcome in testing::run_tests(catalog, tool) {
            if outcome.passed() {
                passed += 1;
                out.push_str(&format!("PASS {}\n", outcome.label));
            } else {
                failed += 1;
                out.push_str(&format!("FAIL {}\n", outcome.label));
                for f in &outcome.failures {
                    out.push_str(&format!("    {f}\n"));
                }
            }
        }
    }
    out.push_str(&format!("{passed} passed, {failed} failed\n"));
    print(&out)?;
    // A manifest that does not load cannot run its tests: that fails the run too.
    let broken = catalog.diagnostics.iter().filter(|d| d.severity == crate::source::Severity::Error).count();
    if broken > 0 {
        eprintln!("error: {broken} problem(s) kept manifests from loading; their tests did not run");
    }
    Ok(if failed > 0 || broken > 0 { 1 } else { 0 })
}
