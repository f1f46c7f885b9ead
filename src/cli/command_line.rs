//! How argv becomes a [`Cli`]: with clap's tree narrowed to the one command argv names.
//!
//! clap copies each global option (15 of them) into every command when it builds the tree
//! it parses with: 270 option copies for 18 commands of which one runs, a tenth of a one-shot
//! `packs run`'s page faults and 0.15 ms of its CPU. When argv names a command exactly (after
//! global options whose values are skipped as clap would), the tree is built with that
//! command alone. It is a shortcut, never a second parser: anything the narrowed tree does
//! not accept (an error, `--help`, `--version`, an option this scan does not know) is
//! parsed again with the whole tree, so every message, suggestion and help text is the
//! whole tree's; and a parse the narrowed tree accepts is the one the whole tree gives,
//! because clap picks a command by its exact name or alias at the first word that is
//! neither an option nor an option's value, and the scan picks that same word.

use std::cell::RefCell;
use std::ffi::OsString;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Subcommand};

use super::{Cli, ColorWhen, Command};

/// The command of [`Cli`]: clap's tree holds every command, or only the one put in [`ONLY`].
#[derive(Debug)]
pub(super) struct Commands(pub(super) Command);

thread_local! {
    /// The one command the next [`Cli::command`] of this thread adds (taken by it).
    static ONLY: RefCell<Option<clap::Command>> = const { RefCell::new(None) };
}

impl FromArgMatches for Commands {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Command::from_arg_matches(matches).map(Self)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.0.update_from_arg_matches(matches)
    }
}

impl Subcommand for Commands {
    fn augment_subcommands(cmd: clap::Command) -> clap::Command {
        match ONLY.with(|only| only.borrow_mut().take()) {
            Some(one) => cmd.subcommand(one),
            None => Command::augment_subcommands(cmd),
        }
    }

    fn augment_subcommands_for_update(cmd: clap::Command) -> clap::Command {
        Command::augment_subcommands_for_update(cmd)
    }

    fn has_subcommand(name: &str) -> bool {
        Command::has_subcommand(name)
    }
}

/// Parse `args` (argv, the program's name first) into the command line and clap's matches.
pub(super) fn parse(args: Vec<OsString>) -> Result<(Cli, ArgMatches), clap::Error> {
    let color = ColorWhen::from_args().clap();
    let parse = |cmd: clap::Command, args: &[OsString]| {
        cmd.color(color).try_get_matches_from(args).and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)))
    };
    if let Some(one) = named(&Cli::command(), &args) {
        ONLY.with(|only| *only.borrow_mut() = Some(one));
        let narrowed = Cli::command();
        ONLY.with(|only| only.borrow_mut().take());
        if let Ok(parsed) = parse(narrowed, &args) {
            return Ok(parsed);
        }
    }
    parse(Cli::command(), &args)
}

