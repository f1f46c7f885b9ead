//! Where a confined tool may write, as grants for Landlock: each writable place's whole
//! hierarchy, except the parts of packs' own configuration (the control plane: pack
//! directories, agents, the lock file, the audit log, secrets and token files, packs'
//! cache) that lie inside it.
//!
//! Landlock only ever allows, and a right granted on a directory holds for everything
//! beneath it. So a workspace that holds `./packs` is not granted whole: its entries are,
//! one by one, but for the protected one, and a directory on the way to a protected path is
//! opened up the same way. What that costs a tool: it cannot create, rename or remove an
//! entry directly in such a directory (those are rights on the directory itself), only
//! write the files already there and anything in its other subdirectories; entries created
//! after the call's rules were built are not writable in that call.

use std::path::{Path, PathBuf};

/// One place a confined tool may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Grant {
    /// A directory and everything beneath it.
    Tree(PathBuf),
    /// One existing file, written and truncated in place.
    File(PathBuf),
}

/// The grants that let a tool write everything under `place` but the `protected` paths
/// and what is beneath them. `place` and `protected` are absolute, with links resolved
/// (a grant follows links, and the kernel checks the resolved path). A place that holds no
/// protected path is one [`Grant::Tree`]; a place inside a protected path gets nothing.
/// Symbolic links among the entries are left out: a grant on one would reach its target.
pub(crate) fn grants(place: &Path, protected: &[PathBuf]) -> Vec<Grant> {
    if protected.iter().any(|p| place.starts_with(p)) {
        return Vec::new();
    }
    if !protected.iter().any(|p| p.starts_with(place)) {
        return vec![Grant::Tree(place.to_owned())];
    }
    let mut out = Vec::new();
    open_up(place, protected, &mut out);
    out
}

/// Grant every entry of `dir` (which holds a protected path below it) but the protected
/// ones, opening up the directories on the way to them.
fn open_up(dir: &Path, protected: &[PathBuf], out: &mut Vec<Grant>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_symlink() || protected.contains(&path) {
            continue;
        }
        if kind.is_dir() {
            if protected.iter().any(|p| p.starts_with(&path)) {
                open_up(&path, protected, out);
            } else {
                out.push(Grant::Tree(path));
            }
        } else {
            out.push(Grant::File(path));
        }
    }
}

/// The paths of `paths` that exist, as [`grants`] compares them: absolute, links resolved.
/// One that does not exist is not reserved: reserving a name inside a writable place costs
/// the place its own create and remove rights (see the module's documentation), and the
/// defaults (`./packs.lock`, `./agents`) would cost that to every workspace without them.
pub(crate) fn resolved(paths: &[PathBuf]) -> Vec<PathBuf> {
    // A path that is not there (most credential stores of the default list) costs one
    // `lstat`, not a `readlink` per component: canonicalize fails on it anyway.
    let mut out: Vec<PathBuf> = paths
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_is_granted_whole_unless_it_holds_a_protected_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["packs/tools.d", "src/deep", "agents/a", "docs"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in ["README.md", "packs.lock", "src/main.rs", "agents/a/agent.toml"] {
            std::fs::write(root.join(f), "x").unwrap();
        }
        std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
        // Nothing protected inside: the whole place.
        assert_eq!(grants(&root.join("src"), &[root.join("packs")]), [Grant::Tree(root.join("src"))]);
        // Inside a protected path: nothing.
        assert_eq!(grants(&root.join("packs/tools.d"), &[root.join("packs")]), []);
        // A workspace holding the pack directory, the agents, the lock file: everything else.
        let protected = [root.join("packs"), root.join("agents/a/agent.toml"), root.join("packs.lock")];
        let mut got = grants(&root, &protected);
        got.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        let mut want = vec![
            Grant::Tree(root.join("src")),
            Grant::Tree(root.join("docs")),
            Grant::File(root.join("README.md")),
            // `agents/` is opened up: `agents/a/` too, whose only file is protected.
        ];
        want.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        assert_eq!(got, want);
    }

    #[test]
    fn paths_resolve_through_links_and_only_what_exists_is_reserved() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/audit.jsonl"), "").unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        let got = resolved(&[root.join("link"), root.join("real/audit.jsonl"), root.join("no/such/dir")]);
        assert_eq!(got, [root.join("real"), root.join("real/audit.jsonl")]);
    }
}
