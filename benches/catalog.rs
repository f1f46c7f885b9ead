//! Benchmarks of the catalog and of `packs run` overhead.
//!
//! `cargo bench --bench catalog` — figures and targets are in docs/PERFORMANCE.md.

use std::hint::black_box;
use std::path::Path;
use std::process::{Command, Stdio};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use packs::{Catalog, Context, SearchPath};

/// A realistic manifest: four parameters, a group, a block, policy and output.
fn manifest(i: usize) -> String {
    format!(
        r#"{{
  "name": "tool_{i}",
  "description": "Benchmark tool number {i}: search files for a pattern",
  "version": "1.0.0",
  "modes": ["Global"],
  "parameters": {{
    "pattern": {{ "type": "string", "required": true, "description": "What to look for" }},
    "path": {{ "type": "string", "default": ".", "format": "path", "description": "Where" }},
    "ignore_case": {{ "type": "boolean", "default": false }},
    "max_count": {{ "type": "integer", "minimum": 1 }}
  }},
  "command": {{
    "program": "grep",
    "args": ["-rn", "{{{{#if ignore_case}}}}-i{{{{/if}}}}", ["--max-count", "{{{{max_count}}}}"], "-e", "{{{{pattern}}}}", "--", "{{{{path}}}}"]
  }},
  "policy": {{ "read_only": true, "allowed_exit_codes": [0, 1], "timeout_secs": 10 }},
  "output": {{ "format": "text", "max_chars": 500 }}
}}"#
    )
}

fn pack_dir(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..n {
        std::fs::write(dir.path().join(format!("tool_{i}.tool.json")), manifest(i)).expect("write");
    }
    dir
}

fn trivial_pack(dir: &Path) {
    std::fs::write(
        dir.join("noop.tool.json"),
        r#"{"name": "noop", "description": "Do nothing", "command": {"program": "true", "args": []}}"#,
    )
    .expect("write");
}

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("catalog");
    for n in [10, 100, 1000] {
        let dir = pack_dir(n);
        let path = SearchPath::dirs([dir.path()]);
        group.bench_with_input(BenchmarkId::new("load", n), &path, |b, path| {
            b.iter(|| {
                let catalog = Catalog::load(path);
                assert_eq!(catalog.len(), n);
                black_box(catalog)
            })
        });
        group.bench_with_input(BenchmarkId::new("load_and_describe_all", n), &path, |b, path| {
            b.iter(|| {
                let catalog = Catalog::load(path);
                let all: Vec<_> = catalog.tools().map(|t| t.describe()).collect();
                black_box(serde_json::to_string(&all).expect("serialize"))
            })
        });
        let catalog = Catalog::load(&path);
        group.bench_with_input(BenchmarkId::new("describe_all", n), &catalog, |b, catalog| {
            b.iter(|| {
                let all: Vec<_> = catalog.tools().map(|t| t.describe()).collect();
                black_box(serde_json::to_string(&all).expect("serialize"))
            })
        });
    }
    group.finish();
}

