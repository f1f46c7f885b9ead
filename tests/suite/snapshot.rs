//! Listing snapshots: `packs catalog` and `packs list` answered from the cache directory
//! only while nothing they read has changed.
//!
//! Each check tampers with the snapshot first (its output replaced by a marker), so a
//! stale snapshot wrongly used shows as the marker instead of passing unnoticed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tempfile::TempDir;

use crate::common::{Output, Packs, Test, mtime, settle};

const MARKER: &str = "STALE SNAPSHOT\n";

fn tool(name: &str, description: &str) -> String {
    json!({"name": name, "description": description, "command": {"program": "echo", "args": [name]}}).to_string()
}

/// Pack directories `a` and `b`, a directory outside them that links in `a` point into,
/// and the cache.
struct Scene {
    a: Packs,
    b: Packs,
    outside: Packs,
    cache: TempDir,
}

impl Scene {
    fn new() -> Self {
        let a = Packs::new()
            .file("alpha.tool.json", &tool("alpha", "first"))
            .file("beta.tool.json", &tool("beta", "second"))
            .file("sub/gamma.tool.json", &tool("gamma", "third"))
            // Notes, not a script (a `#!` file that is not executable draws a warning).
            .file("later", "notes\n");
        let b = Packs::new().file("delta.tool.json", &tool("delta", "fourth"));
        let outside = Packs::new()
            .file("eta.json", &tool("eta", "linked"))
            .file("eta-2.json", &tool("eta", "relinked"))
            .file("more/theta.tool.json", &tool("theta", "in a linked directory"));
        std::os::unix::fs::symlink(outside.join("eta.json"), a.join("eta.tool.json")).unwrap();
        std::os::unix::fs::symlink(outside.join("more"), a.join("linked")).unwrap();
        Self { a, b, outside, cache: tempfile::tempdir().unwrap() }
    }

    fn test(&self, cache: &Path) -> Test {
        // The same working directory and environment each time: one invocation.
        Test::new()
            .packs_dir(&self.a)
            .packs_dir(&self.b)
            .current_dir(self.outside.path())
            .env("XDG_CONFIG_HOME", self.outside.join("no-config"))
            .env("PACKS_CACHE_DIR", cache)
    }

    /// A listing with the snapshots in the scene's cache.
    fn cached(&self, args: &[&str]) -> Output {
        self.test(self.cache.path()).args(args).run()
    }

    /// The same listing with no cache at all: what it must print.
    fn fresh(&self, args: &[&str]) -> Output {
        self.test(Path::new("")).args(args).run()
    }

    fn snapshots(&self) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(self.cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("listing-"))
            .collect();
        found.sort();
        found
    }

    fn tamper(&self) {
        tamper(self.cache.path());
    }
}

/// Replace the output of every snapshot in `cache` by [`MARKER`], keeping what makes it current.
fn tamper(cache: &Path) {
    for entry in std::fs::read_dir(cache).unwrap() {
        let snap = entry.unwrap().path();
        if !snap.file_name().unwrap().to_string_lossy().starts_with("listing-") {
            continue;
        }
        let bytes = std::fs::read(&snap).unwrap();
        let head: Vec<&[u8]> = bytes.splitn(4, |&b| b == b'\n').take(3).collect();
        let mut forged = head.join(&b'\n');
        forged.push(b'\n');
        forged.extend_from_slice(MARKER.as_bytes());
        std::fs::write(&snap, forged).unwrap();
    }
}

const LISTINGS: [&[&str]; 3] = [&["catalog"], &["catalog", "--format", "openai"], &["list", "--json"]];

/// Snapshots written from settled files, then tampered with.
fn prepared(scene: &Scene) {
    for args in LISTINGS {
        let first = scene.cached(args);
        first.success();
        assert_eq!(first.stdout(), scene.fresh(args).stdout(), "{args:?}");
    }
    assert_eq!(scene.snapshots().len(), LISTINGS.len(), "one snapshot per listing");
    scene.tamper();
}

