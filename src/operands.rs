//! Where a program stops reading options. An argument after that point is an operand,
//! so a value there may start with `-`; before it, a value that starts with `-` would be
//! read as an option and is refused (argv rule 7). Options end:
//! - after a `--` the manifest wrote, for programs that honour it: `find` does not (it
//!   reads `-delete` after `--` as an expression), so when a `find` is in the command,
//!   run directly or through a wrapper (`timeout 10 find`), nothing ends them;
//! - after the script of a shell's `-c` (`sh -c SCRIPT NAME ARGS...`: the rest are the
//!   script's `$0`, `$1`...) and after the code of `python -c CODE` (the rest are
//!   `sys.argv`). What the script does with `$1` is the script's business: it should
//!   write `rm -- "$1"`.
//!
//! A wrapper (`env`, `nice`, `timeout`, `stdbuf`, `setsid`, `nohup`, `xargs`, `ionice`,
//! `flock`, `busybox`) runs another program: its own options, and its `--`, end where
//! that program's name is, and the rules above apply to the program it runs ([`resolve`]).
//! `env -- sort {{f}}`: the `--` is `env`'s, and `sort` still reads options.
//!
//! Run time applies this to the rendered argv and lint to the manifest's elements, so
//! both agree on which positions are guarded.

/// The program's name without its directory.
pub(crate) fn program_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// POSIX-style shells: `-c` (alone or among other letters, `-lc`) introduces the script.
pub(crate) fn is_shell(name: &str) -> bool {
    matches!(name, "sh" | "bash" | "zsh" | "dash" | "ksh" | "mksh" | "fish" | "ash")
}

/// A shell flag that introduces a script: `-c`, or letters including `c` (`-lc`, `-ec`).
pub(crate) fn is_shell_script_flag(arg: &str) -> bool {
    arg.len() > 1
        && arg.starts_with('-')
        && !arg.starts_with("--")
        && arg[1..].chars().all(|c| c.is_ascii_alphabetic())
        && arg.contains('c')
}

/// `find` and its kin read an argument starting with `-` as an expression even after `--`.
fn is_find(name: &str) -> bool {
    matches!(name, "find" | "gfind" | "bfs")
}

/// One argument: its text (rendered at run time; the template source for lint) and
/// whether the manifest wrote it as plain text.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arg<'a> {
    pub(crate) text: &'a str,
    pub(crate) literal: bool,
}

/// One argument as a program reads it: an argument of the command, or one word of the
/// string `env -S` splits (`at` is then the index of that string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub(crate) text: &'a str,
    pub(crate) literal: bool,
    /// The index of the argument it comes from (in the arguments after the program).
    pub(crate) at: usize,
}

