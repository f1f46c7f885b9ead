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

/// The index in `args` (the arguments after the program) of the first argument that is
/// an operand whatever its text; `args.len()` when there is none.
pub(crate) fn start(program: &str, args: &[Arg<'_>]) -> usize {
    let name = program_name(program);
    // Run directly or through a wrapper (`timeout 10 find`, `env find`, `xargs find`...):
    // if a `find` is anywhere in the command, `--` guards nothing.
    let honours_double_dash = !is_find(name) && !args.iter().any(|a| a.literal && is_find(program_name(a.text)));
    let shell = is_shell(name);
    let python = matches!(name, "python" | "python2" | "python3");
    let mut awaiting_script = false;
    for (i, a) in args.iter().enumerate() {
        if awaiting_script {
            // `sh -c -e 'script'`: options may still come before the script.
            if shell && a.text.starts_with('-') {
                continue;
            }
            return i + 1;
        }
        if !a.literal {
            continue;
        }
        if a.text == "--" && honours_double_dash {
            return i + 1;
        }
        if (shell && is_shell_script_flag(a.text)) || (python && a.text == "-c") {
            if python {
                // Python's `-c` ends its options: the next argument is the code.
                return (i + 2).min(args.len());
            }
            awaiting_script = true;
        }
    }
    args.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(program: &str, args: &[&str]) -> usize {
        let args: Vec<Arg<'_>> = args.iter().map(|t| Arg { text: t, literal: !t.contains("{{") }).collect();
        start(program, &args)
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
}
