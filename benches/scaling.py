#!/usr/bin/env python3
"""How packs' whole-process costs scale with the number of manifests (issue 15's targets),
each against its baseline measured in the same run: `/bin/echo` (a process), `du -s` of the
directory (reading it and a `stat` per file), `cat` of the same files (reading them), and
packs' own commands.

    cargo build --release && python3 benches/scaling.py [--sizes 10,100,1000,10000] [--rounds 3] [--executables 100]
        [--parameters 1000,2000,4000]
    cargo build-dist   # optional: adds the dist build's `run` (PACKS_DIST_BIN, docs/DEPLOY.md)

Commands alternate within a round; each is repeated for about a second (at least 3 times)
and the median of the rounds' means is printed, with the peak memory of `packs catalog`.
`catalog` is warm (its listing snapshot current); `catalog cold` runs without a cache
directory, so it reads and loads every manifest. A second table compares a directory of
`--describe` executables with one of manifests (`prompt` loads every tool without a
snapshot, so it shows discovery with the describe cache warm; `run` calls the same script
with the same schema, policy and argument, once as an executable and once as a manifest
tool).

Another table times `packs serve` over stdio from its spawn to its answer to the first
`tools/list` (after `initialize`), warm (its listing snapshot current) and cold (no cache
directory), against `catalog` warm and cold of the same round. Another compares `run noop`
of the release build with the dist build (`cargo build-dist`), when that is built, and
`/bin/echo`. The last lints one manifest of many parameters, each one a warning (issue 29:
lint is linear in a manifest's size and its diagnostics): the time per parameter stays flat.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

PACKS = os.environ.get("PACKS_BIN", str(Path(__file__).resolve().parent.parent / "target/release/packs"))
DIST = os.environ.get("PACKS_DIST_BIN",
                      str(Path(__file__).resolve().parent.parent / "target/x86_64-unknown-linux-gnu/dist/packs"))

FIRST_LIST = "".join(json.dumps(m) + "\n" for m in [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
]).encode()


def manifest(i):
    return f"""{{
  "name": "tool_{i}",
  "description": "Benchmark tool number {i}: search files for a pattern",
  "version": "1.0.0",
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
}}
"""


def pack_dir(root, n):
    d = Path(root, f"m{n}")
    d.mkdir()
    for i in range(n - 1):
        Path(d, f"tool_{i}.tool.json").write_text(manifest(i))
    Path(d, "noop.tool.json").write_text('{"name": "noop", "description": "Do nothing", "command": {"program": "true", "args": []}}')
    return d


def exe_dir(root, n):
    """A pack directory of n executables that answer `--describe` (shell scripts)."""
    d = Path(root, f"x{n}")
    d.mkdir()
    for i in range(n):
        describe = ('{"name": "exe_%d", "description": "Executable tool %d", "parameters": {"type": "object", '
                    '"properties": {"text": {"type": "string"}}}, "policy": {"read_only": true}}' % (i, i))
        f = Path(d, f"exe_{i}")
        f.write_text(f"#!/bin/sh\nif [ \"$1\" = --describe ]; then echo '{describe}'; exit 0; fi\necho ok\n")
        f.chmod(0o755)
    return d


def mean_ms(argv, env, budget=1.0, least=3):
    times = []
    start = time.perf_counter()
    while len(times) < least or time.perf_counter() - start < budget:
        t = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t)
    return statistics.mean(times) * 1000


def first_list_s(argv, env):
    """Seconds from spawning `packs serve` to its answer to the first `tools/list`."""
    start = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(FIRST_LIST)
    p.stdin.flush()
    for line in p.stdout:
        if json.loads(line).get("id") == 2:
            break
    took = time.perf_counter() - start
    p.stdin.close()  # the server ends with its input (after its load in the background)
    p.stdout.read()
    p.wait()
    return took


def serve_mean_ms(argv, env, budget=1.0, least=3):
    times = []
    start = time.perf_counter()
    while len(times) < least or time.perf_counter() - start < budget:
        times.append(first_list_s(argv, env))
    return statistics.mean(times) * 1000


def peak_rss_mb(argv, env):
    """Peak resident memory of one run, from a fresh child that only runs it."""
    code = ("import resource,subprocess,sys;subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run(["python3", "-c", code, *argv], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout) / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,100,1000,10000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--executables", type=int, default=100)
    ap.add_argument("--parameters", default="1000,2000,4000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = tempfile.mkdtemp(prefix="packs-scaling-")
    # LC_CTYPE set: Python would otherwise add it to the environment of the child that
    # measures peak memory, making that another invocation for packs' listing snapshots.
    env = {"PATH": os.environ["PATH"], "HOME": root, "XDG_CONFIG_HOME": str(Path(root, "no-config")),
           "PACKS_CACHE_DIR": str(Path(root, "cache")), "LC_CTYPE": "C.UTF-8"}
    cold = dict(env, PACKS_CACHE_DIR="")
    try:
        print(f"packs: {PACKS}; {os.cpu_count()} cores; {args.rounds} rounds; medians of means, ms")
        print("| manifests | echo | du -s | cat | run | catalog | catalog cold | list --json | lint "
              "| catalog peak (cold; cold --format openai) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        later = []
        for n in sizes:
            d = pack_dir(root, n)
            # Files changed in the last two seconds are never trusted by packs' caches (a
            # change in the same clock tick would not show): measure the steady state.
            time.sleep(2.2)
            files = sorted(str(p) for p in d.iterdir())
            commands = {
                "echo": ["/bin/echo"],
                "cat": ["cat", *files],
                "du": ["du", "-s", str(d)],
                "run": [PACKS, "--packs", str(d), "run", "noop"],
                "catalog": [PACKS, "--packs", str(d), "catalog"],
                "cold": [PACKS, "--packs", str(d), "catalog"],
                "list": [PACKS, "--packs", str(d), "list", "--json"],
                "lint": [PACKS, "lint", str(d)],
            }
            if Path(DIST).exists():
                commands["run dist"] = [DIST, "--packs", str(d), "run", "noop"]
            serves = {"serve": [PACKS, "--packs", str(d), "serve"], "serve cold": [PACKS, "--packs", str(d), "serve"]}
            envs = {k: cold if k.endswith("cold") else env for k in [*commands, *serves]}
            for k, argv in commands.items():  # warm the page cache and packs' caches
                subprocess.run(argv, env=envs[k], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            for k, argv in serves.items():
                first_list_s(argv, envs[k])
            rounds = {k: [] for k in [*commands, *serves]}
            for _ in range(args.rounds):
                for k, argv in commands.items():
                    rounds[k].append(mean_ms(argv, envs[k]))
                for k, argv in serves.items():
                    rounds[k].append(serve_mean_ms(argv, envs[k]))
            m = {k: statistics.median(v) for k, v in rounds.items()}
            later.append((n, m))
            peak, peak_cold = peak_rss_mb(commands["catalog"], env), peak_rss_mb(commands["catalog"], cold)
            peak_openai = peak_rss_mb([*commands["catalog"], "--format", "openai"], cold)
            print(f"| {n:,} | {m['echo']:.2f} | {m['du']:.2f} | {m['cat']:.2f} | {m['run']:.2f} ({m['run'] / m['echo']:.1f}× echo) "
                  f"| {m['catalog']:.1f} ({m['catalog'] / m['cat']:.1f}× cat) | {m['cold']:.1f} | {m['list']:.1f} "
                  f"| {m['lint']:.1f} | {peak:.0f} MB ({peak_cold:.0f} MB; {peak_openai:.0f} MB) |", flush=True)
            shutil.rmtree(d)
        print()
        print("packs serve over stdio: spawn to the answer of the first tools/list, ms (catalog of the same rounds)")
        print("| manifests | serve | serve cold | catalog | catalog cold |")
        print("|---|---|---|---|---|")
        for n, m in later:
            print(f"| {n:,} | {m['serve']:.1f} | {m['serve cold']:.1f} | {m['catalog']:.1f} | {m['cold']:.1f} |")
        if any("run dist" in m for _, m in later):
            print()
            print(f"run noop, release build against dist build ({DIST}), ms")
            print("| manifests | echo | run (release) | run (dist) |")
            print("|---|---|---|---|")
            for n, m in later:
                print(f"| {n:,} | {m['echo']:.2f} | {m['run']:.2f} ({m['run'] / m['echo']:.2f}× echo) "
                      f"| {m['run dist']:.2f} ({m['run dist'] / m['echo']:.2f}× echo) |")
        executables(root, env, args.executables, args.rounds)
        one_large_manifest(root, env, [int(s) for s in args.parameters.split(",")], args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def executables(root, env, n, rounds):
    """A directory of `--describe` executables against one of manifests, each warm."""
    x, m = exe_dir(root, n), pack_dir(root, n)
    mid = f"exe_{n // 2}"
    # Like with like: the same script, schema, policy and argument as a manifest tool.
    same = {"name": "same", "description": "The script of an executable tool, as a manifest",
            "parameters": {"text": {"type": "string"}}, "policy": {"read_only": True},
            "command": {"program": str(Path(x, mid)), "args": ["{{text}}"]}}
    Path(m, "same.tool.json").write_text(json.dumps(same))
    time.sleep(2.2)
    arg = '{"text": "hi"}'
    commands = {
        "echo": ["/bin/echo"],
        "script": [str(Path(x, mid))],
        "prompt x": [PACKS, "--packs", str(x), "prompt"],
        "prompt m": [PACKS, "--packs", str(m), "prompt"],
        "catalog x": [PACKS, "--packs", str(x), "catalog"],
        "run x": [PACKS, "--packs", str(x), "run", mid, arg],
        "run m": [PACKS, "--packs", str(m), "run", "same", arg],
    }
    for argv in commands.values():
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    times = {k: [] for k in commands}
    for _ in range(rounds):
        for k, argv in commands.items():
            times[k].append(mean_ms(argv, env))
    t = {k: statistics.median(v) for k, v in times.items()}
    print()
    print(f"{n} executables answering --describe (describe cache warm) against {n} manifests, ms:")
    print("| echo | the script itself | prompt: executables / manifests | catalog (snapshot) "
          "| run the script with an argument: as an executable / as a manifest tool |")
    print("|---|---|---|---|---|")
    print(f"| {t['echo']:.2f} | {t['script']:.2f} | {t['prompt x']:.1f} / {t['prompt m']:.1f} | {t['catalog x']:.1f} "
          f"| {t['run x']:.2f} / {t['run m']:.2f} |", flush=True)


def one_large_manifest(root, env, sizes, rounds):
    """`packs lint` of one manifest of n parameters, each templated where a value could
    start an option (one `option-injection` warning each), against `cat` of the file."""
    rows = []
    for n in sizes:
        d = Path(root, f"p{n}")
        d.mkdir()
        manifest = {"name": "big", "description": "One tool of many parameters",
                    "parameters": {f"p{i}": {"type": "string", "description": f"Value {i}"} for i in range(n)},
                    "command": {"program": "echo", "args": [f"{{{{p{i}}}}}" for i in range(n)]}}
        f = Path(d, "big.tool.json")
        f.write_text(json.dumps(manifest, indent=2))
        commands = {"cat": ["cat", str(f)], "lint": [PACKS, "lint", "--format", "json", str(d)]}
        out = subprocess.run(commands["lint"], env=env, capture_output=True, text=True, check=False)
        warnings = len(json.loads(out.stdout)["diagnostics"])
        times = {k: [] for k in commands}
        for _ in range(rounds):
            for k, argv in commands.items():
                times[k].append(mean_ms(argv, env))
        rows.append((n, warnings, statistics.median(times["cat"]), statistics.median(times["lint"])))
    print()
    print("lint of one manifest of n parameters (one warning each), ms:")
    print("| parameters | warnings | cat | lint | lint per parameter | against the smallest |")
    print("|---|---|---|---|---|---|")
    first = rows[0][3] / rows[0][0]
    for n, warnings, cat, lint in rows:
        print(f"| {n:,} | {warnings:,} | {cat:.2f} | {lint:.1f} | {lint / n * 1000:.1f} µs | {lint / n / first:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
