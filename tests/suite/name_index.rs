//! The name index (`packs run`, `describe` and `help` of one name): every change to the
//! pack directories is seen on the very next run, whatever index the run before it left.
//!
//! Each change gets a scene of its own (two pack directories and a cache directory), so
//! that each is checked against an index written before it, with nothing else changed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tempfile::TempDir;

use crate::common::{Output, Packs, Test, mtime, settle};

fn tool(name: &str, output: &str) -> String {
    json!({"name": name, "description": format!("prints {output}"), "command": {"program": "echo", "args": [output]}})
        .to_string()
}

fn script(output: &str) -> String {
    let describe = json!({"name": "exe", "description": "d", "parameters": {"type": "object", "properties": {}}});
    format!("#!/bin/sh\nif [ \"$1\" = \"--describe\" ]; then echo '{describe}'; exit 0; fi\necho {output}\n")
}

/// Write in place: same inode, the directory untouched (what `>` or many editors do).
fn edit_in_place(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// Set a file's modification time (what `touch -d`, `tar -x` or `cp -p` do): the change
/// time still moves, which no user can set back.
fn set_mtime(path: &Path, mtime: SystemTime) {
    std::fs::File::options().write(true).open(path).unwrap().set_modified(mtime).unwrap();
}

/// Replace `link` by a symlink to `target` the way `ln -sfn` does: made aside, renamed over.
fn relink(target: &Path, link: &Path) {
    let tmp = link.with_extension("link-tmp");
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(tmp, link).unwrap();
}

/// An earlier pack directory `a`, a later one `b`, the cache the index lives in, and a
/// directory outside both that symlinks in `a` point into.
struct Scene {
    a: Packs,
    b: Packs,
    cache: TempDir,
    outside: Packs,
}

impl Scene {
    fn new() -> Self {
        let a = Packs::new()
            .file("alpha.tool.json", &tool("alpha", "alpha"))
            .file("beta.tool.json", &tool("beta", "beta"))
            .file("sub/gamma.tool.json", &tool("gamma", "gamma"))
            .file("broken.tool.json", "{broken")
            .executable("exe", &script("exe-1"))
            .file("later", "#!/bin/sh\necho later\n");
        let b = Packs::new()
            .file("delta.tool.json", &tool("delta", "delta-b"))
            .file("epsilon.tool.json", &tool("epsilon", "epsilon"));
        let outside = Packs::new()
            .file("eta.json", &tool("eta", "eta"))
            .file("alpha.json", &tool("alpha", "alpha-linked"))
            .file("eta-2.json", &tool("eta", "eta-2"))
            .file("more/theta.tool.json", &tool("theta", "theta"));
        std::os::unix::fs::symlink(outside.join("eta.json"), a.join("eta.tool.json")).unwrap();
        std::os::unix::fs::symlink(outside.join("more"), a.join("linked")).unwrap();
        Self { a, b, cache: tempfile::tempdir().unwrap(), outside }
    }

    /// `packs run NAME` with the index in `cache`.
    fn run_with(&self, cache: &Path, name: &str) -> Output {
        Test::new().packs_dir(&self.a).packs_dir(&self.b).env("PACKS_CACHE_DIR", cache).args(["run", name]).run()
    }

    fn run(&self, name: &str) -> Output {
        self.run_with(self.cache.path(), name)
    }

    /// A copy of the cache as it is now, so several checks each start from this index.
    fn cache_copy(&self) -> TempDir {
        let copy = tempfile::tempdir().unwrap();
        std::fs::set_permissions(copy.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        for entry in std::fs::read_dir(self.cache.path()).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
        }
        copy
    }

    fn index_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("names-"))
            .collect()
    }
}