fn run_overhead(c: &mut Criterion) {
    let mut group = c.benchmark_group("run");
    group.sample_size(60);
    let dir = pack_dir(99);
    trivial_pack(dir.path());
    let packs = env!("CARGO_BIN_EXE_packs");
    let status = |cmd: &mut Command| {
        let s = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().expect("spawn");
        assert!(s.success());
    };
    group.bench_function("direct_true", |b| b.iter(|| status(&mut Command::new("true"))));
    let cache = tempfile::tempdir().expect("tempdir");
    let run_noop = |dir: &Path, cache: &Path| {
        let mut cmd = Command::new(packs);
        cmd.env("PACKS_CACHE_DIR", cache).arg("--packs").arg(dir).args(["run", "noop"]);
        cmd
    };
    group
        .bench_function("packs_run_true_100_manifests", |b| b.iter(|| status(&mut run_noop(dir.path(), cache.path()))));

    // The same directory with one executable tool (a shell script): its describe
    // is either asked on every run (no cache) or kept in the describe cache.
    let with_exe = pack_dir(99);
    trivial_pack(with_exe.path());
    let exe = with_exe.path().join("shell_tool");
    let describe = r#"{"name": "shell_tool", "description": "d", "parameters": {"type": "object", "properties": {}}}"#;
    std::fs::write(&exe, format!("#!/bin/sh\necho '{describe}'\n")).expect("write");
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    // The cache keeps nothing for a file changed in the last 2 s.
    std::thread::sleep(packs::DescribeCache::SETTLE + std::time::Duration::from_millis(100));
    group.bench_function("packs_run_true_100_manifests_1_executable_uncached", |b| {
        b.iter(|| status(&mut run_noop(with_exe.path(), Path::new(""))))
    });
    group.bench_function("packs_run_true_100_manifests_1_executable_cached", |b| {
        b.iter(|| status(&mut run_noop(with_exe.path(), cache.path())))
    });
    // Once more outside the measurements, so the check holds when a filter skipped them.
    status(&mut run_noop(with_exe.path(), cache.path()));
    assert!(std::fs::read_dir(cache.path()).expect("cache dir").count() == 1, "the describe was cached");
    let catalog = Catalog::load(&SearchPath::dirs([dir.path()]));
    group.bench_function("library_dispatch_true", |b| {
        b.iter(|| {
            let r = packs::dispatch(&catalog, "noop", serde_json::Value::Null, &Context::new(), &packs::DenyAll)
                .expect("dispatch");
            assert!(r.ok);
        })
    });
    group.finish();
}

fn lint(c: &mut Criterion) {
    let mut group = c.benchmark_group("lint");
    group.sample_size(20);
    for n in [100, 1000] {
        let dir = pack_dir(n);
        let paths = vec![dir.path().to_owned()];
        group.bench_with_input(BenchmarkId::new("pack_dir", n), &paths, |b, paths| {
            b.iter(|| {
                let report = packs::lint::lint(paths, &packs::lint::Options::default()).expect("lint");
                assert_eq!(report.tools, n);
                black_box(report)
            })
        });
    }
    group.finish();
}

/// A running `packs serve` with a request counter.
struct Server {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    next: u64,
}

impl Server {
    fn start(dir: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_packs"))
            .arg("--packs")
            .arg(dir)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("packs serve");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        Self { child, stdin, stdout, next: 0 }
    }

    /// Send `n` calls of the trivial tool at once, then wait for all `n` answers.
    fn calls(&mut self, n: u64) {
        use std::io::{BufRead, Write};
        for _ in 0..n {
            self.next += 1;
            let req = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"tools/call\",\"params\":{{\"name\":\"noop\",\"arguments\":{{}}}}}}\n",
                self.next
            );
            self.stdin.write_all(req.as_bytes()).expect("write");
        }
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        let mut answered = 0;
        while answered < n {
            line.clear();
            self.stdout.read_line(&mut line).expect("read");
            assert!(line.contains("\"isError\":false"), "{line}");
            answered += 1;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(c: &mut Criterion) {
    let mut group = c.benchmark_group("serve");
    group.sample_size(60);
    let dir = pack_dir(99);
    trivial_pack(dir.path());
    group.bench_function("direct_true", |b| {
        b.iter(|| {
            let s = Command::new("true").stdin(Stdio::null()).status().expect("spawn");
            assert!(s.success());
        })
    });
    let mut server = Server::start(dir.path());
    server.calls(1); // warm up: the first call compiles the tool's validator
    group.bench_function("tools_call_1_caller", |b| b.iter(|| server.calls(1)));
    // 8 callers in flight at once: time per call.
    group.bench_function("tools_call_8_in_flight_per_call", |b| {
        b.iter_custom(|iters| {
            let start = std::time::Instant::now();
            for _ in 0..iters {
                server.calls(8);
            }
            start.elapsed() / 8
        })
    });
    group.finish();
}

criterion_group!(benches, load, run_overhead, lint, serve);
criterion_main!(benches);
