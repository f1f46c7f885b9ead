//! Executed documentation: every `console` example in README.md and docs/*.md
//! runs here, so an example whose output changed fails the suite with a diff.
//!
//! One `#[test]` per page. Each page runs in a fresh scratch directory that
//! starts with copies of the checkout's `packs/`, `agents/` and `src/`; its
//! blocks run in order, state carrying over, as a reader following the page
//! would.
//!
//! The format, in the markdown:
//!
//! - A fenced block whose info string is `console` is executed. A line
//!   starting with `$ ` is a command; it may continue on the lines right after
//!   it that start with `> ` (or are exactly `>`), joined with newlines, so
//!   heredocs and multi-line JSON work. The lines after a command, up to the
//!   next `$ ` line or the end of the block, are its expected output: stdout
//!   and stderr combined (the command runs as `bash -c CMD` with both on one
//!   pipe). A command that exits non-zero ends its expected output with a line
//!   `? N`; a command without one must exit 0.
//! - Matching: `[..]` matches any text within one line; a line that is exactly
//!   `...` matches any number of lines (zero or more). Nothing else is
//!   normalized: use `[..]` for what depends on the machine (durations, sizes,
//!   absolute temp paths), never more.
//! - A fenced block (any language) right after a line `<!-- file: PATH -->`
//!   is written to PATH (relative to the scratch directory, parents created)
//!   when the page reaches it.
//! - An HTML comment `<!-- setup` ... `-->` is a hidden set-up step: its lines
//!   run as one bash script (`set -e`), silently; it failing fails the test.
//! - A `console` block right after `<!-- skip: REASON -->` is not run (a server
//!   that waits, the network beyond loopback, a TTY, a program the test
//!   machine does not have: `needs PROGRAM`). Keep skips rare.
//!
//! Commands run with the scratch directory as their working directory, a
//! directory holding `packs` (the binary under test) first on `PATH`, `HOME`
//! an empty directory inside the scratch directory, `NO_COLOR=1`, `TZ=UTC`,
//! `LANG=C.UTF-8`, no standard input, and no other variables.
//!
//! Bless mode: `PACKS_DOCS=overwrite cargo test --test lib docs` rewrites each
//! command's expected output with what ran, keeping an expected line that has
//! `[..]` where it still matches (a `...` line is kept only while the whole
//! output still matches). Review the rewritten pages with `git diff`.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{PACKS, REPO};

/// How long one command may run before its process group is killed.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// The pages, one test each; `every_page_has_a_test` keeps the list complete.
const PAGES: &[&str] = &[
    "README.md",
    "docs/ARCHITECTURE.md",
    "docs/DEPLOY.md",
    "docs/DISPATCH.md",
    "docs/FORMATS.md",
    "docs/FRONTENDS.md",
    "docs/LIBRARY.md",
    "docs/LINT.md",
    "docs/LOCK.md",
    "docs/MANIFEST.md",
    "docs/MIGRATING.md",
    "docs/PERFORMANCE.md",
    "docs/SANDBOX.md",
    "docs/TOOL_INTERFACE.md",
];

