//! Read confinement (docs/SANDBOX.md, "Credential stores"): no `read_only` or `workspace`
//! tool reads the operator's keys, by any route; everything else still reads.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{Packs, Test};

const SECRET: &str = "FAKE-PRIVATE-KEY-0123456789";

/// A temporary `HOME` holding fake keys, and a readable note beside them.
fn fake_home() -> tempfile::TempDir {
    keys_in(tempfile::tempdir().unwrap())
}

/// The same in /var/tmp, where fewer other tests' files come and go than in /tmp: a call of
/// `packs serve` finds no change on the way there but the test's own.
fn quiet_fake_home() -> tempfile::TempDir {
    keys_in(tempfile::tempdir_in("/var/tmp").or_else(|_| tempfile::tempdir()).unwrap())
}

/// `home` holding fake keys and a readable note beside them.
fn keys_in(home: tempfile::TempDir) -> tempfile::TempDir {
    let h = home.path();
    for dir in [".ssh", ".aws", ".docker", ".config/gcloud", ".config/fish"] {
        std::fs::create_dir_all(h.join(dir)).unwrap();
    }
    for file in [".ssh/id_ed25519", ".aws/credentials", ".docker/config.json", ".config/gcloud/token", ".netrc"] {
        std::fs::write(h.join(file), SECRET).unwrap();
    }
    // A denied file that is a program: it may not run either.
    let run = h.join(".ssh/run.sh");
    std::fs::write(&run, format!("#!/bin/sh\necho {SECRET}\n")).unwrap();
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(h.join("notes.txt"), "my notes").unwrap();
    std::fs::write(h.join(".config/fish/config.fish"), "set x 1").unwrap();
    home
}

/// A tool that runs `script` with `sh -c`, under `policy`, its `$1` the `HOME`.
fn tool(name: &str, policy: Value, script: &str) -> Value {
    json!({"name": name, "description": "d", "parameters": {"home": {"type": "string"}}, "policy": policy,
           "command": {"program": "sh", "args": ["-c", script, "sh", "{{home}}"]}})
}

/// Every way to the keys a tool could try, each saying whether it got them.
const ATTACKS: &str = r#"
h="$1"
try() { what="$1"; shift; if out=$("$@" 2>/dev/null) && [ -n "$out" ]; then echo "GOT $what: $out"; else echo "refused $what"; fi; }
try cat cat "$h/.ssh/id_ed25519"
try aws cat "$h/.aws/credentials"
try docker cat "$h/.docker/config.json"
try gcloud cat "$h/.config/gcloud/token"
try netrc cat "$h/.netrc"
try sh sh -c 'read -r line < "$0"; echo "$line"' "$h/.ssh/id_ed25519"
try python3 python3 -c 'import sys; print(open(sys.argv[1]).read())' "$h/.ssh/id_ed25519"
try mmap python3 -c 'import mmap, os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); print(mmap.mmap(fd, 0, prot=mmap.PROT_READ)[:].decode())' "$h/.ssh/id_ed25519"
try exec "$h/.ssh/run.sh"
try exec-sh sh "$h/.ssh/run.sh"
cp "$h/.ssh/id_ed25519" copied 2>/dev/null; try cp cat copied
ln -s "$h/.ssh/id_ed25519" symlinked 2>/dev/null; try symlink cat symlinked
ln "$h/.ssh/id_ed25519" hardlinked 2>/dev/null; try hardlink cat hardlinked
mv "$h/.ssh/id_ed25519" moved 2>/dev/null; try move cat moved
try notes cat "$h/notes.txt"
try fish cat "$h/.config/fish/config.fish"
try passwd head -c 5 /etc/passwd
echo mine > mine.txt; try workspace cat mine.txt
try tmpdir sh -c 'echo scratch > "$TMPDIR/s" && cat "$TMPDIR/s"'
"#;

fn run_attacks(home: &Path, ws: &Path, packs: &Packs, name: &str, extra: &[&str]) -> String {
    let out = Test::new()
        .packs_dir(packs)
        .env("HOME", home)
        .current_dir(ws)
        .args(extra)
        .args(["run", name, "--arg"])
        .arg(format!("home={}", home.display()))
        .run();
    out.success();
    out.stdout().to_owned()
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap()
}

#[test]
fn a_confined_tool_reads_no_key_by_any_route_and_leaves_no_copy() {
    crate::common::require("python3");
    for tier in ["read_only", "workspace"] {
        let home = fake_home();
        let ws = tempfile::tempdir().unwrap();
        let policy = json!({"tier": tier, "read_only": tier == "read_only"});
        let packs = Packs::new().manifest("attack", tool("attack", policy, ATTACKS));
        let stdout = run_attacks(&real(home.path()), &real(ws.path()), &packs, "attack", &[]);
        assert!(!stdout.contains(SECRET), "{tier}: {stdout}");
        for what in [
            "cat", "aws", "docker", "gcloud", "netrc", "sh", "python3", "mmap", "exec", "exec-sh", "cp", "symlink",
            "hardlink", "move",
        ] {
            assert!(stdout.contains(&format!("refused {what}\n")), "{tier} {what}: {stdout}");
        }
        for (what, text) in [("notes", "my notes"), ("fish", "set x 1"), ("passwd", "root:"), ("tmpdir", "scratch")] {
            assert!(stdout.contains(&format!("GOT {what}: {text}\n")), "{tier} {what}: {stdout}");
        }
        if tier == "workspace" {
            assert!(stdout.contains("GOT workspace: mine\n"), "{stdout}");
        }
        // No copy, no link to the key in the workspace; the key is where it was.
        for name in ["copied", "hardlinked", "moved"] {
            let copy = ws.path().join(name);
            assert!(std::fs::read(&copy).map_or(true, |b| !String::from_utf8_lossy(&b).contains(SECRET)), "{name}");
        }
        assert!(!ws.path().join("hardlinked").exists() && !ws.path().join("moved").exists());
        assert_eq!(std::fs::read_to_string(home.path().join(".ssh/id_ed25519")).unwrap(), SECRET);
    }
}