/// What a run should print: its stdout, or a piece of its error.
enum Expect {
    Prints(&'static str),
    Fails(&'static str),
}

fn check(out: &Output, expect: &Expect, what: &str) {
    match expect {
        Expect::Prints(text) => {
            assert!(out.status.success(), "{what}\n{}", out.report());
            assert_eq!(out.stdout(), *text, "{what}\n{}", out.report());
        }
        Expect::Fails(text) => {
            assert!(!out.status.success(), "{what}: should fail\n{}", out.report());
            assert!(out.stderr.contains(text), "{what}\n{}", out.report());
        }
    }
}

type Change = fn(&Scene);

/// A change, and the runs that must see it: a name and what running it does.
type Case = (&'static str, Change, Vec<(&'static str, Expect)>);

#[test]
fn every_change_is_seen_on_the_next_run() {
    use Expect::{Fails, Prints};
    let cases: Vec<Case> = vec![
        (
            "a manifest edited in place",
            |s| edit_in_place(&s.a.join("alpha.tool.json"), &tool("alpha", "alpha-2")),
            vec![("alpha", Prints("alpha-2\n"))],
        ),
        (
            "a manifest replaced (written aside and renamed over)",
            |s| {
                let tmp = s.a.join(".alpha.tmp");
                std::fs::write(&tmp, tool("alpha", "alpha-3")).unwrap();
                std::fs::rename(tmp, s.a.join("alpha.tool.json")).unwrap();
            },
            vec![("alpha", Prints("alpha-3\n"))],
        ),
        (
            "a tool renamed in place",
            |s| edit_in_place(&s.a.join("beta.tool.json"), &tool("beta_new", "beta")),
            vec![("beta", Fails("no tool named `beta`")), ("beta_new", Prints("beta\n"))],
        ),
        (
            "a manifest added in a subdirectory",
            |s| std::fs::write(s.a.join("sub/zeta.tool.json"), tool("zeta", "zeta")).unwrap(),
            vec![("zeta", Prints("zeta\n")), ("gamma", Prints("gamma\n"))],
        ),
        (
            "a manifest removed",
            |s| std::fs::remove_file(s.a.join("sub/gamma.tool.json")).unwrap(),
            vec![("gamma", Fails("no tool named `gamma`")), ("alpha", Prints("alpha\n"))],
        ),
        (
            "a file renamed",
            |s| std::fs::rename(s.b.join("epsilon.tool.json"), s.b.join("eps.tool.json")).unwrap(),
            vec![("epsilon", Prints("epsilon\n"))],
        ),
        (
            "a tool added in an earlier directory shadows the later one",
            |s| std::fs::write(s.a.join("delta.tool.json"), tool("delta", "delta-a")).unwrap(),
            vec![("delta", Prints("delta-a\n"))],
        ),
        (
            "the earlier directory removed",
            |s| std::fs::remove_dir_all(s.a.path()).unwrap(),
            vec![("delta", Prints("delta-b\n")), ("alpha", Fails("no tool named `alpha`"))],
        ),
        (
            "a broken manifest fixed in place",
            |s| edit_in_place(&s.a.join("broken.tool.json"), &tool("fixed", "fixed")),
            vec![("fixed", Prints("fixed\n")), ("alpha", Prints("alpha\n"))],
        ),
        (
            "an executable edited in place",
            |s| edit_in_place(&s.a.join("exe"), &script("exe-2")),
            vec![("exe", Prints("exe-2\n"))],
        ),
        (
            "an executable no longer executable",
            |s| std::fs::set_permissions(s.a.join("exe"), std::fs::Permissions::from_mode(0o644)).unwrap(),
            vec![("exe", Fails("no tool named `exe`"))],
        ),
        (
            "a script made executable",
            |s| {
                let (later, describe) = (s.a.join("later"), script("later"));
                edit_in_place(&later, &describe.replace("\"exe\"", "\"later\""));
                std::fs::set_permissions(later, std::fs::Permissions::from_mode(0o755)).unwrap();
            },
            vec![("later", Prints("later\n"))],
        ),
        (
            "a manifest replaced by a symlink to another file",
            |s| relink(&s.outside.join("alpha.json"), &s.a.join("alpha.tool.json")),
            vec![("alpha", Prints("alpha-linked\n"))],
        ),
        (
            "a symlinked manifest's target edited in place",
            |s| edit_in_place(&s.outside.join("eta.json"), &tool("eta", "eta-3")),
            vec![("eta", Prints("eta-3\n"))],
        ),
        (
            "a symlink pointed at another file",
            |s| relink(&s.outside.join("eta-2.json"), &s.a.join("eta.tool.json")),
            vec![("eta", Prints("eta-2\n"))],
        ),
        (
            "a manifest added in a symlinked directory",
            |s| std::fs::write(s.outside.join("more/iota.tool.json"), tool("iota", "iota")).unwrap(),
            vec![("iota", Prints("iota\n")), ("theta", Prints("theta\n"))],
        ),
        (
            "a manifest edited in place, same size, its old mtime put back",
            |s| {
                let path = s.a.join("alpha.tool.json");
                let before = mtime(&path);
                edit_in_place(&path, &tool("alpha", "alphX"));
                set_mtime(&path, before);
            },
            vec![("alpha", Prints("alphX\n"))],
        ),
        (
            "a manifest added with an mtime in the past, the directory's mtime put back",
            |s| {
                let sub = s.a.join("sub");
                let before = mtime(&sub);
                let added = sub.join("kappa.tool.json");
                std::fs::write(&added, tool("kappa", "kappa")).unwrap();
                set_mtime(&added, SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000));
                std::fs::File::open(&sub).unwrap().set_modified(before).unwrap();
            },
            vec![("kappa", Prints("kappa\n"))],
        ),
        (
            "a manifest with an mtime in the future",
            |s| {
                let path = s.a.join("alpha.tool.json");
                edit_in_place(&path, &tool("alpha", "alphF"));
                set_mtime(&path, SystemTime::now() + Duration::from_secs(3600));
            },
            vec![("alpha", Prints("alphF\n"))],
        ),
    ];
    let scenes: Vec<Scene> = cases.iter().map(|_| Scene::new()).collect();
    settle();
    // An index written from settled files, and used: a second run finds the name in it.
    for scene in &scenes {
        for _ in 0..2 {
            check(&scene.run("alpha"), &Prints("alpha\n"), "before any change");
        }
        assert_eq!(scene.index_files().len(), 1, "one index for the search path");
    }
    for ((what, change, checks), scene) in cases.iter().zip(&scenes) {
        change(scene);
        // Each check from the index written before the change (a copy of it), at once.
        for (name, expect) in checks {
            let cache = scene.cache_copy();
            check(&scene.run_with(cache.path(), name), expect, &format!("{what}: run {name} right after"));
        }
    }
    // And from the index the runs after the change write, once that has settled.
    settle();
    for ((what, _, checks), scene) in cases.iter().zip(&scenes) {
        for round in 0..2 {
            for (name, expect) in checks {
                check(&scene.run(name), expect, &format!("{what}: run {name} later ({round})"));
            }
        }
    }
}