#[test]
fn a_current_snapshot_is_printed_and_any_change_makes_a_full_load() {
    type Change = fn(&Scene);
    let cases: Vec<(&str, Change)> = vec![
        ("nothing changed (the snapshot is used)", |_| {}),
        ("a manifest edited in place, same size, its old mtime put back", |s| {
            let path = s.a.join("alpha.tool.json");
            let before = mtime(&path);
            std::fs::write(&path, tool("alpha", "FIRST")).unwrap();
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(before).unwrap();
        }),
        ("a file made executable (chmod alone)", |s| {
            std::fs::set_permissions(s.a.join("later"), std::fs::Permissions::from_mode(0o755)).unwrap();
        }),
        ("a manifest added in a subdirectory", |s| {
            std::fs::write(s.a.join("sub/zeta.tool.json"), tool("zeta", "new")).unwrap();
        }),
        ("a manifest removed", |s| std::fs::remove_file(s.a.join("sub/gamma.tool.json")).unwrap()),
        ("a manifest renamed", |s| std::fs::rename(s.b.join("delta.tool.json"), s.b.join("d.tool.json")).unwrap()),
        ("a symlink retargeted", |s| {
            let tmp = s.a.join("eta.tmp");
            std::os::unix::fs::symlink(s.outside.join("eta-2.json"), &tmp).unwrap();
            std::fs::rename(tmp, s.a.join("eta.tool.json")).unwrap();
        }),
        ("a symlinked manifest's target edited in place", |s| {
            std::fs::write(s.outside.join("eta.json"), tool("eta", "edited")).unwrap();
        }),
        ("a manifest added in a symlinked directory", |s| {
            std::fs::write(s.outside.join("more/iota.tool.json"), tool("iota", "new")).unwrap();
        }),
        ("a manifest with an mtime in the future", |s| {
            let path = s.a.join("beta.tool.json");
            std::fs::write(&path, tool("beta", "future")).unwrap();
            let later = SystemTime::now() + Duration::from_secs(3600);
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(later).unwrap();
        }),
    ];
    let scenes: Vec<Scene> = cases.iter().map(|_| Scene::new()).collect();
    settle();
    for scene in &scenes {
        prepared(scene);
    }
    for ((what, change), scene) in cases.iter().zip(&scenes) {
        change(scene);
        for args in LISTINGS {
            let out = scene.cached(args);
            out.success();
            if what.starts_with("nothing changed") {
                assert_eq!(out.stdout(), MARKER, "{what}: {args:?}\n{}", out.report());
            } else {
                assert_eq!(out.stdout(), scene.fresh(args).stdout(), "{what}: {args:?}\n{}", out.report());
            }
        }
    }
}

#[test]
fn a_snapshot_belongs_to_one_invocation_and_only_to_a_clean_answer() {
    let scene = Scene::new();
    settle();
    prepared(&scene);
    // Other arguments, another environment, another working directory: other invocations.
    for (what, test) in [
        ("another format", scene.test(scene.cache.path()).args(["catalog", "--format", "anthropic"])),
        ("another environment", scene.test(scene.cache.path()).env("SOME_SETTING", "1").args(["catalog"])),
        ("another working directory", scene.test(scene.cache.path()).current_dir(scene.b.path()).args(["catalog"])),
        ("--quiet", scene.test(scene.cache.path()).args(["--quiet", "catalog"])),
    ] {
        let out = test.run();
        out.success().stdout_lacks(MARKER);
        assert!(out.stdout().contains("\"alpha\""), "{what}\n{}", out.report());
    }
    // A listing that warned is not kept: it would print the warning no more.
    let broken = Scene::new();
    std::fs::write(broken.a.join("broken.tool.json"), "{broken").unwrap();
    settle();
    for _ in 0..2 {
        broken.cached(&["catalog"]).success().stderr_contains("broken.tool.json");
    }
    assert!(broken.snapshots().is_empty(), "{:?}", broken.snapshots());
    // Nor one checked against a lock file (its file is not in the fingerprint).
    let locked = Scene::new();
    settle();
    locked.cached(&["--locked", "catalog"]);
    assert!(locked.snapshots().is_empty());
    // Nor one that had not settled: written right after a change, it is not kept.
    let fresh = Scene::new();
    fresh.cached(&["catalog"]).success();
    assert!(fresh.snapshots().is_empty(), "files changed in the last two seconds");
}