macro_rules! page_tests {
    ($($name:ident => $page:literal $(, ignore = $reason:literal)?;)*) => {
        $(
            #[test]
            $(#[ignore = $reason])?
            fn $name() {
                run_page($page);
            }
        )*
    };
}

// Every page runs: a page may be marked `ignore = "needs PROGRAM"` only for a program
// beyond the Rust toolchain, git, curl and python3 (.ci/run runs those too).
page_tests! {
    readme => "README.md";
    architecture => "docs/ARCHITECTURE.md";
    deploy => "docs/DEPLOY.md";
    dispatch => "docs/DISPATCH.md";
    formats => "docs/FORMATS.md";
    frontends => "docs/FRONTENDS.md";
    library => "docs/LIBRARY.md";
    lint => "docs/LINT.md";
    lock => "docs/LOCK.md";
    manifest => "docs/MANIFEST.md";
    migrating => "docs/MIGRATING.md";
    performance => "docs/PERFORMANCE.md";
    sandbox => "docs/SANDBOX.md";
    tool_interface => "docs/TOOL_INTERFACE.md";
}

#[test]
fn every_page_has_a_test() {
    let mut found = vec!["README.md".to_owned()];
    for entry in std::fs::read_dir(Path::new(REPO).join("docs")).expect("read docs/") {
        let name = entry.expect("a docs/ entry").file_name().into_string().expect("a UTF-8 name");
        if name.ends_with(".md") {
            found.push(format!("docs/{name}"));
        }
    }
    found.sort();
    let mut listed: Vec<String> = PAGES.iter().map(|p| (*p).to_owned()).collect();
    listed.sort();
    assert_eq!(found, listed, "every markdown page needs an entry in PAGES and page_tests! (tests/suite/docs.rs)");
}

/// One step of a page, in page order.
#[derive(Debug, PartialEq)]
enum Step {
    /// A `<!-- file: PATH -->` block: write `contents` to `path`.
    File { line: usize, path: String, contents: String },
    /// A `<!-- setup ... -->` comment.
    Setup { line: usize, script: String },
    /// A command of a `console` block.
    Command(Example),
}

/// One `$ ` command and what it should print.
#[derive(Debug, PartialEq)]
struct Example {
    /// The 1-based line of the `$ ` in the page.
    line: usize,
    /// The command, continuation lines joined with newlines.
    command: String,
    /// The expected output lines, without the `? N` line.
    expected: Vec<String>,
    /// The expected exit status.
    status: i32,
    /// The 0-based page lines holding the expected output (and `? N`).
    output_lines: std::ops::Range<usize>,
    /// The indentation of the block, restored when blessing.
    indent: String,
}

/// Splits a page into its steps, or says which line is malformed.
fn parse(page: &str) -> Result<Vec<Step>, String> {
    let lines: Vec<&str> = page.lines().collect();
    let mut steps = Vec::new();
    let mut file: Option<(usize, String)> = None;
    let mut skip = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        if let Some(path) = trimmed.strip_prefix("<!-- file:").and_then(|r| r.strip_suffix("-->")) {
            let path = path.trim();
            if path.is_empty() || path.starts_with('/') || path.split('/').any(|s| s == "..") {
                return Err(format!(
                    "line {}: a file marker needs a relative path inside the scratch directory",
                    i + 1
                ));
            }
            file = Some((i + 1, path.to_owned()));
            i += 1;
            continue;
        }
        if let Some(reason) = trimmed.strip_prefix("<!-- skip:").and_then(|r| r.strip_suffix("-->")) {
            if reason.trim().is_empty() {
                return Err(format!("line {}: a skip marker needs a reason", i + 1));
            }
            skip = true;
            i += 1;
            continue;
        }
        if trimmed == "<!-- setup" {
            let start = i + 1;
            let end = (start..lines.len())
                .find(|&j| lines[j].trim() == "-->")
                .ok_or_else(|| format!("line {start}: a setup comment without its closing `-->`"))?;
            steps.push(Step::Setup { line: start, script: lines[start..end].join("\n") });
            i = end + 1;
            continue;
        }
        if let Some((indent, fence, info)) = fence_open(line) {
            let start = i + 1;
            let end = (start..lines.len())
                .find(|&j| fence_closes(lines[j], &fence))
                .ok_or_else(|| format!("line {}: a fenced block without its closing fence", i + 1))?;
            let body: Vec<&str> =
                lines[start..end].iter().map(|l| l.strip_prefix(indent.as_str()).unwrap_or(l.trim_start())).collect();
            if let Some((line, path)) = file.take() {
                let mut contents = body.join("\n");
                contents.push('\n');
                steps.push(Step::File { line, path, contents });
            } else if info == "console" && !std::mem::take(&mut skip) {
                console(&body, start, &indent, &mut steps)?;
            }
            skip = false;
            i = end + 1;
            continue;
        }
        if !trimmed.is_empty() {
            if let Some((line, _)) = file {
                return Err(format!("line {line}: a file marker must be followed by a fenced block"));
            }
            if skip {
                return Err(format!("line {i}: a skip marker must be followed by a console block"));
            }
        }
        i += 1;
    }
    if let Some((line, _)) = file {
        return Err(format!("line {line}: a file marker must be followed by a fenced block"));
    }
    Ok(steps)
}

