#!/usr/bin/env python3
"""What `packs serve` itself costs per call (issue 30, item 2), against a C spawner that applies
the same confinement, in one run.

    cargo build --release && python3 benches/serve_cpu.py [--calls 5000] [--rounds 3]
        [--bin target/release/packs --bin OTHER]

For each packs binary (`--bin`, repeatable; default `PACKS_BIN` or target/release/packs), rounds
alternate the sandbox on (`enforce`) and off and measure `packs serve` over stdio answering
`--calls` `tools/call` of `noop` (a manifest whose program is `true`), one at a time and 8 in
flight:

- `cpu`: the server's own CPU time per call (user + system of the server process and all its
  threads, from /proc/PID/stat, children excluded: what the tools cost is not counted), read
  just before the first call and just after the last answer, after one warm-up call;
- `calls/s`: the throughput of the same calls.

The baseline is `benches/spawner.c` (built here with `cc`): 8 threads each spawning `true`
one after the other with the confinement packs gives a `read_only` tool (a private directory,
a Landlock write ruleset built per call, a read ruleset built once, signals and abstract Unix
sockets scoped, `setpgid`, `no_new_privs`, a seccomp filter); `ratio` is serve's throughput
with the sandbox on over the spawner's (target >= 0.90). Each figure is the median of its
rounds. Targets: cpu <= 0.10 ms unconfined, <= 0.15 ms confined.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALL = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"noop","arguments":{}}}'
IN_FLIGHT = 8
TICK = os.sysconf("SC_CLK_TCK")


def env():
    e = dict(os.environ)
    for var in ("PACKS_PATH", "PACKS_SANDBOX", "PACKS_AGENT", "PACKS_LOCK"):
        e.pop(var, None)
    return e


def cpu_seconds(pid):
    """User + system time of the process `pid` and its threads, children excluded."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def serve(binary, packs_dir, sandbox, calls, in_flight):
    argv = [binary, "--packs", str(packs_dir)] + (["--sandbox", "off"] if sandbox == "off" else []) + ["serve"]
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              start_new_session=True, env=env(), bufsize=0)
    out = server.stdout
    try:
        def send(i):
            server.stdin.write((CALL % i + "\n").encode())

        def answer():
            line = out.readline()
            assert b'"isError":false' in line, line
        # Warm up: the first call builds what later calls reuse, and 8 in flight start the
        # pool's workers.
        for i in range(IN_FLIGHT):
            send(-1 - i)
        for _ in range(IN_FLIGHT):
            answer()
        cpu = cpu_seconds(server.pid)
        start = time.perf_counter()
        sent = 0
        for _ in range(min(in_flight, calls)):
            sent += 1
            send(sent)
        for _ in range(calls):
            answer()
            if sent < calls:
                sent += 1
                send(sent)
        wall = time.perf_counter() - start
        cpu = cpu_seconds(server.pid) - cpu
        return cpu / calls * 1000, calls / wall
    finally:
        server.kill()
        server.wait()


def spawner(binary, calls):
    out = subprocess.run([binary, str(IN_FLIGHT), str(calls), "/usr/bin/true"], check=True,
                         capture_output=True, text=True, env=env())
    return float(out.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", action="append", help="a packs binary (repeatable)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=5000)
    a = p.parse_args()
    bins = a.bin or [os.environ.get("PACKS_BIN", str(ROOT / "target/release/packs"))]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        spawn = Path(tmp, "spawner")
        subprocess.run(["cc", "-O2", "-pthread", "-o", str(spawn), str(ROOT / "benches/spawner.c")], check=True)
        packs_dir = Path(tmp, "p")
        packs_dir.mkdir()
        Path(packs_dir, "noop.tool.json").write_text(json.dumps(
            {"name": "noop", "description": "Do nothing", "command": {"program": "true", "args": []}}))
        for _ in range(a.rounds):
            results.setdefault("spawner", []).append(spawner(spawn, a.calls))
            for binary in bins:
                for sandbox in ("on", "off"):
                    for n in (1, IN_FLIGHT):
                        results.setdefault((binary, sandbox, n), []).append(serve(binary, packs_dir, sandbox, a.calls, n))
    base = statistics.median(results["spawner"])
    print(f"C spawner, {IN_FLIGHT} threads, confined: {base:.0f} calls/s")
    print(f"{'':48}{'in flight':>10}{'cpu ms/call':>12}{'calls/s':>10}{'vs spawner':>11}")
    for binary in bins:
        for sandbox in ("on", "off"):
            for n in (1, IN_FLIGHT):
                rows = results[(binary, sandbox, n)]
                cpu = statistics.median(r[0] for r in rows)
                rate = statistics.median(r[1] for r in rows)
                ratio = f"{rate / base:11.2f}" if n == IN_FLIGHT else ""
                print(f"{binary[-36:]:36} sandbox {sandbox:3}{n:10}{cpu:12.3f}{rate:10.0f}{ratio}")


if __name__ == "__main__":
    main()
