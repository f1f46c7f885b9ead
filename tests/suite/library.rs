//! The library entry points a front-end embeds: `Catalog::load` and `dispatch`.

use packs::{Catalog, Context, DenyAll, SearchPath, ToolError};
use serde_json::{Value, json};

use crate::common::{Packs, nul_fields, printf_tool};

fn catalog(packs: &Packs) -> Catalog {
    let catalog = Catalog::load(&SearchPath::dirs([packs.path()]));
    assert!(catalog.diagnostics.is_empty(), "{:?}", catalog.diagnostics);
    catalog
}

fn echo() -> Packs {
    Packs::new().manifest(
        "echo_v",
        printf_tool(
            "echo_v",
            json!({"v": {"type": "string", "required": true}, "n": {"type": "integer"}}),
            json!(["{{v}}", "{{n}}"]),
        ),
    )
}

#[test]
fn dispatch_accepts_arguments_as_a_json_string() {
    let packs = echo();
    let catalog = catalog(&packs);
    let from_string = packs::dispatch(
        &catalog,
        "echo_v",
        Value::String(r#"{"v": "a b; $(id)", "n": 2}"#.into()),
        &Context::new(),
        &DenyAll,
    )
    .expect("a JSON string holding an object is accepted");
    assert!(from_string.ok, "{from_string:?}");
    assert_eq!(nul_fields(from_string.output.as_bytes()), Some(vec!["a b; $(id)".to_owned(), "2".to_owned()]));
    let from_object =
        packs::dispatch(&catalog, "echo_v", json!({"v": "a b; $(id)", "n": 2}), &Context::new(), &DenyAll).unwrap();
    assert_eq!(from_object.output, from_string.output);
}

#[test]
fn dispatch_rejects_arguments_that_are_not_an_object() {
    let packs = echo();
    let catalog = catalog(&packs);
    for args in [json!([1]), json!(5), json!(true), Value::String("[1]".into()), Value::String("{nope".into())] {
        let e = packs::dispatch(&catalog, "echo_v", args.clone(), &Context::new(), &DenyAll).unwrap_err();
        assert!(matches!(e, ToolError::InvalidArguments { .. }), "{args}: {e:?}");
        assert_eq!(e.kind(), "validation");
        assert!(e.retryable());
    }
    // Null and an empty string are "no arguments": here, a missing required one.
    for args in [Value::Null, Value::String("  ".into())] {
        let e = packs::dispatch(&catalog, "echo_v", args, &Context::new(), &DenyAll).unwrap_err();
        assert_eq!(
            e.to_json(),
            json!({"error": {
                "kind": "validation",
                "message": "invalid arguments for `echo_v`: `v`: `v` is required",
                "retryable": true,
                "errors": [{"field": "v", "message": "`v` is required", "schema": {"type": "string"}}],
            }})
        );
    }
}

#[test]
fn dispatch_only_resolves_cataloged_names() {
    let packs = echo();
    let catalog = catalog(&packs);
    for name in ["../../bin/sh", "/bin/sh", "printf", "echo_v.tool.json"] {
        let e = packs::dispatch(&catalog, name, json!({"v": "x"}), &Context::new(), &DenyAll).unwrap_err();
        assert_eq!(e.kind(), "not_found", "{name}");
        assert!(!e.retryable());
    }
}

#[test]
fn context_keys_are_checked_and_fill_parameters() {
    let packs = Packs::new().manifest(
        "open",
        printf_tool(
            "open",
            json!({"url": {"type": "string", "required": true, "source": "context.url"}}),
            json!(["{{url}}"]),
        ),
    );
    let catalog = catalog(&packs);
    let mut context = Context::new();
    assert!(context.set("nope", "x").is_err());
    context.set("url", "https://example.com/?q=1").unwrap();
    let r = packs::dispatch(&catalog, "open", json!({}), &context, &DenyAll).unwrap();
    assert_eq!(r.output, "https://example.com/?q=1\0");
}

#[test]
fn a_failed_tool_is_a_result_not_an_error() {
    let packs = Packs::new().manifest(
        "fails",
        json!({"name": "fails", "description": "d", "command": {"program": "sh", "args": ["-c", "echo out; echo err >&2; exit 9"]}}),
    );
    let catalog = catalog(&packs);
    let r = packs::dispatch(&catalog, "fails", json!({}), &Context::new(), &DenyAll).unwrap();
    assert!(!r.ok);
    assert_eq!((r.exit_code, r.output.as_str(), r.stderr.as_str()), (Some(9), "out\n", "err\n"));
    assert_eq!(r.error.as_deref(), Some("the tool exited with code 9 (allowed exit codes: [0])"));
}

/// The public items of the module in `path` (named `module`), and of its `pub mod`s: what
/// `pub` declares at the top level (`named_enum!` blocks too) and what `pub use` re-exports.
fn public_items(path: &std::path::Path, module: &str, out: &mut std::collections::BTreeSet<(String, String)>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let mut in_macro = false;
    while let Some(line) = lines.next() {
        if line.ends_with("named_enum! {") {
            in_macro = true;
        } else if in_macro && line == "}" {
            in_macro = false;
        } else if in_macro {
            if let Some(rest) = line.strip_prefix("    pub enum ") {
                out.insert((module.to_owned(), ident(rest)));
            }
        } else if let Some(rest) = line.strip_prefix("pub use ") {
            let mut statement = rest.to_owned();
            while !statement.trim_end().ends_with(';') {
                statement.push_str(lines.next().expect("a `pub use` ends with `;`").trim());
            }
            let statement = statement.trim_end().trim_end_matches(';');
            let names = match statement.split_once('{') {
                Some((_, list)) => list.trim_end_matches('}').split(',').map(str::to_owned).collect(),
                None => vec![statement.to_owned()],
            };
            for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
                let name = name.rsplit(" as ").next().unwrap().rsplit("::").next().unwrap();
                out.insert((module.to_owned(), name.to_owned()));
            }
        } else if let Some(rest) = line.strip_prefix("pub ") {
            let rest = rest.trim_start_matches("unsafe ").trim_start_matches("async ");
            let Some((kind, rest)) = rest.split_once(' ') else { continue };
            match kind {
                "mod" => {
                    let name = ident(rest);
                    let dir = match path.file_name().and_then(|f| f.to_str()) {
                        Some("lib.rs" | "mod.rs") => path.parent().unwrap().to_owned(),
                        _ => path.with_extension(""),
                    };
                    let file = [dir.join(format!("{name}.rs")), dir.join(&name).join("mod.rs")]
                        .into_iter()
                        .find(|f| f.is_file())
                        .unwrap_or_else(|| panic!("{}: no file for `pub mod {name}`", path.display()));
                    public_items(&file, &format!("{module}::{name}"), out);
                }
                "fn" | "struct" | "enum" | "trait" | "const" | "static" | "type" => {
                    out.insert((module.to_owned(), ident(rest)));
                }
                _ => {}
            }
        }
    }
}

