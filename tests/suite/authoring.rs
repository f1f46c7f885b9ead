//! Authoring and migration: `packs new` skeletons and `packs convert`.

use crate::common::{Packs, Test};

#[test]
fn new_writes_a_skeleton_that_lints_clean_and_passes_its_test() {
    for (style, file) in
        [(None, "greet.tool.json"), (Some("--toml"), "greet.tool.toml"), (Some("--executable"), "greet.tool.toml")]
    {
        let work = Packs::new();
        let mut args = vec![
            "new",
            "greet",
            "--program",
            "echo",
            "--param",
            "who",
            "--param",
            "loud:boolean?",
            "--param",
            "tags:array?",
        ];
        args.extend(style);
        Test::new()
            .current_dir(work.path())
            .args(&args)
            .run()
            .success()
            .stderr_contains(&format!("wrote packs/{file}"));
        let path = work.join("packs").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        if style == Some("--executable") {
            use std::os::unix::fs::PermissionsExt;
            assert!(text.starts_with("#!/usr/bin/env -S packs exec\n"), "{text}");
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o111, 0o111);
        }
        Test::new()
            .current_dir(work.path())
            .args(["lint", "packs", "--deny-warnings"])
            .run()
            .success()
            .stdout_contains("0 errors, 0 warnings");
        Test::new()
            .current_dir(work.path())
            .args(["--packs", "packs", "test"])
            .run()
            .success()
            .stdout_contains("1 passed");
        // And it runs: a value never becomes an option (after `--`).
        Test::new()
            .current_dir(work.path())
            .args(["--packs", "packs", "run", "greet", "--arg", "who=-n", "--arg", "loud=true"])
            .run()
            .success()
            .stdout_eq("--loud -- -n\n");
        // Never over an existing file without --force.
        Test::new().current_dir(work.path()).args(&args).run().code(1).stderr_contains("exists; pass --force");
        let mut forced = args.clone();
        forced.push("--force");
        Test::new().current_dir(work.path()).args(&forced).run().success();
    }
    Test::new().args(["new", "Bad", "--program", "x"]).run().code(1).stderr_contains("is not a tool name");
    Test::new()
        .args(["new", "t", "--program", "x", "--param", "n:float"])
        .run()
        .code(1)
        .stderr_contains("`float` is not a parameter type");
}