/// What a command runs, past any wrappers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Runs<'a> {
    /// The program that reads the arguments `args` (the command's own program when it
    /// is no wrapper). `layers`: each program of the chain with the index of the first
    /// argument it reads, outermost first (`timeout 5 sort`: `timeout` from 0, `sort` from 2).
    Program { name: &'a str, args: Vec<Token<'a>>, layers: Vec<(&'a str, usize)> },
    /// A wrapper runs the program that the argument at `at` names, and the manifest did
    /// not write that argument as text: a value chooses the program.
    Chosen { wrapper: &'a str, at: usize },
    /// A wrapper whose further arguments packs cannot follow: no program after it
    /// (`xargs` alone runs `echo`, `ionice -p PID`, `flock FD`), or an `env -S` string
    /// with quotes, escapes or variables.
    Opaque { wrapper: &'a str },
}

/// A wrapper's own syntax: its options that take a value, the operands it reads before
/// the program's name, and what it does with the rest.
struct Wrapper {
    /// Short options that take a value (attached, `-n5`, or the next argument).
    short_values: &'static str,
    /// Long options that take a value (`--signal=KILL` or `--signal KILL`).
    long_values: &'static [&'static str],
    /// Options after which there is no program: the operands are the wrapper's own.
    no_program: &'static [&'static str],
    /// Operands before the program (`timeout DURATION`, `flock FILE`).
    operands: usize,
    /// `NAME=VALUE` operands before the program (`env`).
    assignments: bool,
}

fn wrapper(name: &str) -> Option<Wrapper> {
    let w = |short_values, long_values, operands| Wrapper {
        short_values,
        long_values,
        no_program: &[],
        operands,
        assignments: false,
    };
    Some(match name {
        "env" => Wrapper { assignments: true, ..w("uCS", &["--unset", "--chdir", "--split-string"], 0) },
        "nice" => w("n", &["--adjustment"], 0),
        "timeout" => w("ks", &["--kill-after", "--signal"], 1),
        "stdbuf" => w("ioe", &["--input", "--output", "--error"], 0),
        "setsid" | "nohup" => w("", &[], 0),
        "xargs" => w(
            "adEILnPs",
            &["--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"],
            0,
        ),
        "ionice" => Wrapper {
            no_program: &["-p", "-P", "-u", "--pid", "--pgid", "--uid"],
            ..w("cnpPu", &["--class", "--classdata", "--pid", "--pgid", "--uid"], 0)
        },
        "flock" => w("wE", &["--timeout", "--wait", "--conflict-exit-code"], 1),
        _ => return None,
    })
}

/// Where the program a wrapper runs is named.
enum Next {
    /// The token at this index names it.
    Program(usize),
    /// `flock FILE -c COMMAND`: the token at this index is the `-c` of a shell.
    Shell(usize),
    /// A token the manifest did not write names it.
    Chosen(usize),
    Opaque,
}

/// Characters that make `env -S` do more than split at spaces.
fn plain_split_string(s: &str) -> bool {
    !s.contains(['\'', '"', '\\', '$', '#'])
}

/// `env -S STRING` (or `-SSTRING`, `--split-string=STRING`): the option at `tokens[i]`
/// is replaced by the words of its string, which env then reads as arguments. Returns
/// where to read on.
fn split_string<'a>(tokens: &mut Vec<Token<'a>>, i: usize, attached: Option<&'a str>) -> Result<usize, Next> {
    let (value, end) = match attached {
        Some(v) => (tokens[i].with(v), i + 1),
        None => match tokens.get(i + 1) {
            Some(t) => (*t, i + 2),
            None => return Err(Next::Opaque),
        },
    };
    if !value.literal {
        return Err(Next::Chosen(i + 1));
    }
    if !plain_split_string(value.text) {
        return Err(Next::Opaque);
    }
    let words: Vec<Token<'a>> = value.text.split_whitespace().map(|w| value.with(w)).collect();
    tokens.splice(i..end, words);
    Ok(i)
}

impl<'a> Token<'a> {
    fn with(self, text: &'a str) -> Self {
        Self { text, ..self }
    }
}