/// A fence opening: its indentation, its fence (``` or ~~~, any length) and info string.
fn fence_open(line: &str) -> Option<(String, String, String)> {
    let rest = line.trim_start_matches(' ');
    let indent = &line[..line.len() - rest.len()];
    let ch = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let fence: String = rest.chars().take_while(|c| *c == ch).collect();
    if fence.len() < 3 {
        return None;
    }
    let info = rest[fence.len()..].trim().to_owned();
    if ch == '`' && info.contains('`') {
        return None;
    }
    Some((indent.to_owned(), fence, info))
}

fn fence_closes(line: &str, fence: &str) -> bool {
    let rest = line.trim();
    let ch = fence.chars().next().unwrap_or('`');
    rest.len() >= fence.len() && rest.chars().all(|c| c == ch)
}

/// The commands of one `console` block whose first body line is page line `start` (0-based).
fn console(body: &[&str], start: usize, indent: &str, steps: &mut Vec<Step>) -> Result<(), String> {
    let mut j = 0;
    while j < body.len() {
        let line = body[j];
        let Some(first) = line.strip_prefix("$ ") else {
            return Err(format!("line {}: a console block's output must follow a `$ ` command", start + j + 1));
        };
        let command_line = start + j + 1;
        let mut command = first.to_owned();
        j += 1;
        while j < body.len() {
            let continued = match body[j] {
                ">" => "",
                l => match l.strip_prefix("> ") {
                    Some(rest) => rest,
                    None => break,
                },
            };
            command.push('\n');
            command.push_str(continued);
            j += 1;
        }
        let out_start = j;
        while j < body.len() && !body[j].starts_with("$ ") {
            j += 1;
        }
        let mut expected: Vec<String> = body[out_start..j].iter().map(|l| (*l).to_owned()).collect();
        let mut status = 0;
        if let Some(code) = expected.last().and_then(|l| l.strip_prefix("? ")) {
            status = code.parse().map_err(|_| format!("line {}: `? N` needs a number, not {code:?}", start + j))?;
            if status == 0 {
                return Err(format!("line {}: `? 0` is left out: a command without `? N` must exit 0", start + j));
            }
            expected.pop();
        }
        steps.push(Step::Command(Example {
            line: command_line,
            command,
            expected,
            status,
            output_lines: start + out_start..start + j,
            indent: indent.to_owned(),
        }));
    }
    Ok(())
}

/// Whether `actual` matches the `expected` lines (`[..]` within a line, `...` for lines).
fn matches(expected: &[String], actual: &[&str]) -> bool {
    // reach[i][j]: expected[..i] matches actual[..j].
    let (n, m) = (expected.len(), actual.len());
    let mut reach = vec![vec![false; m + 1]; n + 1];
    reach[0][0] = true;
    for i in 0..n {
        let dots = expected[i] == "...";
        for j in 0..=m {
            if !reach[i][j] {
                continue;
            }
            if dots {
                for r in &mut reach[i + 1][j..] {
                    *r = true;
                }
                break;
            }
            if j < m && line_matches(&expected[i], actual[j]) {
                reach[i + 1][j + 1] = true;
            }
        }
    }
    reach[n][m]
}

