//! The name-precedence rule, in one place for loading and for `packs lint`: within
//! one pack directory a name declared twice is ambiguous (neither file is used);
//! across directories the earlier directory's tool shadows the later one's, like `PATH`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What a file's claim on a name comes to.
pub(crate) enum Claim<'a> {
    /// The name is its own.
    Won,
    /// Another file of the same directory declares the name: neither is used.
    Duplicate {
        /// The first file of this directory that declares it.
        first: &'a Path,
    },
    /// An earlier directory's file declares the name and wins.
    Shadowed {
        /// That file.
        winner: &'a Path,
    },
}

/// The names claimed so far, directory by directory.
#[derive(Debug, Default)]
pub(crate) struct Precedence {
    earlier: HashMap<String, PathBuf>,
    here: HashMap<String, PathBuf>,
}

impl Precedence {
    /// `file`, in the current directory, declares `name`.
    pub(crate) fn claim(&mut self, name: &str, file: &Path) -> Claim<'_> {
        if self.here.contains_key(name) {
            Claim::Duplicate { first: &self.here[name] }
        } else if self.earlier.contains_key(name) {
            Claim::Shadowed { winner: &self.earlier[name] }
        } else {
            self.here.insert(name.to_owned(), file.to_owned());
            Claim::Won
        }
    }

    /// The current directory is done; the next claims are in a later one.
    pub(crate) fn end_dir(&mut self) {
        for (name, file) in self.here.drain() {
            self.earlier.entry(name).or_insert(file);
        }
    }
}

/// The message for a name declared twice in one directory.
pub(crate) fn duplicate_message(name: &str, first: &Path) -> String {
    format!("tool `{name}` is also declared in {}; neither is used", first.display())
}