/// Read a wrapper's own arguments, `tokens[from..]`, as the wrapper does (options until
/// the first operand or `--`, getopt's clustered short options); an `env -S` string is
/// split into the tokens in its place.
fn unwrap(name: &str, w: &Wrapper, tokens: &mut Vec<Token<'_>>, from: usize) -> Next {
    let mut i = from;
    while let Some(t) = tokens.get(i).copied() {
        let text = t.text;
        if !t.literal {
            if text.starts_with('-') {
                // A value: refused at run time whatever it is, since it comes before the
                // program's options end. Read as a flag.
                i += 1;
                continue;
            }
            break;
        }
        if text == "--" {
            i += 1;
            break;
        }
        if text == "-" && name == "env" {
            // `env -` is `env -i`.
            i += 1;
            continue;
        }
        if text.starts_with("--") {
            let (option, value) = match text.split_once('=') {
                Some((o, v)) => (o, Some(v)),
                None => (text, None),
            };
            if w.no_program.contains(&option) {
                return Next::Opaque;
            }
            if name == "env" && option == "--split-string" {
                match split_string(tokens, i, value) {
                    Ok(next) => i = next,
                    Err(next) => return next,
                }
                continue;
            }
            i += if value.is_none() && w.long_values.contains(&option) { 2 } else { 1 };
            continue;
        }
        if text.len() > 1 && text.starts_with('-') {
            let mut next = i + 1;
            for (pos, c) in text[1..].char_indices() {
                if w.no_program.iter().any(|o| o.len() == 2 && o.ends_with(c)) {
                    return Next::Opaque;
                }
                if w.short_values.contains(c) {
                    let rest = &text[1 + pos + c.len_utf8()..];
                    if name == "env" && c == 'S' {
                        match split_string(tokens, i, (!rest.is_empty()).then_some(rest)) {
                            Ok(n) => next = n,
                            Err(n) => return n,
                        }
                    } else if rest.is_empty() {
                        next = i + 2;
                    }
                    break;
                }
            }
            i = next;
            continue;
        }
        break;
    }
    if w.assignments {
        while tokens.get(i).is_some_and(|t| !t.text.starts_with('-') && t.text.contains('=')) {
            i += 1;
        }
    }
    i += w.operands;
    if name == "flock" {
        // `flock FILE -c COMMAND` runs COMMAND with `sh -c`; `flock FD` runs nothing.
        match tokens.get(i) {
            Some(t) if t.literal && matches!(t.text, "-c" | "--command") => return Next::Shell(i),
            None => return Next::Opaque,
            Some(_) => {}
        }
    }
    named_at(tokens, i)
}