#[test]
fn a_hit_reads_only_the_tools_file_and_listing_reads_them_all() {
    let scene = Scene::new();
    settle();
    scene.run("alpha");
    // Another manifest now (in place, not replaced) mentions `alpha` and does not parse. A
    // lookup that reads every file reports it; one answered by the index does not read it.
    // This is the limit the index documents: an in-place edit of another file is not seen.
    edit_in_place(&scene.a.join("beta.tool.json"), "{\"name\": \"alpha\", broken");
    let out = scene.run("alpha");
    out.success().stdout_eq("alpha\n").stderr_lacks("beta.tool.json");
    let without = Test::new().packs_dir(&scene.a).packs_dir(&scene.b).args(["run", "alpha"]).run();
    without.success().stderr_contains("beta.tool.json");
    // Listing commands and --locked never use the index.
    Test::new()
        .packs_dir(&scene.a)
        .packs_dir(&scene.b)
        .env("PACKS_CACHE_DIR", scene.cache.path())
        .args(["list"])
        .run()
        .stderr_contains("beta.tool.json");
}

#[test]
fn an_index_written_by_another_user_or_in_a_shared_directory_is_not_used() {
    let scene = Scene::new();
    settle();
    scene.run("alpha");
    let index = scene.index_files().pop().expect("an index");
    // A tampered index pointing `alpha` at another file is only ever a miss, never a redirect:
    // the file it names must still declare the name.
    let text = std::fs::read_to_string(&index).unwrap();
    let beta = scene.a.join("beta.tool.json");
    let forged = text
        .lines()
        .map(|l| {
            if l.starts_with("T\talpha\t") {
                let id = l.split('\t').nth(4).unwrap();
                let beta_id = text.lines().find(|l| l.starts_with("T\tbeta\t")).unwrap().split('\t').nth(4).unwrap();
                l.replace(id, beta_id)
                    .replace(&scene.a.join("alpha.tool.json").display().to_string(), &beta.display().to_string())
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&index, forged + "\n").unwrap();
    scene.run("alpha").success().stdout_eq("alpha\n");
    // Garbage is a miss too.
    std::fs::write(&index, "packs-name-index 1 \u{0}\nT\t\t\n").unwrap();
    scene.run("alpha").success().stdout_eq("alpha\n");
    // A cache directory others can write is not written to.
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    scene.run_with(shared.path(), "alpha").success().stdout_eq("alpha\n");
    assert_eq!(std::fs::read_dir(shared.path()).unwrap().count(), 0);
}

#[test]
fn processes_updating_the_index_at_once_all_answer_right_and_leave_one_good_index() {
    let scene = Scene::new();
    settle();
    scene.run("alpha").success().stdout_eq("alpha\n");
    // A change every process must see, then many at once: each finds the index stale and
    // writes its own; none may read another's half-written one or answer from a stale one.
    edit_in_place(&scene.a.join("alpha.tool.json"), &tool("alpha", "alpha-2"));
    std::fs::write(scene.b.join("lambda.tool.json"), tool("lambda", "lambda")).unwrap();
    let expected = [("alpha", "alpha-2\n"), ("lambda", "lambda\n"), ("delta", "delta-b\n"), ("theta", "theta\n")];
    let rounds = |label: &str| {
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let (name, text) = expected[i % expected.len()];
                let (a, b, cache) =
                    (scene.a.path().to_owned(), scene.b.path().to_owned(), scene.cache.path().to_owned());
                std::thread::spawn(move || {
                    let out = Test::new()
                        .packs_dir(&a)
                        .packs_dir(&b)
                        .env("PACKS_CACHE_DIR", &cache)
                        .args(["run", name])
                        .run();
                    (name, text, out)
                })
            })
            .collect();
        for thread in threads {
            let (name, text, out) = thread.join().unwrap();
            check(&out, &Expect::Prints(text), &format!("{label}: run {name}"));
        }
    };
    rounds("at once, right after the change");
    settle();
    rounds("at once, once settled");
    rounds("at once, from the settled index");
    let names: Vec<_> = std::fs::read_dir(scene.cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("describe-"))
        .collect();
    assert_eq!(names.len(), 1, "one index, no temporary files left: {names:?}");
    for (name, text) in expected {
        check(&scene.run(name), &Expect::Prints(text), &format!("after: run {name}"));
    }
}