#[test]
fn reads_are_open_to_system_tools_to_a_tool_that_states_reads_credentials_and_under_sandbox_off() {
    let home = fake_home();
    let ws = tempfile::tempdir().unwrap();
    let script = r#"cat "$1/.ssh/id_ed25519""#;
    let packs = Packs::new()
        .manifest("sys", tool("sys", json!({"tier": "system"}), script))
        .manifest("opted", tool("opted", json!({"read_only": true, "reads_credentials": true}), script))
        .manifest("plain", tool("plain", json!({"read_only": true}), script));
    for (name, extra) in [("sys", &[][..]), ("opted", &[]), ("plain", &["--sandbox", "off"])] {
        let stdout = run_attacks(home.path(), ws.path(), &packs, name, extra);
        assert_eq!(stdout.trim_end(), SECRET, "{name}");
    }
    // The dry run says which is which.
    let dry = |name: &str| {
        let out = Test::new().packs_dir(&packs).env("HOME", home.path()).args(["run", name, "--dry-run"]).run();
        out.success();
        out.stdout().to_owned()
    };
    assert!(dry("plain").contains("credential stores unreadable"), "{}", dry("plain"));
    assert!(!dry("opted").contains("credential stores unreadable"), "{}", dry("opted"));
}

/// One step of [`serve_reader`]: a call of `reader` on a file, a file written (its
/// directories made; an existing file truncated and written in place), a link made to a
/// target (a new link renamed over the old one, as `ln -sfn` does), an entry renamed (`mv`)
/// or a file given another name (`ln`) while the server runs.
enum Step<'a> {
    Read(&'a Path),
    Write(&'a Path, &'a str),
    Link(&'a Path, &'a Path),
    Move(&'a Path, &'a Path),
    HardLink(&'a Path, &'a Path),
}

