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
