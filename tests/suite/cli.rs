//! The command line itself: option placement, `list`, `help NAME`, error
//! reporting, usage errors, a closed stdout.

use std::io::Read;
use std::process::{Command, Stdio};

use serde_json::json;

use crate::common::{BUNDLED, PACKS, Packs, Test, printf_tool};

fn hello() -> Packs {
    Packs::new().manifest(
        "hello",
        json!({"name": "hello", "description": "Say hello", "parameters": {"who": {"type": "string", "default": "world"}}, "command": "echo hello {{who}}"}),
    )
}

#[test]
fn packs_option_goes_before_or_after_the_subcommand() {
    let packs = hello();
    let dir = packs.path().to_str().unwrap();
    for args in [
        vec!["--packs", dir, "run", "hello"],
        vec!["run", "--packs", dir, "hello"],
        vec!["run", "hello", "--packs", dir],
        vec!["run", "hello", &format!("--packs={dir}")],
    ] {
        Test::new().args(&args).run().success().stdout_eq("hello world\n").stderr_eq("");
    }
    Test::new().args(["list", "--json", "--packs", dir]).run().success();
    Test::new().args(["describe", "hello", "--packs", dir]).run().success();
}

#[test]
fn list_table() {
    let test = Test::new()
        .write("packs/hello.tool.json", &json!({"name": "hello", "description": "Say hello\nSecond line is not shown", "command": "echo hello"}).to_string())
        .write(
            "packs/deep/writer.tool.json",
            &json!({"name": "file_writer", "description": "A tool that writes files, with a description far longer than sixty characters", "command": "touch x", "policy": {"read_only": false}}).to_string(),
        )
        .executable(
            "packs/zz_exec",
            "#!/bin/sh\necho '{\"name\":\"an_exec\",\"description\":\"Executable\",\"parameters\":{\"type\":\"object\"}}'\n",
        );
    test.args(["--packs", "packs", "list"]).run().success().stderr_eq("").stdout_eq(
        "NAME         KIND        READ-ONLY  DESCRIPTION                                                   SOURCE
file_writer  manifest    no         A tool that writes files, with a description far longer tha…  packs/deep/writer.tool.json
hello        manifest    yes        Say hello                                                     packs/hello.tool.json
an_exec      executable  no         Executable                                                    packs/zz_exec
",
    );
}

#[test]
fn list_json() {
    let packs = hello();
    let out = Test::new().packs_dir(&packs).args(["list", "--json"]).run();
    out.success();
    assert_eq!(
        out.json(),
        json!([{
            "name": "hello",
            "kind": "manifest",
            "read_only": true,
            "description": "Say hello",
            "source": packs.join("hello.tool.json").display().to_string(),
            "pack_dir": packs.path().display().to_string(),
        }])
    );
}

#[test]
fn help_page_of_a_tool() {
    let packs = Packs::new().manifest(
        "greet",
        json!({
            "name": "greet",
            "description": "Greet someone\nPolitely.",
            "examples": ["User: greet Ann\ncall:greet{who:<escape>Ann<escape>}"],
            "parameters": {
                "who": {"type": "string", "required": true, "description": "Who to greet"},
                "times": {"type": "integer", "default": 1, "minimum": 1},
                "url": {"type": "string", "source": "context.url"},
                "mode": {"type": "string", "source": "literal", "default": "x"},
            },
            "command": {"program": "echo", "args": ["hi", "{{who}}", ["--times", "{{times}}"], "{{url}}", "{{mode}}"]},
            "policy": {"timeout_secs": 3, "allowed_exit_codes": [0, 1]},
            "output": {"max_chars": 50},
        }),
    );
    let source = packs.join("greet.tool.json").display().to_string();
    Test::new().packs_dir(&packs).args(["help", "greet"]).run().success().stderr_eq("").stdout_eq(&format!(
        "GREET(1)                                               GREET(1)

NAME
       greet - Greet someone

SYNOPSIS
       packs run greet '{{\"who\": <string>, [\"times\": <integer>], [\"url\": <string>]}}'

DESCRIPTION
       Greet someone
       Politely.

PARAMETERS
       who (string, required)
              Who to greet
       times (integer)
              Default: 1.
              minimum: 1.
       url (string)
              Filled from the caller's context (url) when omitted.

COMMAND
       echo hi '{{{{who}}}}' '[--times {{{{times}}}}]' '{{{{url}}}}' '{{{{mode}}}}'
       No shell is involved: each argument renders to exactly one argv element; [a b] is a group.

POLICY
       tier: read_only
       read-only: yes
       network: no
       timeout: 3s
       confirm before run: no
       allowed exit codes: 0, 1
       max output bytes: 1048576
       enforced by the kernel: writes only to its private TMPDIR; credential stores unreadable; no network, no abstract Unix socket; signals only its own processes

OUTPUT
       format: text
       speak: true
       max chars: 50

EXAMPLES
       User: greet Ann
       call:greet{{who:<escape>Ann<escape>}}

EXIT STATUS
       0    the tool ran and succeeded
       1    not found, bad arguments, or validation failure
       2    the tool ran and failed (exit code not allowed, or it could not start)
       3    the call needed approval and was denied
       124  the tool timed out; its process group was killed

SOURCE
       {source} (manifest)
"
    ));
}