/// The command `args` names, from the whole tree `root` (not built), when the scan is sure of
/// it: the first word after the program's name that is neither an option of `root` nor the
/// value of one, when it is a command's name or alias. `None` at `--`, an option `root` does
/// not have, or a word that names no command.
fn named(root: &clap::Command, args: &[OsString]) -> Option<clap::Command> {
    let takes_value = |arg: &clap::Arg| arg.get_action().takes_values();
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let arg = arg.to_str()?;
        if arg == "--" {
            return None;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((name, _)) => (name, true),
                None => (long, false),
            };
            let option = root
                .get_arguments()
                .find(|a| a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|all| all.contains(&name)))?;
            if takes_value(option) && !inline {
                rest.next()?;
            }
            continue;
        }
        if let Some(shorts) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            for (at, short) in shorts.char_indices() {
                let option = root.get_arguments().find(|a| {
                    a.get_short() == Some(short) || a.get_all_short_aliases().is_some_and(|all| all.contains(&short))
                })?;
                if takes_value(option) {
                    // The rest of the cluster is the value, or the next word is.
                    if at + short.len_utf8() == shorts.len() {
                        rest.next()?;
                    }
                    break;
                }
            }
            continue;
        }
        return root.find_subcommand(arg).cloned();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &str) -> Vec<OsString> {
        std::iter::once("packs").chain(words.split_whitespace()).map(OsString::from).collect()
    }

    fn named_in(words: &str) -> Option<String> {
        named(&Cli::command(), &argv(words)).map(|c| c.get_name().to_owned())
    }

    #[test]
    fn the_scan_names_the_command_after_global_options_and_their_values() {
        assert_eq!(named_in("run noop").as_deref(), Some("run"));
        assert_eq!(named_in("--packs run run noop").as_deref(), Some("run"));
        assert_eq!(named_in("--packs=list run noop").as_deref(), Some("run"));
        assert_eq!(named_in("-q --agent list lint").as_deref(), Some("lint"));
        assert_eq!(named_in("--color never --locked serve").as_deref(), Some("serve"));
        assert_eq!(named_in("--deny-read ~/.x --pass-env HOME catalog").as_deref(), Some("catalog"));
    }

    #[test]
    fn the_scan_gives_up_where_it_cannot_be_sure() {
        assert_eq!(named_in(""), None);
        assert_eq!(named_in("--unknown run noop"), None);
        assert_eq!(named_in("-z run"), None);
        assert_eq!(named_in("-- run"), None);
        assert_eq!(named_in("ru noop"), None);
        assert_eq!(named_in("--packs"), None);
        assert_eq!(named_in("noop run"), None);
    }

    /// Every argv parses to the same command line through the narrowed tree as through the
    /// whole one, and what only the whole tree accepts is still accepted or refused the same.
    #[test]
    fn the_narrowed_tree_parses_as_the_whole_tree() {
        let whole = |words: &str| {
            Cli::command().try_get_matches_from(argv(words)).and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)))
        };
        for words in [
            "run noop",
            "--packs DIR run noop {}",
            "run --packs DIR noop",
            "-q list --json",
            "--agent a --mode m catalog --format openai",
            "serve --http 127.0.0.1:0",
            "call --format anthropic",
            "help run",
            "help --tool run",
            "lint --packs x",
            "completions bash",
            "man",
        ] {
            let (narrow, whole) = (parse(argv(words)), whole(words));
            match (narrow, whole) {
                (Ok((a, ma)), Ok((b, mb))) => {
                    assert_eq!(format!("{a:?}"), format!("{b:?}"), "{words}");
                    assert_eq!(ma.subcommand_name(), mb.subcommand_name(), "{words}");
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{words}"),
                (a, b) => panic!("{words}: narrowed {:?}, whole {:?}", a.is_ok(), b.is_ok()),
            }
        }
    }

    /// Help, version and errors come from the whole tree: the top help lists every command,
    /// a misspelt command gets the whole tree's suggestion.
    #[test]
    fn help_and_errors_are_the_whole_trees() {
        for words in ["--help run", "run --help", "--version", "rn noop", "lsit run", "run --bogus", "list run"] {
            let narrow = parse(argv(words)).map(|_| ()).unwrap_err();
            let whole = Cli::command().try_get_matches_from(argv(words)).map(|_| ()).unwrap_err();
            assert_eq!(narrow.kind(), whole.kind(), "{words}");
            assert_eq!(narrow.to_string(), whole.to_string(), "{words}");
        }
        let help = parse(argv("--help run")).map(|_| ()).unwrap_err().to_string();
        assert!(help.contains("serve") && help.contains("lint"), "{help}");
        let typo = parse(argv("lsit run")).map(|_| ()).unwrap_err().to_string();
        assert!(typo.contains("'lint', 'list'"), "{typo}");
    }

    /// The tree the parse is given holds one command when argv names one (what saves the copies).
    #[test]
    fn a_named_command_narrows_the_tree_to_it() {
        let one = named(&Cli::command(), &argv("--packs d run noop")).unwrap();
        ONLY.with(|only| *only.borrow_mut() = Some(one));
        let narrowed = Cli::command();
        assert_eq!(narrowed.get_subcommands().map(clap::Command::get_name).collect::<Vec<_>>(), ["run"]);
        assert!(ONLY.with(|only| only.borrow().is_none()), "the next tree is whole again");
        assert!(Cli::command().get_subcommands().count() > 15);
    }
}