/// Whether one actual line matches one expected line, `[..]` matching any text.
fn line_matches(expected: &str, actual: &str) -> bool {
    let mut parts = expected.split("[..]");
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The expected lines to write for `actual`: an expected line is kept where it
/// matches the actual line it aligns with (so `[..]` survives), the actual line otherwise.
fn bless(expected: &[String], actual: &[&str]) -> Vec<String> {
    if matches(expected, actual) {
        return expected.to_vec();
    }
    let expected: Vec<&String> = expected.iter().filter(|l| *l != "...").collect();
    let (n, m) = (expected.len(), actual.len());
    // Longest common subsequence under line_matches.
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if line_matches(expected[i], actual[j]) {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while j < m {
        if i < n && line_matches(expected[i], actual[j]) && lcs[i][j] == lcs[i + 1][j + 1] + 1 {
            out.push(expected[i].clone());
            i += 1;
            j += 1;
        } else if i < n && lcs[i + 1][j] >= lcs[i][j + 1] {
            i += 1;
        } else {
            out.push(actual[j].to_owned());
            j += 1;
        }
    }
    out
}

/// The scratch directory of one page, removed when dropped.
struct Scratch {
    root: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        let root = tempfile::Builder::new().prefix("packs-docs-").tempdir().expect("create a temp dir");
        let work = root.path().join("work");
        let bin = root.path().join("bin");
        std::fs::create_dir_all(work.join("home")).expect("create the scratch home");
        std::fs::create_dir_all(&bin).expect("create the scratch bin");
        std::os::unix::fs::symlink(PACKS, bin.join("packs")).expect("link packs into the scratch bin");
        for dir in ["packs", "agents", "src"] {
            let status =
                Command::new("cp").arg("-a").arg(Path::new(REPO).join(dir)).arg(&work).status().expect("run cp");
            assert!(status.success(), "copying {dir}/ into the scratch directory failed");
        }
        Self { root }
    }

    fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }

    /// Runs `script` with bash; returns its combined output and exit status.
    fn run(&self, script: &str) -> (String, i32) {
        let path = format!(
            "{}:{}",
            self.root.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_owned())
        );
        let (mut reader, writer) = std::io::pipe().expect("create a pipe");
        let mut command = Command::new("bash");
        command
            .arg("-c")
            .arg(script)
            .current_dir(self.work())
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.work().join("home"))
            .env("NO_COLOR", "1")
            .env("TZ", "UTC")
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null())
            .stdout(writer.try_clone().expect("clone the pipe"))
            .stderr(writer)
            .process_group(0);
        let mut child = command.spawn().expect("spawn bash");
        drop(command);
        let (send, receive) = mpsc::channel();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = reader.read_to_end(&mut bytes);
            let _ = send.send(bytes);
        });
        let kill = |pid: u32| {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status();
        };
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for bash") {
                break status;
            }
            if Instant::now() > deadline {
                kill(child.id());
                let _ = child.wait();
                panic!("`{script}` ran for over {COMMAND_TIMEOUT:?}: killed");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        // A background process still holding the pipe gets a moment, then is ended.
        let bytes = receive.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| {
            kill(child.id());
            receive.recv().unwrap_or_default()
        });
        let code =
            status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0));
        (String::from_utf8_lossy(&bytes).into_owned(), code)
    }
}

/// Runs every step of `rel` (relative to the repository) and fails with every mismatch.
fn run_page(rel: &str) {
    let overwrite = std::env::var("PACKS_DOCS").is_ok_and(|v| v == "overwrite");
    if let Err(failures) = check_page(rel, &Path::new(REPO).join(rel), overwrite) {
        panic!("{failures}");
    }
}