/// Run `packs serve` with a `reader` tool under `home`, taking `steps` in order; the answer
/// of each call, one line each.
fn serve_reader(home: &Path, steps: &[Step]) -> Vec<String> {
    crate::common::require("python3");
    let packs = Packs::new().manifest(
        "reader",
        json!({"name": "reader", "description": "d", "parameters": {"file": {"type": "string"}},
               "command": {"program": "cat", "args": ["{{file}}"]}}),
    );
    let steps: Vec<Value> = steps
        .iter()
        .enumerate()
        .map(|(id, step)| match step {
            Step::Read(file) => json!([
                "call",
                json!({"jsonrpc": "2.0", "id": id + 1, "method": "tools/call",
                "params": {"name": "reader", "arguments": {"file": file}}})
                .to_string()
            ]),
            Step::Write(file, text) => json!(["write", file, text]),
            Step::Link(target, at) => json!(["link", target, at]),
            Step::Move(from, to) => json!(["move", from, to]),
            Step::HardLink(file, at) => json!(["hardlink", file, at]),
        })
        .collect();
    let script = "import subprocess, sys, json, os\n\
         p = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)\n\
         def send(line):\n    p.stdin.write(line + '\\n'); p.stdin.flush(); return p.stdout.readline()\n\
         send(json.dumps({'jsonrpc': '2.0', 'id': 0, 'method': 'initialize', 'params': {'protocolVersion': '2025-06-18', 'capabilities': {}, 'clientInfo': {'name': 't', 'version': '1'}}}))\n\
         p.stdin.write(json.dumps({'jsonrpc': '2.0', 'method': 'notifications/initialized'}) + '\\n')\n\
         for step in json.loads(sys.argv[1]):\n\
         \x20   if step[0] == 'call': print(send(step[1]).strip())\n\
         \x20   elif step[0] == 'link': os.symlink(step[1], step[2] + '.new'); os.replace(step[2] + '.new', step[2])\n\
         \x20   elif step[0] == 'move': os.rename(step[1], step[2])\n\
         \x20   elif step[0] == 'hardlink': os.link(step[1], step[2])\n\
         \x20   else: os.makedirs(os.path.dirname(step[1]), exist_ok=True); open(step[1], 'w').write(step[2])\n\
         p.stdin.close(); p.wait()\n";
    let steps = Value::from(steps).to_string();
    let out = Test::new()
        .packs_dir(&packs)
        .env("HOME", home)
        .wrapper(["python3", "-c", script, &steps])
        .args(["serve"])
        .run();
    out.success();
    out.stdout().lines().filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

#[test]
fn an_entry_created_in_home_after_a_first_call_is_readable_in_the_next() {
    // packs serve keeps the read rules per process: a change on the way to a denied path
    // rebuilds them, so a file created in HOME between calls reads.
    let home = fake_home();
    let new = home.path().join("later.txt");
    let got = serve_reader(
        home.path(),
        &[Step::Read(&home.path().join(".ssh/id_ed25519")), Step::Write(&new, "written later"), Step::Read(&new)],
    );
    assert!(!got[0].contains(SECRET) && got[0].contains("Permission denied"), "{got:?}");
    assert!(got[1].contains("written later"), "{got:?}");
}

#[test]
fn a_credential_store_created_while_packs_serves_is_never_readable() {
    // No `~/.aws` nor `~/.config/gh` when the server starts: `aws configure`, `gh auth
    // login` make them between calls, and a file beside them makes HOME change too.
    let home = fake_home();
    let h = real(home.path());
    std::fs::remove_dir_all(h.join(".aws")).unwrap();
    let (aws, gh, later) = (h.join(".aws/credentials"), h.join(".config/gh/hosts.yml"), h.join("later.txt"));
    let got = serve_reader(
        &h,
        &[
            Step::Read(&h.join("notes.txt")),
            Step::Write(&aws, SECRET),
            Step::Write(&gh, SECRET),
            Step::Read(&aws),
            Step::Read(&gh),
            Step::Write(&later, "written later"),
            Step::Read(&later),
            Step::Read(&aws),
            Step::Read(&gh),
        ],
    );
    assert!(got[0].contains("my notes"), "{got:?}");
    for (i, answer) in got.iter().enumerate() {
        assert!(!answer.contains(SECRET), "call {i}: {got:?}");
    }
    for i in [1, 2, 4, 5] {
        assert!(got[i].contains("Permission denied"), "call {i}: {got:?}");
    }
    assert!(got[3].contains("written later"), "{got:?}");
}

#[test]
fn an_entry_read_once_then_moved_into_a_store_is_denied_at_the_next_call() {
    // A key downloaded to HOME, read, then moved where it belongs (`mv ~/credentials
    // ~/.aws/`, `mv ~/newkeys ~/.ssh/keys`): each had a rule of its own, on its inode, which
    // goes where it goes. The move out of HOME rebuilds the rules.
    let home = quiet_fake_home();
    let h = real(home.path());
    std::fs::write(h.join("credentials"), "downloaded").unwrap();
    std::fs::create_dir(h.join("newkeys")).unwrap();
    std::fs::write(h.join("newkeys/id"), "new key").unwrap();
    std::fs::write(h.join(".config/cfgfile"), "a setting").unwrap();
    let (aws, keys, gcloud) = (h.join(".aws/downloaded"), h.join(".ssh/keys"), h.join(".config/gcloud/token2"));
    let got = serve_reader(
        &h,
        &[
            Step::Read(&h.join("credentials")),
            Step::Read(&h.join("newkeys/id")),
            Step::Read(&h.join(".config/cfgfile")),
            Step::Move(&h.join("credentials"), &aws),
            Step::Write(&aws, SECRET),
            Step::Move(&h.join("newkeys"), &keys),
            Step::Write(&keys.join("id"), SECRET),
            Step::Move(&h.join(".config/cfgfile"), &gcloud),
            Step::Write(&gcloud, SECRET),
            Step::Read(&aws),
            Step::Read(&keys.join("id")),
            Step::Read(&gcloud),
        ],
    );
    assert!(got[0].contains("downloaded") && got[1].contains("new key") && got[2].contains("a setting"), "{got:?}");
    for (i, answer) in got.iter().enumerate() {
        assert!(!answer.contains(SECRET), "call {i}: {got:?}");
    }
    for i in [3, 4, 5] {
        assert!(got[i].contains("Permission denied"), "call {i}: {got:?}");
    }
}

#[test]
fn a_hard_link_made_while_packs_serves_opens_no_store_file() {
    // `ln ~/notes ~/.ssh/x`, then a key written to `~/.ssh/x`: the rule `~/notes` got is on
    // the file, and no directory on the way changed. The file's own watch hears it.
    // A store's file given a name in HOME while the server runs is a new entry there, and a
    // file with two names is granted by neither.
    let home = quiet_fake_home();
    let h = real(home.path());
    let (notes, x) = (h.join("notes.txt"), h.join(".ssh/x"));
    let (key, copy) = (h.join(".ssh/id_ed25519"), h.join("key-copy"));
    let got = serve_reader(
        &h,
        &[
            Step::Read(&notes),
            Step::HardLink(&notes, &x),
            Step::Write(&x, SECRET),
            Step::Read(&x),
            Step::Read(&notes),
            Step::HardLink(&key, &copy),
            Step::Read(&copy),
        ],
    );
    assert!(got[0].contains("my notes"), "{got:?}");
    for (i, answer) in got.iter().enumerate() {
        assert!(!answer.contains(SECRET), "call {i}: {got:?}");
    }
    for i in [1, 2, 3] {
        assert!(got[i].contains("Permission denied"), "call {i}: {got:?}");
    }
}

#[test]
fn a_store_moved_by_a_link_in_the_middle_of_a_chain_is_denied_at_the_next_call() {
    // `~/.config -> links/l1 -> data/cfg`: the link in the middle retargeted to `data/cfg2`
    // moves `~/.config/gh` there, where `gh` keeps a token. The way to it (`links`, where
    // neither `~/.config` nor `data/cfg` lies) is watched: the next call denies it.
    let scratch = tempfile::tempdir_in("/var/tmp").or_else(|_| tempfile::tempdir()).unwrap();
    let root = real(scratch.path());
    let home = root.join("home");
    for d in ["home", "links", "data/cfg/gh", "data/cfg2/gh"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("data/cfg/gh/hosts.yml"), SECRET).unwrap();
    std::fs::write(root.join("data/cfg2/gh/hosts.yml"), "cfg2 before").unwrap();
    std::os::unix::fs::symlink("../data/cfg", root.join("links/l1")).unwrap();
    std::os::unix::fs::symlink(root.join("links/l1"), home.join(".config")).unwrap();
    let (store, other) = (home.join(".config/gh/hosts.yml"), root.join("data/cfg2/gh/hosts.yml"));
    let got = serve_reader(
        &home,
        &[
            Step::Read(&store),
            Step::Read(&other),
            Step::Link(Path::new("../data/cfg2"), &root.join("links/l1")),
            Step::Write(&other, SECRET),
            Step::Read(&store),
            Step::Read(&other),
        ],
    );
    assert!(got[1].contains("cfg2 before"), "not a store yet: {got:?}");
    for (i, answer) in got.iter().enumerate() {
        assert!(!answer.contains(SECRET), "call {i}: {got:?}");
    }
    for i in [0, 2, 3] {
        assert!(got[i].contains("Permission denied"), "call {i}: {got:?}");
    }
}

#[test]
fn a_tool_without_the_network_reaches_no_abstract_unix_socket_outside_its_call() {
    crate::common::require("python3");
    // A local daemon listening on an abstract socket, and a tool that connects to it; the
    // tool's own abstract socket (a pair inside the call) still works.
    let name = format!("packs-test-abstract-{}", std::process::id());
    let (mut listener, _) = listen(
        "import socket, sys, time\nl = socket.socket(socket.AF_UNIX)\nl.bind('\\0' + sys.argv[1])\nl.listen()\nprint('up', flush=True)\ntime.sleep(60)",
        &name,
    );
    let script = "import socket, sys\n\
                  s = socket.socket(socket.AF_UNIX)\n\
                  try:\n    s.connect('\\0' + sys.argv[1]); print('connected')\n\
                  except OSError as e: print('refused', e.errno)\n\
                  own = socket.socket(socket.AF_UNIX); own.bind('\\0' + sys.argv[1] + '-own'); own.listen()\n\
                  c = socket.socket(socket.AF_UNIX); c.connect('\\0' + sys.argv[1] + '-own'); print('own ok')\n";
    let tool = |network: bool| {
        json!({"name": if network { "online" } else { "offline" }, "description": "d",
               "policy": {"tier": "system", "requires_network": network},
               "command": {"program": "python3", "args": ["-c", script, &name]}})
    };
    let packs = Packs::new().manifest("offline", tool(false)).manifest("online", tool(true));
    let support = Test::new().args(["sandbox", "--json"]).run().json();
    let scoped = support["landlock_abi"].as_i64().unwrap_or(0) >= 6;
    let offline = Test::new().packs_dir(&packs).args(["run", "offline"]).run();
    offline.success();
    if scoped {
        offline.stdout_eq("refused 1\nown ok\n");
    }
    Test::new().packs_dir(&packs).args(["run", "online"]).run().success().stdout_eq("connected\nown ok\n");
    listener.0.kill().unwrap();
}

/// A child killed when dropped (a failed assertion leaves no listener behind).
struct Guard(std::process::Child);

/// A python3 daemon running `script` with `arg` as its argument, once it printed `up`; and
/// what it prints after.
fn listen(script: &str, arg: impl AsRef<std::ffi::OsStr>) -> (Guard, std::io::BufReader<std::process::ChildStdout>) {
    let child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(arg)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut daemon = Guard(child);
    let mut lines = std::io::BufReader::new(daemon.0.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
    assert_eq!(line, "up\n");
    (daemon, lines)
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `read_only` tool that prints a file, or says it could not.
fn reader() -> Value {
    json!({"name": "reader", "description": "d", "parameters": {"file": {"type": "string"}},
           "policy": {"read_only": true},
           "command": {"program": "sh", "args": ["-c", "cat \"$0\" 2>/dev/null || echo refused", "{{file}}"]}})
}

#[test]
fn a_hard_link_to_a_store_s_file_on_the_way_opens_neither_name() {
    // A rule is on the file, not the name: granting `~/.config/netrc-old`, a second name of
    // `~/.netrc`, would make `~/.netrc` itself read. A file with two names is not granted on
    // its own, whichever of them is the store's.
    let home = fake_home();
    let h = real(home.path());
    std::fs::hard_link(h.join(".netrc"), h.join(".config/netrc-old")).unwrap();
    std::fs::hard_link(h.join(".ssh/id_ed25519"), h.join("key-copy")).unwrap();
    std::fs::write(h.join("shared"), "two names").unwrap();
    std::fs::hard_link(h.join("shared"), h.join(".config/fish/shared")).unwrap();
    let packs = Packs::new().manifest("reader", reader());
    let read = |file: &Path| {
        let out = Test::new()
            .packs_dir(packs.path())
            .env("HOME", &h)
            .args(["run", "reader", "--arg"])
            .arg(format!("file={}", file.display()))
            .run();
        out.success();
        out.stdout().trim_end().to_owned()
    };
    for store in [".netrc", ".config/netrc-old", ".ssh/id_ed25519", "key-copy"] {
        assert_eq!(read(&h.join(store)), "refused", "{store}");
    }
    // The cost: a hard-linked file directly in a directory on the way does not read by that
    // name; inside a directory granted whole it does (the rule is the directory's).
    assert_eq!(read(&h.join("shared")), "refused");
    assert_eq!(read(&h.join(".config/fish/shared")), "two names");
    assert_eq!(read(&h.join("notes.txt")), "my notes");
}

#[test]
fn a_store_file_s_temporary_lock_and_backup_names_do_not_read() {
    // npm writes `~/.npmrc` as `~/.npmrc.<hash>` renamed over it, git `~/.git-credentials`
    // under `~/.git-credentials.lock`: a rule on the temporary file would hold, in a call
    // started before the rename, on the store. An editor's backup is the store's contents.
    let home = fake_home();
    let h = real(home.path());
    for f in [".npmrc.1f3a9c", ".git-credentials.lock", ".netrc~", ".docker/config.json.bak"] {
        std::fs::write(h.join(f), SECRET).unwrap();
    }
    std::fs::create_dir(h.join(".ssh-old")).unwrap();
    std::fs::write(h.join(".ssh-old/readme"), "a directory of its own").unwrap();
    let packs = Packs::new().manifest("reader", reader());
    let read = |file: &Path| {
        let out = Test::new()
            .packs_dir(packs.path())
            .env("HOME", &h)
            .args(["run", "reader", "--arg"])
            .arg(format!("file={}", file.display()))
            .run();
        out.success();
        out.stdout().trim_end().to_owned()
    };
    for f in [".npmrc.1f3a9c", ".git-credentials.lock", ".netrc~", ".docker/config.json.bak"] {
        assert_eq!(read(&h.join(f)), "refused", "{f}");
    }
    // A directory store's look-alike is a directory of its own.
    assert_eq!(read(&h.join(".ssh-old/readme")), "a directory of its own");
}

#[test]
fn the_operator_extends_or_replaces_the_denied_list_and_an_agent_only_adds_to_it() {
    let home = fake_home();
    let h = real(home.path());
    let notes = h.join("notes.txt");
    let key = h.join(".ssh/id_ed25519");
    let packs = Packs::new().manifest("reader", reader());
    let read = |file: &Path, extra: &[&str], env: &[(&str, &str)]| {
        let mut t = Test::new().write("agents/careful/agent.toml", "deny_read = [\"~/notes.txt\"]\n");
        t = t.packs_dir(packs.path()).env("HOME", &h);
        for (k, v) in env {
            t = t.env(k, *v);
        }
        let out = t.args(extra).args(["run", "reader", "--arg"]).arg(format!("file={}", file.display())).run();
        out.success();
        out.stdout().trim_end().to_owned()
    };
    // By default: the note reads, the key does not.
    assert_eq!(read(&notes, &[], &[]), "my notes");
    assert_eq!(read(&key, &[], &[]), "refused");
    // Extended by a flag (`~/` is HOME), by the environment, by an agent: the note is
    // refused too, and the key still is.
    let list = format!("/nonexistent:{}", notes.display());
    let note_denied = [
        (&["--deny-read", "~/notes.txt"][..], &[][..]),
        (&[], &[("PACKS_DENY_READ", list.as_str())][..]),
        (&["--agent", "careful"], &[]),
    ];
    for (extra, env) in note_denied {
        assert_eq!(read(&notes, extra, env), "refused", "{extra:?} {env:?}");
        assert_eq!(read(&key, extra, env), "refused", "{extra:?} {env:?}");
    }
    // Replaced by the operator: the key reads, only the paths given are refused.
    let replaced = ["--no-default-deny-read", "--deny-read", "~/notes.txt"];
    assert_eq!(read(&key, &replaced, &[]), SECRET);
    assert_eq!(read(&notes, &replaced, &[]), "refused");
    assert_eq!(read(&key, &[], &[("PACKS_NO_DEFAULT_DENY_READ", "1")]), SECRET);
    // An agent under a replaced list still adds its own.
    assert_eq!(read(&notes, &["--no-default-deny-read", "--agent", "careful"], &[]), "refused");
    // The dry run says which list holds.
    let dry = |extra: &[&str]| {
        let out =
            Test::new().packs_dir(packs.path()).env("HOME", &h).args(extra).args(["run", "reader", "--dry-run"]).run();
        out.success();
        out.stdout().to_owned()
    };
    assert!(dry(&[]).contains("; credential stores unreadable;"), "{}", dry(&[]));
    assert!(
        dry(&replaced).contains("; only the --deny-read paths unreadable (no default list);"),
        "{}",
        dry(&replaced)
    );
    let none = dry(&["--no-default-deny-read"]);
    assert!(none.contains("; reads not restricted but for packs' own secrets (--no-default-deny-read);"), "{none}");
}

#[test]
fn packs_sandbox_lists_what_the_read_rules_deny_as_they_deny_it() {
    // The stores under HOME (a link kept as itself and followed to where it leads), the
    // operator's, the agent's: absolute and resolved, as the rules are built from them.
    let home = fake_home();
    let h = real(home.path());
    std::fs::create_dir(h.join("dotfiles")).unwrap();
    std::os::unix::fs::symlink(h.join("dotfiles"), h.join(".kube")).unwrap();
    let agent = "agents/careful/agent.toml";
    let test = || {
        Test::new().write(agent, "deny_read = [\"~/agent-notes\"]\n").env("HOME", &h).args([
            "--deny-read",
            "~/notes.txt",
            "--agent",
            "careful",
            "sandbox",
        ])
    };
    let out = test().arg("--json").run();
    out.success();
    let listed: Vec<String> =
        out.json()["reads_denied"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_owned()).collect();
    for path in [".ssh", ".aws", ".netrc", ".pgpass", "dotfiles", ".kube", "notes.txt", "agent-notes"] {
        assert!(listed.contains(&h.join(path).display().to_string()), "{path}: {listed:?}");
    }
    assert!(listed.iter().all(|p| p.starts_with('/')), "{listed:?}");
    // The text names each on a line of its own, under how many there are.
    let text = test().run();
    text.success();
    text.stdout_contains(&format!("reads denied to read_only and workspace tools ({}):\n", listed.len()));
    text.stdout_contains(&format!("\n  {}\n", h.join(".ssh").display()));
    // A name that would move the terminal's cursor or colour the text is shown escaped, and
    // one with a space quoted, as bash would take them.
    let out = Test::new()
        .env("HOME", &h)
        .args(["--deny-read", "~/a\u{1b}[2Jb", "--deny-read", "~/my notes", "sandbox"])
        .run();
    out.success();
    out.stdout_contains(&format!("\n  $'{}/a\\x1b[2Jb'\n", h.display()));
    out.stdout_contains(&format!("\n  '{}/my notes'\n", h.display()));
    assert!(!out.stdout().contains('\u{1b}'), "{}", out.stdout());
    // A name that is not UTF-8 shows its stray byte as bash reads it back, not as U+FFFD (two
    // names would look the same); the JSON has the text with U+FFFD.
    let odd = std::ffi::OsStr::from_bytes(b"~/ws\xff");
    let out = Test::new().env("HOME", &h).arg("--deny-read").arg(odd).arg("sandbox").run();
    out.success();
    out.stdout_contains(&format!("\n  $'{}/ws\\xff'\n", h.display()));
    let out = Test::new().env("HOME", &h).arg("--deny-read").arg(odd).args(["sandbox", "--json"]).run();
    out.success();
    assert!(out.json()["reads_denied"].as_array().unwrap().contains(&json!(format!("{}/ws\u{fffd}", h.display()))));
}

#[test]
fn an_agent_cannot_drop_the_default_list_and_names_only_absolute_paths() {
    let packs = Packs::new().manifest("reader", reader());
    let run = |toml: &str| {
        Test::new()
            .write("agents/loose/agent.toml", toml)
            .packs_dir(packs.path())
            .args(["--agent", "loose", "run", "reader", "--dry-run"])
            .run()
    };
    run("no_default_deny_read = true\n").code(1).stderr_contains("unknown field `no_default_deny_read`");
    run("deny_read = [\"notes.txt\"]\n")
        .code(1)
        .stderr_contains("agent.toml: `deny_read`: `notes.txt` is neither an absolute path nor under `~/`");
}

#[test]
fn packs_session_shows_the_denied_list_and_where_it_came_from() {
    let home = fake_home();
    let session = |extra: &[&str], env: &[(&str, &str)]| {
        let mut t =
            Test::new().write("agents/careful/agent.toml", "deny_read = [\"/srv/secrets\"]\n").env("HOME", home.path());
        for (k, v) in env {
            t = t.env(k, *v);
        }
        let out = t.args(extra).arg("session").run();
        out.success();
        out.stdout().lines().filter(|l| l.contains("deny-read")).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(session(&[], &[]), "deny-read: the credential stores (default)\nno-default-deny-read: no (default)");
    assert_eq!(
        session(&["--deny-read", "/a", "--agent", "careful"], &[]),
        "deny-read: the credential stores, /a, /srv/secrets (from --deny-read)\nno-default-deny-read: no (default)"
    );
    assert_eq!(
        session(&["--agent", "careful"], &[("PACKS_NO_DEFAULT_DENY_READ", "yes")]),
        "deny-read: /srv/secrets (from agent careful's agent.toml)\nno-default-deny-read: yes (from PACKS_NO_DEFAULT_DENY_READ)"
    );
    assert_eq!(
        session(&[], &[("PACKS_DENY_READ", "/a:/b")]),
        "deny-read: the credential stores, /a, /b (from PACKS_DENY_READ)\nno-default-deny-read: no (default)"
    );
    // A command that runs no tool does not take it.
    Test::new().args(["--deny-read", "/a", "lint"]).run().code(1).stderr_contains("does not take --deny-read");
}

#[test]
fn a_tool_stating_unix_sockets_false_reaches_no_local_daemon_and_keeps_its_socketpairs() {
    crate::common::require("python3");
    // A local daemon listening on a pathname socket.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("daemon.sock");
    let (mut listener, _) = listen(
        "import socket, sys, time\nl = socket.socket(socket.AF_UNIX)\nl.bind(sys.argv[1])\nl.listen()\nprint('up', flush=True)\ntime.sleep(60)",
        &path,
    );
    let script = "import socket, sys\n\
                  try:\n    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('connected')\n\
                  except OSError as e: print('refused', e.errno)\n\
                  a, b = socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())\n";
    let tool = |name: &str, policy: Value| {
        json!({"name": name, "description": "d", "policy": policy,
               "command": {"program": "python3", "args": ["-c", script, path.display().to_string()]}})
    };
    let packs = Packs::new()
        .manifest("closed", tool("closed", json!({"read_only": true, "unix_sockets": false})))
        .manifest(
            "closed_online",
            tool("closed_online", json!({"tier": "system", "requires_network": true, "unix_sockets": false})),
        )
        .manifest("open", tool("open", json!({"read_only": true})));
    for name in ["closed", "closed_online"] {
        Test::new().packs_dir(packs.path()).args(["run", name]).run().success().stdout_eq("refused 1\npair\n");
    }
    Test::new().packs_dir(packs.path()).args(["run", "open"]).run().success().stdout_eq("connected\npair\n");
    // The dry run and the manual page say so; without seccomp, enforce would refuse it.
    Test::new()
        .packs_dir(packs.path())
        .args(["run", "closed", "--dry-run"])
        .run()
        .success()
        .stdout_contains("; no network, no Unix socket;");
    Test::new()
        .packs_dir(packs.path())
        .args(["help", "closed_online"])
        .run()
        .success()
        .stdout_contains("unix sockets: no\n")
        .stdout_contains("enforced by the kernel: no Unix socket;");
    listener.0.kill().unwrap();
}

#[test]
fn a_tool_stating_readable_reads_only_there_and_what_a_program_needs() {
    let home = fake_home();
    let h = real(home.path());
    let ws = tempfile::tempdir().unwrap();
    let ws = real(ws.path());
    std::fs::write(ws.join("mine.txt"), "in the workspace").unwrap();
    std::fs::create_dir_all(h.join("notes")).unwrap();
    std::fs::write(h.join("notes/todo"), "a note").unwrap();
    let script = r#"for f in "$@"; do if out=$(cat "$f" 2>/dev/null); then echo "GOT $f: $out"; else echo "refused $f"; fi; done"#;
    let tool = |name: &str, readable: Value| {
        json!({"name": name, "description": "d", "parameters": {"files": {"type": "array", "items": {"type": "string"}}},
               "policy": {"read_only": true, "readable": readable},
               "command": {"program": "sh", "args": ["-c", script, "sh", "{{files}}"]}})
    };
    let packs = Packs::new()
        .manifest("narrow", tool("narrow", json!(["{{workspace}}"])))
        .manifest("notes", tool("notes", json!(["{{env.HOME}}/notes", "relative/ignored"])));
    let files = [
        ws.join("mine.txt"),
        PathBuf::from("/etc/hostname"),
        h.join("notes.txt"),
        h.join("notes/todo"),
        PathBuf::from("/etc/passwd"),
    ];
    let run = |name: &str| {
        let mut t = Test::new().packs_dir(packs.path()).env("HOME", &h).current_dir(&ws).args(["run", name]);
        t = t.arg(json!({"files": files}).to_string());
        let out = t.run();
        out.success();
        out.stdout().to_owned()
    };
    let narrow = run("narrow");
    let shown = |f: &Path| f.display().to_string();
    for (file, got) in [(&files[0], true), (&files[1], false), (&files[2], false), (&files[3], false)] {
        let want = if got { format!("GOT {}: ", shown(file)) } else { format!("refused {}\n", shown(file)) };
        assert!(narrow.contains(&want), "{want}: {narrow}");
    }
    // What every program needs still reads (the user database, the programs themselves).
    assert!(narrow.contains("GOT /etc/passwd: root:"), "{narrow}");
    let notes = run("notes");
    assert!(notes.contains(&format!("GOT {}: a note", shown(&files[3]))), "{notes}");
    assert!(notes.contains(&format!("refused {}", shown(&files[0]))), "{notes}");
    // The dry run names the places.
    let dry =
        Test::new().packs_dir(packs.path()).env("HOME", &h).current_dir(&ws).args(["run", "narrow", "--dry-run"]).run();
    dry.success().stdout_contains(&format!("; reads only {}, ", ws.display()));
}

#[test]
fn a_readable_place_may_not_read_a_calls_values_or_a_secret() {
    let tool = |readable: &str| {
        json!({"name": "bad", "description": "d", "parameters": {"dir": {"type": "string"}},
               "policy": {"readable": [readable]}, "command": "ls {{dir}}"})
    };
    for (readable, says) in [
        ("{{dir}}", "a readable place may read only `{{env.NAME}}` and `{{workspace}}`, not the call's `{{dir}}`"),
        ("{{secret.KEY}}", "not `{{secret.KEY}}`"),
    ] {
        let packs = Packs::new().manifest("bad", tool(readable));
        Test::new()
            .packs_dir(packs.path())
            .args(["run", "bad", "--dry-run", "--arg", "dir=x"])
            .run()
            .code(1)
            .stderr_contains(says)
            .stderr_contains("error[invalid-template]: ")
            .stderr_contains("/bad.tool.json:");
    }
}

#[test]
fn the_audit_line_says_how_reads_were_confined() {
    let tool =
        |name: &str, policy: Value| json!({"name": name, "description": "d", "policy": policy, "command": "true"});
    let packs = Packs::new()
        .manifest("plain", tool("plain", json!({"read_only": true})))
        .manifest("narrow", tool("narrow", json!({"read_only": true, "readable": []})))
        .manifest("sys", tool("sys", json!({"tier": "system"})));
    let t = Test::new();
    let log = t.path().join("audit.jsonl");
    for name in ["plain", "narrow", "sys"] {
        Test::new()
            .current_dir(t.path())
            .packs_dir(packs.path())
            .args(["--log", "audit.jsonl", "run", name])
            .run()
            .success();
    }
    Test::new()
        .current_dir(t.path())
        .packs_dir(packs.path())
        .args(["--log", "audit.jsonl", "--sandbox", "off", "run", "plain"])
        .run()
        .success();
    let reads: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["reads"].as_str().unwrap_or("absent").to_owned())
        .collect();
    assert_eq!(reads, ["credentials-denied", "narrowed", "unconfined", "unconfined"]);
}

#[test]
fn a_tool_that_may_write_a_stores_parent_cannot_move_it_out_of_the_list() {
    // A workspace tool whose workspace is HOME, and one that may write `~/.cargo`: each
    // tries to rename a credential store (or a file of one) to a name not on the list, and a
    // second run reads it there.
    let home = fake_home();
    let h = real(home.path());
    std::fs::create_dir_all(h.join(".cargo")).unwrap();
    std::fs::write(h.join(".cargo/credentials.toml"), SECRET).unwrap();
    let mover = |name: &str, policy: Value, script: &str| {
        json!({"name": name, "description": "d", "policy": policy,
               "command": {"program": "sh", "args": ["-c", script, "sh"]}})
    };
    let packs = Packs::new()
        .manifest(
            "in_home",
            mover(
                "in_home",
                json!({"tier": "workspace"}),
                r#"mv "$HOME/.ssh" "$HOME/.cache-x" 2>/dev/null || echo refused dir; rm -f "$HOME/.netrc" 2>/dev/null; ln -sf /etc/hostname "$HOME/.netrc" 2>/dev/null; cat "$HOME/.cache-x/id_ed25519" 2>/dev/null; echo done"#,
            ),
        )
        .manifest(
            "cargo",
            mover(
                "cargo",
                json!({"read_only": true, "writable": ["{{env.HOME}}/.cargo"]}),
                r#"mv "$HOME/.cargo/credentials.toml" "$HOME/.cargo/moved" 2>/dev/null || echo refused file; cat "$HOME/.cargo/moved" 2>/dev/null; echo done"#,
            ),
        );
    for name in ["in_home", "cargo", "in_home", "cargo"] {
        let out = Test::new().packs_dir(&packs).env("HOME", &h).arg("--workspace").arg(&h).args(["run", name]).run();
        out.success();
        assert!(!out.stdout().contains(SECRET), "{name}: {}", out.stdout());
        assert!(out.stdout().contains("refused "), "{name}: {}", out.stdout());
    }
    assert_eq!(std::fs::read_to_string(h.join(".ssh/id_ed25519")).unwrap(), SECRET);
    assert_eq!(std::fs::read_to_string(h.join(".cargo/credentials.toml")).unwrap(), SECRET);
    assert_eq!(std::fs::read_to_string(h.join(".netrc")).unwrap(), SECRET, "replaced");
    assert!(!h.join(".cache-x").exists() && !h.join(".cargo/moved").exists());
}

#[test]
fn a_tool_that_may_write_a_links_directory_cannot_retarget_a_store_out_of_the_list() {
    // Dotfiles kept in a checkout that is the workspace: `~/.aws -> dotfiles/links/aws`, and
    // `dotfiles/links/aws -> ../private/aws`. The link in the middle is the workspace's own:
    // retargeted, `~/.aws` would resolve elsewhere at the next run, and
    // `dotfiles/private/aws` would read.
    let scratch = tempfile::tempdir().unwrap();
    let root = real(scratch.path());
    let (home, ws) = (root.join("home"), root.join("dotfiles"));
    for d in ["home", "dotfiles/links", "dotfiles/private/aws"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(ws.join("private/aws/credentials"), SECRET).unwrap();
    std::os::unix::fs::symlink("../dotfiles/links/aws", home.join(".aws")).unwrap();
    std::os::unix::fs::symlink("../private/aws", ws.join("links/aws")).unwrap();
    let packs = Packs::new().manifest(
        "retarget",
        json!({"name": "retarget", "description": "d", "policy": {"tier": "workspace"},
               "command": {"program": "sh", "args": ["-c",
                   "ln -sfn /nonexistent links/aws 2>/dev/null || echo refused; cat private/aws/credentials 2>/dev/null; echo done"]}}),
    );
    for _ in 0..2 {
        let out = Test::new()
            .packs_dir(&packs)
            .env("HOME", &home)
            .arg("--workspace")
            .arg(&ws)
            .args(["run", "retarget"])
            .run();
        out.success();
        assert_eq!(out.stdout(), "refused\ndone\n");
    }
    assert_eq!(std::fs::read_link(ws.join("links/aws")).unwrap(), Path::new("../private/aws"));
}

#[test]
fn a_tool_stating_unix_sockets_false_reaches_no_datagram_socket_through_a_socketpair() {
    crate::common::require("python3");
    // A local daemon reading datagrams on a pathname socket (`/dev/log`, journald's).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.sock");
    let (mut listener, mut lines) = listen(
        "import socket, sys\nl = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\nl.bind(sys.argv[1])\nprint('up', flush=True)\nwhile True: print(l.recv(100).decode(), flush=True)",
        &path,
    );
    let script = "import socket, sys\n\
                  for kind in ('SOCK_DGRAM', 'SOCK_RAW', 'SOCK_SEQPACKET'):\n\
                  \x20   try:\n\
                  \x20       a, b = socket.socketpair(socket.AF_UNIX, getattr(socket, kind) | socket.SOCK_CLOEXEC)\n\
                  \x20       a.sendto(b'sent through ' + kind.encode(), sys.argv[1]); print('sent', kind)\n\
                  \x20   except OSError as e: print('refused', kind, e.errno)\n\
                  a, b = socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())\n";
    let packs = Packs::new().manifest(
        "closed",
        json!({"name": "closed", "description": "d", "policy": {"read_only": true, "unix_sockets": false},
               "command": {"program": "python3", "args": ["-c", script, path.display().to_string()]}}),
    );
    Test::new()
        .packs_dir(packs.path())
        .args(["run", "closed"])
        .run()
        .success()
        .stdout_eq("refused SOCK_DGRAM 1\nrefused SOCK_RAW 1\nrefused SOCK_SEQPACKET 1\npair\n");
    listener.0.kill().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut lines, &mut rest).unwrap();
    assert!(!rest.contains("sent through"), "{rest}");
}

#[test]
#[ignore = "needs root (runs packs as a user without a passwd entry)"]
fn without_any_home_reads_are_said_unconfined_and_enforce_refuses() {
    // A user with no entry in /etc/passwd, HOME unset, empty or relative: no credential store
    // is known, so nothing may claim them unreadable.
    let packs = Packs::new().manifest("reader", reader());
    let copy = crate::common::ForOtherUser::new(&packs);
    for home in [None, Some(""), Some("relative")] {
        let run = |args: &[&str]| {
            let mut cmd = copy.command(&[]);
            match home {
                Some(h) => cmd.env("HOME", h),
                None => cmd.env_remove("HOME"),
            };
            cmd.args(args).output().expect("setpriv (util-linux)")
        };
        let out = run(&["run", "reader", "--arg", "file=/etc/hostname"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{home:?}: {stderr}");
        assert!(stderr.contains("keeping credential stores unreadable needs a home directory"), "{home:?}: {stderr}");
        let out = run(&["--sandbox", "best-effort", "run", "reader", "--dry-run"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{home:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("credential stores readable (no home directory)"), "{home:?}: {stdout}");
        assert!(!stdout.contains("credential stores unreadable;"), "{home:?}: {stdout}");
        let mut sandbox = std::process::Command::new("setpriv");
        let uid = format!("--reuid={}", crate::common::OTHER_UID);
        let gid = format!("--regid={}", crate::common::OTHER_UID);
        sandbox.args([uid.as_str(), gid.as_str(), "--clear-groups", "--"]).arg(&copy.bin).arg("sandbox");
        match home {
            Some(h) => sandbox.env("HOME", h),
            None => sandbox.env_remove("HOME"),
        };
        let out = sandbox.current_dir(copy.place.path()).output().expect("setpriv (util-linux)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("credential stores unreadable: refused (no home directory: HOME is unset or relative"),
            "{home:?}: {stdout}"
        );
        // The operator who names the paths themselves is not refused.
        let out =
            run(&["--no-default-deny-read", "--deny-read", "/srv", "run", "reader", "--arg", "file=/etc/hostname"]);
        assert!(out.status.success(), "{home:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn an_unset_home_falls_back_to_the_passwd_entry() {
    // The user running the suite has a passwd entry: with HOME unset or relative, the
    // credential stores are still named (under that entry's home) and said unreadable.
    let packs = Packs::new().manifest("reader", reader());
    for home in [None, Some("relative")] {
        let mut t = Test::new().packs_dir(&packs);
        t = match home {
            Some(h) => t.env("HOME", h),
            None => t.env_remove("HOME"),
        };
        t.args(["run", "reader", "--dry-run"]).run().success().stdout_contains("; credential stores unreadable;");
    }
}

#[test]
fn a_path_entry_above_or_linking_to_home_opens_nothing_to_a_narrowed_tool() {
    let home = fake_home();
    let h = real(home.path());
    let up = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&h, up.path().join("to-home")).unwrap();
    let packs = Packs::new().manifest(
        "narrow",
        json!({"name": "narrow", "description": "d", "parameters": {"file": {"type": "string"}},
               "policy": {"read_only": true, "readable": []},
               "command": {"program": "sh", "args": ["-c", "cat \"$0\" 2>/dev/null || echo refused", "{{file}}"]}}),
    );
    for entry in [h.join(".."), up.path().join("to-home"), h.join(".ssh")] {
        let path = format!("/usr/bin:/bin:{}", entry.display());
        let out = Test::new()
            .packs_dir(&packs)
            .env("HOME", &h)
            .env("PATH", &path)
            .args(["run", "narrow", "--arg"])
            .arg(format!("file={}", h.join("notes.txt").display()))
            .run();
        out.success().stdout_eq("refused\n");
    }
}

#[test]
fn packs_sandbox_lists_no_denied_reads_when_the_sandbox_is_off() {
    // A call under `--sandbox off` reads every listed path: the list does not claim otherwise.
    let out = Test::new().args(["--sandbox", "off", "sandbox", "--json"]).run();
    out.success();
    assert_eq!(out.json()["reads_denied"], serde_json::json!([]), "{}", out.json());
    let text = Test::new().args(["--sandbox", "off", "sandbox"]).run();
    text.success().stdout_contains("reads denied to read_only and workspace tools: none, not enforced (off)\n");
}

#[test]
fn packs_sandbox_and_packs_session_escape_the_denied_paths_they_print() {
    // An agent.toml (one in a checkout) names a path with a newline and a terminal escape: the
    // text shows one line per path, and no raw control character.
    for command in ["sandbox", "session"] {
        let out = Test::new()
            .write("agents/evil/agent.toml", "deny_read = [\"/tmp/x\\u001b]0;owned\\u0007\\n  /forged/line\"]\n")
            .args(["--agent", "evil", command])
            .run();
        out.success();
        let stdout = out.stdout().to_owned();
        assert!(!stdout.contains('\u{1b}') && !stdout.contains('\u{7}'), "{command}: {stdout:?}");
        assert!(!stdout.contains("\n  /forged/line"), "{command}: {stdout:?}");
        assert!(stdout.contains(r"\x1b]0;owned\x07\n  /forged/line"), "{command}: {stdout:?}");
    }
}