#[test]
fn help_page_of_a_bundled_tool_has_every_section() {
    let out = Test::new().packs_dir(BUNDLED).args(["-q", "help", "disk_usage"]).run();
    out.success();
    let sections: Vec<&str> = out
        .stdout()
        .lines()
        .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_uppercase() || c == ' '))
        .collect();
    assert_eq!(
        sections,
        [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "PARAMETERS",
            "COMMAND",
            "POLICY",
            "OUTPUT",
            "EXAMPLES",
            "EXIT STATUS",
            "SOURCE"
        ]
    );
    out.stdout_contains("       disk_usage - Show how much disk space a file or directory uses (du)\n")
        .stdout_contains("       packs run disk_usage '{\"path\": <string>, [\"human_readable\": <boolean>]}'\n")
        .stdout_contains("       124  the tool timed out; its process group was killed\n");
}

#[test]
fn help_without_a_name_is_the_usage() {
    Test::new().arg("help").run().success().stdout_contains("Usage: packs").stdout_contains("Commands:");
    Test::new().arg("--help").run().success().stdout_contains("Usage: packs");
    let out = Test::new().arg("--version").run();
    out.success();
    assert!(out.stdout().starts_with("packs "), "{}", out.stdout());
}

#[test]
fn format_values_are_listed_in_help_and_errors() {
    for (command, line, values) in [
        (
            "catalog",
            "- openai-strict:    OpenAI Chat Completions `tools` in strict mode (Structured Outputs)\n",
            "describe, openai, openai-strict, openai-responses, anthropic, gemini, mcp, gemma, functiongemma, qwen3, qwen3-xml, gemma4, llama3, mistral, glm, kimi, gpt-oss, deepseek",
        ),
        (
            "call",
            "- openai-responses: OpenAI Responses (`function_call` output items)\n",
            "auto, openai, openai-responses, anthropic, ollama, gemini, gemma, functiongemma, gemma4, qwen3, qwen3-xml, llama3, mistral, glm, kimi, gpt-oss, deepseek",
        ),
        ("lint", "- human:  Source lines with carets, like rustc (default)\n", "human, json, github, sarif"),
    ] {
        Test::new().args([command, "--help"]).run().success().stdout_contains(line);
        Test::new()
            .args([command, "--format", "nope"])
            .run()
            .code(1)
            .stdout_eq("")
            .stderr_contains("error: invalid value 'nope' for '--format <FORMAT>'\n")
            .stderr_contains(&format!("  [possible values: {values}]\n"))
            .no_panic();
    }
}