/// Runs every step of the page at `path` (named `rel` in messages); with `overwrite`,
/// rewrites the expected output that no longer matches instead of failing.
fn check_page(rel: &str, path: &Path, overwrite: bool) -> Result<(), String> {
    let page = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {rel}: {e}"));
    let steps = parse(&page).map_err(|e| format!("{rel}:{e}"))?;
    let scratch = Scratch::new();
    let mut failures = Vec::new();
    let mut rewrites: BTreeMap<usize, (std::ops::Range<usize>, Vec<String>)> = BTreeMap::new();
    for step in steps {
        match step {
            Step::File { line, path, contents } => {
                let target = scratch.work().join(&path);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)
                        .unwrap_or_else(|e| panic!("{rel}:{line}: create {path}'s directory: {e}"));
                }
                std::fs::write(&target, contents).unwrap_or_else(|e| panic!("{rel}:{line}: write {path}: {e}"));
            }
            Step::Setup { line, script } => {
                let (output, code) = scratch.run(&format!("set -e\n{script}"));
                assert_eq!(code, 0, "{rel}:{line}: the setup step failed (exit {code}):\n{output}");
            }
            Step::Command(example) => {
                let (output, code) = scratch.run(&example.command);
                let actual: Vec<&str> = output.strip_suffix('\n').unwrap_or(&output).split('\n').collect();
                let actual: &[&str] = if output.is_empty() { &[] } else { &actual };
                if matches(&example.expected, actual) && code == example.status {
                    continue;
                }
                if overwrite {
                    let mut lines: Vec<String> = bless(&example.expected, actual)
                        .into_iter()
                        .map(|l| format!("{}{l}", example.indent))
                        .collect();
                    if code != 0 {
                        lines.push(format!("{}? {code}", example.indent));
                    }
                    rewrites.insert(example.output_lines.start, (example.output_lines.clone(), lines));
                    continue;
                }
                let mut want = example.expected.join("\n");
                let mut got = actual.join("\n");
                if example.status != 0 {
                    want.push_str(&format!("\n? {}", example.status));
                }
                if code != 0 {
                    got.push_str(&format!("\n? {code}"));
                }
                let diff = similar::TextDiff::from_lines(&format!("{want}\n"), &format!("{got}\n"))
                    .unified_diff()
                    .context_radius(3)
                    .header("expected", "actual")
                    .to_string();
                failures.push(format!("{rel}:{}: `{}` printed other output\n{diff}", example.line, example.command));
            }
        }
    }
    if overwrite && !rewrites.is_empty() {
        let mut lines: Vec<String> = page.lines().map(str::to_owned).collect();
        for (range, new) in rewrites.into_values().rev() {
            lines.splice(range, new);
        }
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(path, text).unwrap_or_else(|e| panic!("write {rel}: {e}"));
        eprintln!("{rel}: expected output rewritten; review it with git diff");
    }
    if failures.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} example(s) of {rel} printed other output (bless with PACKS_DOCS=overwrite cargo test --test lib docs):\n\n{}",
        failures.len(),
        failures.join("\n")
    ))
}

#[test]
fn parse_reads_commands_continuations_status_files_setup_and_skips() {
    let page = "\
Text.

<!-- file: a/b.txt -->
```json
{\"x\": 1}
```

<!-- setup
touch hidden
-->

```console
$ cat <<EOF
> one
>
> EOF
one

$ false
? 1
```

<!-- skip: needs a TTY -->
```console
$ tty
```
";
    let steps = parse(page).expect("parse");
    assert_eq!(steps.len(), 4, "{steps:#?}");
    assert_eq!(steps[0], Step::File { line: 3, path: "a/b.txt".into(), contents: "{\"x\": 1}\n".into() });
    assert_eq!(steps[1], Step::Setup { line: 8, script: "touch hidden".into() });
    let Step::Command(first) = &steps[2] else { panic!("{:?}", steps[2]) };
    assert_eq!((first.line, first.command.as_str(), first.status), (13, "cat <<EOF\none\n\nEOF", 0));
    assert_eq!(first.expected, ["one", ""]);
    let Step::Command(second) = &steps[3] else { panic!("{:?}", steps[3]) };
    assert_eq!((second.line, second.command.as_str(), second.status), (19, "false", 1));
    assert!(second.expected.is_empty());
}

#[test]
fn parse_refuses_malformed_markers() {
    assert!(parse("<!-- file: /etc/passwd -->\n```\nx\n```\n").unwrap_err().contains("relative path"));
    assert!(parse("<!-- file: a -->\ntext\n").unwrap_err().contains("followed by a fenced block"));
    assert!(parse("<!-- skip: -->\n```console\n$ x\n```\n").unwrap_err().contains("needs a reason"));
    assert!(parse("```console\noutput first\n```\n").unwrap_err().contains("must follow a `$ ` command"));
    assert!(parse("```console\n$ true\n? 0\n```\n").unwrap_err().contains("? 0"));
    assert!(parse("<!-- setup\ntrue\n").unwrap_err().contains("closing"));
}