#[test]
fn a_snapshot_written_by_another_user_or_in_a_shared_directory_is_not_used() {
    let scene = Scene::new();
    settle();
    prepared(&scene);
    // Garbage is a miss.
    for snap in scene.snapshots() {
        std::fs::write(&snap, "packs-listing-snapshot\n\n").unwrap();
    }
    let out = scene.cached(&["catalog"]);
    out.success();
    assert_eq!(out.stdout(), scene.fresh(&["catalog"]).stdout());
    // A cache directory others can write is not written to.
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    scene.test(shared.path()).args(["catalog"]).run().success();
    assert_eq!(std::fs::read_dir(shared.path()).unwrap().count(), 0);
}

#[test]
fn a_missing_pack_directory_created_is_seen() {
    // The default search path (`./packs`, then the user's directories), all missing: an
    // empty catalog and no warning, so a snapshot is kept.
    let home = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let catalog = || {
        Test::new()
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("XDG_CONFIG_HOME", home.path().join("config"))
            .env_remove("PACKS_PATH")
            .env("PACKS_CACHE_DIR", cache.path())
            .args(["catalog", "--format", "openai"])
            .run()
    };
    settle();
    catalog().success().stdout_eq("[]\n");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 1, "a snapshot");
    tamper(cache.path());
    catalog().success().stdout_eq(MARKER);
    std::fs::create_dir(home.path().join("packs")).unwrap();
    std::fs::write(home.path().join("packs/kappa.tool.json"), tool("kappa", "new")).unwrap();
    catalog().success().stdout_contains("\"kappa\"");
}

#[test]
fn a_cache_directory_keeps_the_sixteen_newest_snapshots() {
    let scene = Scene::new();
    settle();
    // An environment that changes every run (a session id) is a new invocation each time.
    for i in 0..20 {
        scene.test(scene.cache.path()).env("SESSION", i.to_string()).args(["catalog"]).run().success();
    }
    assert_eq!(scene.snapshots().len(), 16, "{:?}", scene.snapshots());
    // The newest is among them: the last session's listing is a hit.
    scene.tamper();
    scene.test(scene.cache.path()).env("SESSION", "19").args(["catalog"]).run().success().stdout_eq(MARKER);
}

/// Make a FIFO at `path` (opening one for reading would block until a writer comes).
fn fifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn hostile_entries_in_a_pack_directory_never_hang_a_listing_or_make_a_stale_one() {
    // FIFOs (one named like a manifest) are stat-ed, never opened: the listing is clean,
    // kept, used, and seen gone when they are removed.
    let scene = Scene::new();
    fifo(&scene.a.join("pipe"));
    fifo(&scene.a.join("sub/pipe.tool.json"));
    settle();
    prepared(&scene);
    scene.cached(&["catalog"]).success().stdout_eq(MARKER);
    std::fs::remove_file(scene.a.join("sub/pipe.tool.json")).unwrap();
    let out = scene.cached(&["catalog"]);
    assert_eq!(out.stdout(), scene.fresh(&["catalog"]).stdout(), "{}", out.report());
    // A link loop (its directory is walked once) and a dangling link (reported by
    // discovery, so nothing is kept): each run ends and answers like a full load.
    let scene = Scene::new();
    std::os::unix::fs::symlink(scene.a.path(), scene.a.join("sub/loop")).unwrap();
    std::os::unix::fs::symlink(scene.a.join("nowhere"), scene.a.join("dangling.tool.json")).unwrap();
    settle();
    for _ in 0..2 {
        let out = scene.cached(&["catalog"]);
        out.success().stderr_contains("dangling.tool.json");
        assert_eq!(out.stdout(), scene.fresh(&["catalog"]).stdout(), "{}", out.report());
    }
    assert!(scene.snapshots().is_empty(), "{:?}", scene.snapshots());
}