/// The program named by `tokens[i]`, if any.
fn named_at(tokens: &[Token<'_>], i: usize) -> Next {
    match tokens.get(i) {
        None => Next::Opaque,
        Some(t) if !t.literal => Next::Chosen(i),
        Some(_) => Next::Program(i),
    }
}

/// Follow the wrappers of a command (`timeout 10 env -i sort -- {{f}}`) to the program
/// that reads the remaining arguments.
pub(crate) fn resolve<'a>(program: &'a str, args: &[Arg<'a>]) -> Runs<'a> {
    let mut tokens: Vec<Token<'a>> =
        args.iter().enumerate().map(|(at, a)| Token { text: a.text, literal: a.literal, at }).collect();
    let mut name = program_name(program);
    let mut from = 0;
    let mut layers = vec![(name, 0)];
    // Each round moves past at least one token, so this ends.
    loop {
        let next = if name == "busybox" {
            // `busybox APPLET ARGS...`; `busybox --list` runs nothing.
            match tokens.get(from) {
                Some(t) if t.text.starts_with('-') => Next::Opaque,
                _ => named_at(&tokens, from),
            }
        } else if let Some(w) = wrapper(name) {
            unwrap(name, &w, &mut tokens, from)
        } else {
            break;
        };
        match next {
            Next::Program(i) => {
                name = program_name(tokens[i].text);
                from = i + 1;
            }
            Next::Shell(i) => {
                name = "sh";
                from = i;
            }
            Next::Chosen(i) => return Runs::Chosen { wrapper: name, at: tokens[i].at },
            Next::Opaque => return Runs::Opaque { wrapper: name },
        }
        layers.push((name, tokens.get(from).map_or(args.len(), |t| t.at)));
    }
    Runs::Program { name, args: tokens.split_off(from), layers }
}

/// The index in `args` (the arguments after the program) of the first argument that is
/// an operand whatever its text; `args.len()` when there is none.
#[cfg(test)]
pub(crate) fn start(program: &str, args: &[Arg<'_>]) -> usize {
    options(program, args).end
}

/// Where a command's options end, and which program reads each argument before that.
pub(crate) struct Options<'a> {
    /// The index in `args` of the first argument that is an operand whatever its text;
    /// `args.len()` when there is none.
    pub(crate) end: usize,
    /// Each program of the chain with the index of the first argument it reads.
    layers: Vec<(&'a str, usize)>,
}

impl<'a> Options<'a> {
    /// The program that reads the argument at index `i` of `args` (a wrapper, or the
    /// program it runs).
    pub(crate) fn reader(&self, i: usize) -> &'a str {
        self.layers.iter().rev().find(|(_, from)| *from <= i).map_or("", |(name, _)| name)
    }
}

/// Where the options of `program args...` end, past any wrappers.
pub(crate) fn options<'a>(program: &'a str, args: &[Arg<'a>]) -> Options<'a> {
    match resolve(program, args) {
        Runs::Program { name, args: tokens, layers } => {
            let end = start_of(name, &tokens, args).and_then(|k| tokens.get(k)).map_or(args.len(), |t| t.at);
            Options { end, layers }
        }
        Runs::Chosen { .. } | Runs::Opaque { .. } => {
            Options { end: args.len(), layers: vec![(program_name(program), 0)] }
        }
    }
}

/// The index in `tokens` (what the program `name` reads) of the first operand.
fn start_of(name: &str, tokens: &[Token<'_>], args: &[Arg<'_>]) -> Option<usize> {
    // If a `find` is anywhere in the command (run through a wrapper packs does not know,
    // too), `--` guards nothing.
    let honours_double_dash = !is_find(name) && !args.iter().any(|a| a.literal && is_find(program_name(a.text)));
    let shell = is_shell(name);
    let python = matches!(name, "python" | "python2" | "python3");
    let mut awaiting_script = false;
    for (i, a) in tokens.iter().enumerate() {
        if awaiting_script {
            // `sh -c -e 'script'`: options may still come before the script.
            if shell && a.text.starts_with('-') {
                continue;
            }
            return Some(i + 1);
        }
        if !a.literal {
            continue;
        }
        if a.text == "--" && honours_double_dash {
            return Some(i + 1);
        }
        if (shell && is_shell_script_flag(a.text)) || (python && a.text == "-c") {
            if python {
                // Python's `-c` ends its options: the next argument is the code.
                return Some(i + 2);
            }
            awaiting_script = true;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The manifest's elements: a template is a value's, the rest plain text.
    fn arguments<'a>(texts: &[&'a str]) -> Vec<Arg<'a>> {
        texts.iter().map(|text| Arg { text, literal: !text.contains("{{") }).collect()
    }

    fn at(program: &str, args: &[&str]) -> usize {
        start(program, &arguments(args))
    }

    #[test]
    fn double_dash_ends_options_except_for_find() {
        assert_eq!(at("ls", &["-l", "{{p}}"]), 2);
        assert_eq!(at("/bin/ls", &["-l", "--", "{{p}}"]), 2);
        assert_eq!(at("find", &["--", "{{p}}"]), 2);
        assert_eq!(at("timeout", &["10", "find", "--", "{{p}}"]), 4);
        // A `--` a value rendered is not the manifest's.
        assert_eq!(at("ls", &["{{p}}", "{{q}}"]), 2);
    }

    #[test]
    fn a_shell_script_and_python_code_end_options() {
        assert_eq!(at("sh", &["-c", "echo \"$1\"", "sh", "{{v}}"]), 2);
        assert_eq!(at("bash", &["-lc", "x", "{{v}}"]), 2);
        assert_eq!(at("sh", &["-c", "-e", "x", "{{v}}"]), 3);
        assert_eq!(at("python3", &["-c", "import sys", "{{v}}"]), 2);
        assert_eq!(at("python3", &["-c"]), 1);
        assert_eq!(at("node", &["-e", "x", "{{v}}"]), 3);
        assert_eq!(at("sh", &["{{script}}"]), 1);
    }

    #[test]
    fn a_wrappers_double_dash_is_its_own() {
        // Each: the wrapped `sort` still reads options, so nothing ends them.
        for (program, args) in [
            ("env", &["--", "sort", "{{f}}"][..]),
            ("env", &["-i", "A=1", "sort", "{{f}}"]),
            ("env", &["-u", "--", "sort", "{{f}}"]),
            ("env", &["-uX", "--", "sort", "{{f}}"]),
            ("env", &["-S", "-i sort", "{{f}}"]),
            ("nice", &["-n", "5", "--", "sort", "{{f}}"]),
            ("timeout", &["--", "10", "sort", "{{f}}"]),
            ("timeout", &["-s", "KILL", "10", "sort", "{{f}}"]),
            ("stdbuf", &["-oL", "--", "sort", "{{f}}"]),
            ("setsid", &["-w", "--", "sort", "{{f}}"]),
            ("nohup", &["--", "sort", "{{f}}"]),
            ("xargs", &["-0", "-n", "1", "--", "sort", "{{f}}"]),
            ("ionice", &["-c", "3", "--", "sort", "{{f}}"]),
            ("flock", &["-w", "5", "--", "/tmp/lock", "sort", "{{f}}"]),
            ("busybox", &["sort", "{{f}}"]),
            ("timeout", &["5", "env", "--", "nice", "sort", "{{f}}"]),
        ] {
            assert_eq!(at(program, args), args.len(), "{program} {args:?}");
        }
    }

    #[test]
    fn the_wrapped_programs_double_dash_ends_its_options() {
        assert_eq!(at("env", &["--", "sort", "--", "{{f}}"]), 3);
        assert_eq!(at("env", &["-S", "sort --", "{{f}}"]), 2);
        assert_eq!(at("env", &["--split-string=sort -r --", "{{f}}"]), 1);
        assert_eq!(at("timeout", &["-k", "1", "10", "sort", "--", "{{f}}"]), 5);
        assert_eq!(at("flock", &["/tmp/l", "-c", "echo \"$1\"", "{{f}}"]), 3);
        assert_eq!(at("busybox", &["sh", "-c", "x", "{{f}}"]), 3);
        assert_eq!(at("xargs", &["-I{}", "sort", "--", "{}"]), 3);
    }

    #[test]
    fn a_program_named_by_a_value_or_no_program_guards_everything() {
        assert_eq!(at("env", &["{{p}}", "--", "{{f}}"]), 3);
        assert_eq!(at("env", &["-S", "{{s}}", "{{f}}"]), 3);
        assert_eq!(at("env", &["-S", "sort '--'", "{{f}}"]), 3);
        assert_eq!(at("ionice", &["-p", "--", "{{f}}"]), 3);
        assert_eq!(at("xargs", &["--"]), 1);
        let args = [Arg { text: "{{p}}", literal: false }, Arg { text: "x", literal: true }];
        assert_eq!(resolve("nice", &args), Runs::Chosen { wrapper: "nice", at: 0 });
        let runs = resolve("nice", &[Arg { text: "sort", literal: true }]);
        assert_eq!(runs, Runs::Program { name: "sort", args: vec![], layers: vec![("nice", 0), ("sort", 1)] });
    }

    #[test]
    fn only_a_shells_c_ends_options() {
        // `grep -c` counts: the pattern and the file are still read as options.
        assert_eq!(at("grep", &["-c", "{{pattern}}", "{{file}}"]), 3);
        // A shell's other flags (`-x`, `-e`) start no script: the file after them is the
        // script, and what follows it may still be read as options.
        assert_eq!(at("bash", &["-x", "script.sh", "{{v}}"]), 3);
        assert_eq!(at("sh", &["-e", "script.sh", "{{v}}"]), 3);
        assert_eq!(at("bash", &["--rcfile", "rc", "script.sh", "{{v}}"]), 4);
    }

    #[test]
    fn a_find_run_through_a_program_packs_does_not_know_still_ignores_double_dash() {
        assert_eq!(at("strace", &["-f", "find", "--", "{{p}}"]), 4);
        assert_eq!(at("chroot", &["/srv", "/usr/bin/find", ".", "--", "{{p}}"]), 5);
    }

    #[test]
    fn a_wrappers_own_syntax_does_not_hide_the_double_dash_of_the_program_it_runs() {
        // In each, `sort` reads `{{f}}`, and the `--` before it is a wrapper's.
        for (program, args) in [
            // `env`'s assignments, and `env -` (`env -i`), before another wrapper.
            ("env", &["A=1", "timeout", "--", "10", "sort", "{{f}}"][..]),
            ("env", &["-", "nice", "--", "sort", "{{f}}"]),
            // A `--` ends one wrapper's options only.
            ("nice", &["--", "env", "--", "sort", "{{f}}"]),
            // The value of `-n`, clustered after another flag.
            ("xargs", &["-0n", "1", "--", "sort", "{{f}}"]),
            // `flock FILE PROGRAM` runs the program, not a shell.
            ("flock", &["/tmp/lock", "env", "--", "sort", "{{f}}"]),
            // A `"--"` inside one quoted word of `env -S`.
            ("env", &["-S", "sort \"a -- b\"", "{{f}}"]),
            // Long options, with their values attached or not.
            ("timeout", &["--signal", "KILL", "10", "env", "--", "sort", "{{f}}"]),
            ("timeout", &["--foreground", "10", "env", "--", "sort", "{{f}}"]),
            ("timeout", &["--kill-after=5", "10", "env", "--", "sort", "{{f}}"]),
            // A value written into a wrapper's option: read as that option.
            ("nice", &["-n{{n}}", "env", "--", "sort", "{{f}}"]),
        ] {
            assert_eq!(at(program, args), args.len(), "{program} {args:?}");
        }
        // And where the wrapped program's own `--` is, past the same syntax.
        assert_eq!(at("env", &["--chdir", "{{dir}}", "sort", "--", "{{f}}"]), 4);
        assert_eq!(at("env", &["-u", "{{var}}", "sort", "--", "{{f}}"]), 4);
        assert_eq!(at("ionice", &["-c", "3", "sort", "--", "{{f}}"]), 4);
        // A lone `-` is an operand, not a flag: here flock's lock file.
        assert_eq!(at("flock", &["-", "sort", "--", "{{f}}"]), 3);
        assert_eq!(at("env", &["A=1", "sh", "-c", "sort -- \"$1\"", "sh", "{{f}}"]), 4);
        assert_eq!(at("timeout", &["--signal=KILL", "10", "sort", "--", "{{f}}"]), 4);
    }

    #[test]
    fn a_wrapper_that_runs_no_program_guards_everything() {
        // `ionice -p PID...` and `busybox --install` run nothing: a `--` after them ends nothing.
        assert_eq!(at("ionice", &["-p", "1", "sort", "--", "{{f}}"]), 5);
        assert_eq!(at("ionice", &["--pid", "1", "sort", "--", "{{f}}"]), 5);
        assert_eq!(at("busybox", &["--install", "--", "{{f}}"]), 3);
    }

    #[test]
    fn the_argument_that_chooses_the_program_is_named() {
        let runs = |program, texts: &[&'static str]| resolve(program, &arguments(texts));
        assert_eq!(runs("env", &["-i", "-S", "{{s}}", "x"]), Runs::Chosen { wrapper: "env", at: 2 });
        assert_eq!(runs("timeout", &["5", "{{p}}"]), Runs::Chosen { wrapper: "timeout", at: 1 });
    }

    #[test]
    fn each_argument_before_the_options_end_is_read_by_the_program_of_its_layer() {
        let args = arguments(&["-s", "{{sig}}", "5", "nice", "sort", "{{f}}"]);
        let o = options("timeout", &args);
        assert_eq!(o.end, 6);
        let readers: Vec<&str> = (0..args.len()).map(|i| o.reader(i)).collect();
        assert_eq!(readers, ["timeout", "timeout", "timeout", "timeout", "nice", "sort"]);
    }
}