#[test]
fn matching_is_exact_but_for_wildcards() {
    let exp = |lines: &[&str]| lines.iter().map(|l| (*l).to_owned()).collect::<Vec<_>>();
    assert!(matches(&exp(&["a", "b"]), &["a", "b"]));
    assert!(!matches(&exp(&["a", "b"]), &["a", "c"]));
    assert!(!matches(&exp(&["a"]), &["a", "b"]));
    assert!(!matches(&exp(&["a "]), &["a"]));
    assert!(matches(&exp(&["took [..] ms"]), &["took 12 ms"]));
    assert!(!matches(&exp(&["took [..] ms"]), &["took 12 s"]));
    assert!(matches(&exp(&["[..]x[..]y"]), &["axbxy"]));
    assert!(!matches(&exp(&["[..]"]), &["a", "b"]));
    assert!(matches(&exp(&["a", "...", "z"]), &["a", "z"]));
    assert!(matches(&exp(&["a", "...", "z"]), &["a", "b", "c", "z"]));
    assert!(!matches(&exp(&["a", "...", "z"]), &["a", "b", "c"]));
    assert!(matches(&exp(&["..."]), &[]));
}

#[test]
fn bless_keeps_wildcards_that_still_match() {
    let exp: Vec<String> = ["start", "took [..] ms", "old"].iter().map(|l| (*l).to_owned()).collect();
    assert_eq!(bless(&exp, &["start", "took 3 ms", "new", "more"]), ["start", "took [..] ms", "new", "more"]);
}

#[test]
fn a_changed_expected_line_fails_with_a_diff_and_overwrite_fixes_it() {
    let dir = tempfile::tempdir().expect("create a temp dir");
    let page = dir.path().join("PAGE.md");
    let good = "\
<!-- file: note.txt -->
```text
hello
```

```console
$ cat note.txt
hello
$ packs list --help | head -n 1
List the tools[..]
$ cat missing
cat: missing: No such file or directory
? 1
```
";
    std::fs::write(&page, good).expect("write the page");
    check_page("PAGE.md", &page, false).expect("the page as written passes");

    let changed = good.replace("$ cat note.txt\nhello", "$ cat note.txt\nhullo");
    std::fs::write(&page, &changed).expect("write the page");
    let error = check_page("PAGE.md", &page, false).expect_err("a changed line fails");
    assert!(error.contains("PAGE.md:7: `cat note.txt` printed other output"), "{error}");
    assert!(error.contains("-hullo\n+hello\n"), "{error}");

    let changed = good.replace("? 1", "? 2");
    std::fs::write(&page, &changed).expect("write the page");
    let error = check_page("PAGE.md", &page, false).expect_err("a changed status fails");
    assert!(error.contains("-? 2\n+? 1\n"), "{error}");

    let changed = good.replace("$ cat note.txt\nhello", "$ cat note.txt\nhullo\nmore");
    std::fs::write(&page, &changed).expect("write the page");
    check_page("PAGE.md", &page, true).expect("overwrite passes");
    assert_eq!(
        std::fs::read_to_string(&page).expect("read the page"),
        good,
        "overwrite restores what ran, keeping [..]"
    );
}

#[test]
fn commands_get_the_documented_environment() {
    let scratch = Scratch::new();
    let (env, _) = scratch.run("env | sort | grep -v '^_=\\|^PWD=\\|^SHLVL=\\|^OLDPWD='");
    let names: Vec<&str> = env.lines().map(|l| l.split('=').next().unwrap_or("")).collect();
    assert_eq!(names, ["HOME", "LANG", "NO_COLOR", "PATH", "TZ"], "{env}");
    let (listing, _) = scratch.run("command -v packs; ls; ls -A home; echo out; echo err >&2; echo out2");
    let bin = scratch.root.path().join("bin/packs");
    assert_eq!(listing, format!("{}\nagents\nhome\npacks\nsrc\nout\nerr\nout2\n", bin.display()));
}