fn ident(text: &str) -> String {
    text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// docs/LIBRARY.md's table of the public API lists exactly what the crate exports.
#[test]
fn the_public_api_is_this_table() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut exported = std::collections::BTreeSet::new();
    public_items(&root.join("src/lib.rs"), "packs", &mut exported);
    assert!(exported.len() > 100, "the scan found the exports: {exported:?}");

    let page = std::fs::read_to_string(root.join("docs/LIBRARY.md")).unwrap();
    let table = page.split("## The public API").nth(1).expect("docs/LIBRARY.md has `## The public API`");
    let mut documented = std::collections::BTreeSet::new();
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let module = cells[1].trim_matches('`');
        for item in cells[2].split(',').map(|i| i.trim()) {
            assert!(item.starts_with('`') && item.ends_with('`'), "docs/LIBRARY.md: `{item}` in the row of {module}");
            assert!(
                documented.insert((module.to_owned(), item.trim_matches('`').to_owned())),
                "docs/LIBRARY.md lists {module}::{item} twice"
            );
        }
    }
    // A public module is a row of its own, not an item of its parent's rows.
    let modules: std::collections::BTreeSet<String> = documented.iter().map(|(m, _)| m.clone()).collect();
    let exported: std::collections::BTreeSet<_> =
        exported.into_iter().filter(|(m, i)| !modules.contains(&format!("{m}::{i}"))).collect();
    let show = |set: Vec<&(String, String)>| set.iter().map(|(m, i)| format!("{m}::{i}")).collect::<Vec<_>>();
    assert_eq!(
        (show(exported.difference(&documented).collect()), show(documented.difference(&exported).collect())),
        (vec![], vec![]),
        "(exported but not in docs/LIBRARY.md's table, in the table but not exported)"
    );
}