#[test]
fn errors_are_one_line() {
    let packs = Packs::new()
        .manifest("typed", printf_tool("typed", json!({"n": {"type": "integer", "required": true}}), json!(["{{n}}"])));
    let dir = packs.path().to_str().unwrap();
    let missing = format!("{dir}/missing.tool.json");
    for args in [
        vec!["run", "nope"],
        vec!["run", "typed"],
        vec!["run", "typed", "--arg", "n=x"],
        vec!["run", "typed", "--arg", "n"],
        vec!["run", "typed", "--context", "nope=1"],
        vec!["run", "typed", "--arg", "n=1", "--arg", "m=2"],
        vec!["run", "typed", "{\"n\": "],
        vec!["run", "typed", "[]"],
        vec!["describe", "nope"],
        vec!["help", "nope"],
        vec!["exec", &missing, "{}"],
    ] {
        let out = Test::new().packs_dir(dir).args(&args).run();
        out.code(1).stdout_eq("");
        if args[0] == "exec" {
            // The file's diagnostic comes first, then the error.
            assert!(out.stderr.lines().last().unwrap().starts_with("error: "), "{args:?}: {}", out.stderr);
            out.no_panic();
        } else {
            out.one_line_error();
        }
    }
}

#[test]
fn usage_errors_exit_1() {
    for args in [vec!["run"], vec!["frobnicate"], vec!["list", "--bogus"], vec![], vec!["exec"]] {
        let out = Test::new().args(&args).run();
        out.code(1).stdout_eq("").no_panic();
        assert!(out.stderr.starts_with("error: ") || args.is_empty(), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn a_closed_stdout_is_not_an_error() {
    let mut packs = Packs::new();
    for i in 0..600 {
        packs = packs.manifest(
            &format!("tool_{i}"),
            json!({"name": format!("tool_{i}"), "description": "A tool with a moderately long description for padding", "command": "true"}),
        );
    }
    let mut child = Command::new(PACKS)
        .args(["--packs"])
        .arg(packs.path())
        .arg("catalog")
        .env_remove("PACKS_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first[..3], b"[\n ");
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn a_scalar_given_twice_is_an_error_not_the_last_one() {
    let packs = Packs::new().manifest(
        "echo_v",
        printf_tool(
            "echo_v",
            json!({"v": {"type": "string"}, "tags": {"type": "array"}}),
            json!(["{{v}}", "{{tags}}"]),
        ),
    );
    let run = |args: &[&str]| Test::new().packs_dir(&packs).args(["run", "echo_v"]).args(args.iter().copied()).run();
    run(&["--arg", "v=a", "--arg", "v=b"]).code(1).stderr_contains("`--arg v` is given twice");
    // One --arg over the JSON object's value is how a value is overridden.
    run(&[r#"{"v": "a"}"#, "--arg", "v=b"]).success().stdout_eq("b\0\n");
    // Lists still grow one --arg at a time.
    run(&["--arg", "v=a", "--arg", "tags=x", "--arg", "tags=y"]).success().stdout_eq("a\0x\0y\0\n");
}

#[test]
fn help_command_shows_a_commands_help_and_tools_stay_reachable() {
    // A tool named like a packs command.
    let packs = Packs::new()
        .manifest("test", serde_json::json!({"name": "test", "description": "A tool called test", "command": "true"}));
    Test::new().args(["help", "lint"]).run().success().stdout_contains("Usage: packs lint [OPTIONS]");
    Test::new().packs_dir(&packs).args(["help", "test"]).run().success().stdout_contains("Usage: packs test");
    Test::new()
        .packs_dir(&packs)
        .args(["help", "--tool", "test"])
        .run()
        .success()
        .stdout_contains("A tool called test")
        .stdout_lacks("Usage: packs test");
    // A name that is no command is a tool, as before.
    Test::new()
        .current_dir(crate::common::REPO)
        .args(["help", "disk_usage"])
        .run()
        .success()
        .stdout_contains("DISK_USAGE(1)");
    Test::new().args(["help"]).run().success().stdout_contains("packs help COMMAND");
}

#[test]
fn shell_completions_and_the_man_page() {
    crate::common::require("bash");
    let bash = Test::new().args(["completions", "bash"]).run();
    let script = bash.success().stdout().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("packs.bash");
    std::fs::write(&file, &script).unwrap();
    // The script parses, and completing `packs ru` offers `run`.
    let probe = format!(
        "source {}; COMP_WORDS=(packs ru); COMP_CWORD=1; COMP_LINE='packs ru'; COMP_POINT=8; _packs packs ru packs; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = std::process::Command::new("bash").args(["-c", &probe]).output().unwrap();
    let offered = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && offered.lines().any(|l| l == "run"),
        "{offered}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = Test::new().args(["completions", shell]).run();
        for sub in ["lint", "serve", "convert"] {
            out.success().stdout_contains(sub);
        }
    }
    Test::new().args(["completions", "tcsh"]).run().code(1).stderr_contains("invalid value 'tcsh'");
    let man = Test::new().args(["man"]).run();
    man.success().stdout_contains(".TH packs 1").stdout_contains(".SH SYNOPSIS");
    for sub in ["RUN", "LINT", "SERVE", "LOCK", "CONVERT"] {
        man.stdout_contains(&format!(".SH \"PACKS {sub}\""));
    }
}

#[test]
fn the_man_page_is_ascii_roff() {
    let man = Test::new().args(["man"]).run();
    let roff = man.success().stdout();
    let stray: Vec<(usize, &str)> =
        roff.lines().enumerate().filter(|(_, l)| !l.is_ascii()).map(|(n, l)| (n + 1, l)).collect();
    assert!(stray.is_empty(), "lines of `packs man` with bytes beyond ASCII: {stray:?}");
    // The help texts' ellipses are there, as three periods.
    assert!(roff.contains("(`run`, `lint`, ...)"), "{roff}");
}

#[test]
fn color_follows_the_flag_no_color_and_the_terminal() {
    let bad = format!("{}/tests/fixtures/lint/invalid-name.tool.json", crate::common::REPO);
    let lint = |extra: &[&str], env: &[(&str, &str)]| {
        let mut t = Test::new().env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
        for (k, v) in env {
            t = t.env(k, v);
        }
        t.args(extra).args(["lint", &bad]).run().stdout().contains("\x1b[")
    };
    assert!(lint(&["--color", "always"], &[]));
    assert!(lint(&["--color=always"], &[("NO_COLOR", "1")]), "--color always wins over NO_COLOR");
    assert!(!lint(&["--color", "never"], &[("CLICOLOR_FORCE", "1")]));
    assert!(!lint(&[], &[]), "a pipe is not a terminal");
    assert!(lint(&[], &[("CLICOLOR_FORCE", "1")]));
    assert!(!lint(&[], &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")]));
    // On a terminal, auto colours unless NO_COLOR is set.
    crate::common::require("script"); // util-linux's (Debian: bsdutils)
    let on_tty = |no_color: bool| {
        let command = format!("{} lint {bad}", crate::common::PACKS);
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qec", &command, "/dev/null"]).env_remove("CLICOLOR_FORCE").stdin(std::process::Stdio::null());
        if no_color {
            cmd.env("NO_COLOR", "1");
        } else {
            cmd.env_remove("NO_COLOR");
        }
        String::from_utf8_lossy(&cmd.output().unwrap().stdout).contains("\x1b[")
    };
    assert!(on_tty(false));
    assert!(!on_tty(true));
}

#[test]
fn test_results_as_json_and_junit() {
    crate::common::require("python3");
    let packs = Packs::new().manifest(
        "say",
        serde_json::json!({"name": "say", "description": "Say it", "parameters": {"w": {"type": "string", "required": true}},
            "command": {"program": "echo", "args": ["{{w}}"]},
            "tests": [
                {"name": "passes", "args": {"w": "ok"}, "expect": {"stdout_contains": "ok"}},
                {"name": "fails <&> \"quoted\"", "args": {"w": "a\u{1}b <tag> & 'x'"}, "expect": {"stdout_contains": "never"}}
            ]}),
    );
    let json = Test::new().packs_dir(&packs).args(["test", "--format", "json"]).run();
    let report = json.code(1).json();
    assert_eq!((report["passed"].as_u64(), report["failed"].as_u64()), (Some(1), Some(1)));
    assert_eq!(report["tests"][1]["name"], "fails <&> \"quoted\"");
    assert_eq!(report["tests"][1]["outcome"], "failed");
    assert!(report["tests"][1]["failures"][0].as_str().unwrap().contains("never"));
    let junit = Test::new().packs_dir(&packs).args(["test", "--format", "junit"]).run();
    let xml = junit.code(1).stdout().to_owned();
    // A real XML parser reads it, and the counts and names come back.
    let check = "import sys, xml.etree.ElementTree as E\n\
                 r = E.fromstring(sys.stdin.read())\n\
                 s = r.find('testsuite')\n\
                 cases = s.findall('testcase')\n\
                 print(r.get('tests'), r.get('failures'), s.get('name'), len(cases), cases[1].get('name'), cases[1].find('failure') is not None)";
    let mut child = std::process::Command::new("python3")
        .args(["-c", check])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(xml.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{xml}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2 1 say 2 fails <&> \"quoted\" True\n", "{xml}");
}

/// What the Jenkins xUnit plugin's `junit-10.xsd` (tests/fixtures/junit) declares for one
/// element: its attributes (name, required, type), the elements it may hold, and whether it
/// holds text.
#[derive(Default, Debug)]
struct Declared {
    attributes: Vec<(String, bool, String)>,
    children: Vec<String>,
    text: bool,
}

/// The schema's top-level elements, read from the vendored file itself.
fn junit_10() -> std::collections::HashMap<String, Declared> {
    use quick_xml::events::Event;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/junit/junit-10.xsd");
    let xsd = std::fs::read_to_string(path).unwrap();
    let mut reader = quick_xml::Reader::from_str(&xsd);
    let mut schema = std::collections::HashMap::<String, Declared>::new();
    let (mut current, mut depth) = (None::<String>, 0);
    loop {
        let (e, empty) = match reader.read_event().unwrap() {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                depth -= 1;
                if depth == 1 {
                    current = None;
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let attr = |key: &str| e.attributes().flatten().find(|a| a.key.as_ref() == key).map(|a| a.value.into_owned());
        match (depth, e.name().as_ref()) {
            (1, "xs:element") => {
                let name = attr("name").unwrap();
                schema.insert(name.clone(), Declared { text: attr("type").is_some(), ..Declared::default() });
                current = Some(name);
            }
            (1, _) => current = None,
            (_, tag) => {
                if let Some(declared) = current.as_ref().and_then(|c| schema.get_mut(c)) {
                    match tag {
                        "xs:complexType" => declared.text |= attr("mixed").as_deref() == Some("true"),
                        "xs:attribute" => declared.attributes.push((
                            attr("name").unwrap(),
                            attr("use").as_deref() == Some("required"),
                            attr("type").unwrap_or_default(),
                        )),
                        "xs:element" => declared.children.extend(attr("ref")),
                        _ => {}
                    }
                }
            }
        }
        if !empty {
            depth += 1;
        }
    }
    assert!(schema.contains_key("testsuites") && schema["testcase"].attributes.len() > 2, "{schema:?}");
    schema
}

/// Where `xml` breaks junit-10.xsd: an element it does not declare or not in its parent's
/// content, an attribute it does not declare, a required one missing, a time that is not a
/// number, text where none is taken.
fn junit_10_violations(xml: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let schema = junit_10();
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut stack, mut wrong) = (Vec::<String>::new(), Vec::new());
    loop {
        let (e, empty) = match reader.read_event().unwrap_or_else(|e| panic!("not XML ({e}): {xml}")) {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                stack.pop();
                continue;
            }
            Event::Text(t) if !t.as_ref().trim().is_empty() => {
                if !stack.last().is_some_and(|p| schema[p].text) {
                    wrong.push(format!("text in <{}>", stack.last().map_or("", String::as_str)));
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let name = e.name().as_ref().to_owned();
        let Some(declared) = schema.get(&name) else {
            wrong.push(format!("<{name}> is not in the schema"));
            stack.push(name);
            continue;
        };
        match stack.last() {
            None if name != "testsuites" => wrong.push(format!("the root is <{name}>, not <testsuites>")),
            Some(parent) if !schema[parent].children.contains(&name) => {
                wrong.push(format!("<{parent}> may not hold <{name}>"));
            }
            _ => {}
        }
        let given: Vec<(String, String)> =
            e.attributes().map(|a| a.unwrap()).map(|a| (a.key.as_ref().to_owned(), a.value.into_owned())).collect();
        for (key, value) in &given {
            match declared.attributes.iter().find(|(n, ..)| n == key) {
                None => wrong.push(format!("<{name}> has `{key}`, which the schema does not declare")),
                Some((.., kind))
                    if kind == "SUREFIRE_TIME" && !value.bytes().all(|b| b.is_ascii_digit() || b == b'.') =>
                {
                    wrong.push(format!("<{name} {key}=\"{value}\"> is not a time"));
                }
                _ => {}
            }
        }
        for (required, ..) in declared.attributes.iter().filter(|(_, required, _)| *required) {
            if !given.iter().any(|(k, _)| k == required) {
                wrong.push(format!("<{name}> lacks the required `{required}`"));
            }
        }
        if !empty {
            stack.push(name);
        }
    }
    wrong
}

#[test]
fn junit_output_follows_the_jenkins_junit_10_schema() {
    let packs = Packs::new()
        .manifest(
            "say",
            json!({"name": "say", "description": "Say it", "parameters": {"w": {"type": "string", "required": true}},
                "command": {"program": "echo", "args": ["{{w}}"]},
                "tests": [
                    {"name": "passes", "args": {"w": "ok"}, "expect": {"stdout_contains": "ok"}},
                    {"name": "fails <&>", "args": {"w": "a <b> & c"}, "expect": {"stdout_contains": "never", "exit_code": 3}}
                ]}),
        )
        .manifest(
            "other",
            json!({"name": "other", "description": "d", "command": "echo fine",
                "tests": [{"name": "fine", "expect": {"stdout_contains": "fine"}}]}),
        );
    let out = Test::new().packs_dir(&packs).args(["test", "--format", "junit"]).run();
    let xml = out.code(1).stdout().to_owned();
    assert!(xml.contains("<failure") && xml.contains("name=\"other\""), "{xml}");
    assert_eq!(junit_10_violations(&xml), Vec::<String>::new(), "{xml}");
    // The checker finds what the schema refuses.
    let bad =
        "<testsuites><testsuite name=\"t\" tests=\"1\"><testcase name=\"c\" file=\"f\"/></testsuite></testsuites>";
    assert_eq!(
        junit_10_violations(bad),
        [
            "<testsuite> lacks the required `failures`",
            "<testsuite> lacks the required `errors`",
            "<testcase> has `file`, which the schema does not declare"
        ]
    );
}

#[test]
fn finding_no_tools_says_where_packs_looked_and_how_to_add_one() {
    // The default search path, from a directory with no ./packs and a home with no pack
    // directories: stdout stays a listing (an empty one); the hint is on stderr.
    let home = tempfile::tempdir().unwrap();
    let out =
        Test::new().env("HOME", home.path()).env_remove("XDG_CONFIG_HOME").env_remove("PACKS_PATH").arg("list").run();
    out.success().stdout_eq("NAME  KIND  READ-ONLY  DESCRIPTION  SOURCE\n");
    let config = home.path().join(".config/packs");
    out.stderr_eq(&format!(
        "no tools found; packs looked for tools in the default search path:\n  ./packs (no such directory)\n  \
         {0}/tools (no such directory)\n  {0}/tools.d (no such directory)\nadd a tool with `packs new NAME \
         --program PROGRAM` (it writes packs/NAME.tool.json), or name a pack directory with `--packs DIR` or \
         PACKS_PATH\n",
        config.display()
    ));
    // A tool that is not there: the error, then where packs looked (here PACKS_PATH).
    let empty = tempfile::tempdir().unwrap();
    let out = Test::new().env("PACKS_PATH", empty.path()).args(["run", "greet"]).run();
    out.code(1);
    assert!(
        out.stderr.starts_with(&format!(
            "error: no tool named `greet`\npacks looked for tools in PACKS_PATH:\n  {}\nadd a tool with `packs new",
            empty.path().display()
        )),
        "{}",
        out.stderr
    );
    // -q keeps stderr quiet for a listing.
    Test::new()
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .args(["-q", "list"])
        .run()
        .success()
        .stderr_eq("");
}
