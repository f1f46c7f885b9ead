#!/usr/bin/env python3
"""What `packs serve` itself costs per call (issue 30, item 2), against a C spawner that applies
the same confinement, in one run.

    cargo build --release && python3 benches/serve_cpu.py [--calls 5000] [--rounds 3]
        [--bin target/release/packs --bin OTHER]

For each packs binary (`--bin`, repeatable; default `PACKS_BIN` or target/release/packs), rounds
alternate the sandbox on (`enforce`) and off and measure `packs serve` over stdio answering
`--calls` `tools/call` of `noop` (a manifest whose program is `true`), one at a time and 8 in
flight, driven by `benches/serve_driver.c` (built here with `cc`):

- `cpu`: the server's own CPU time per call (user + system of the server process and all its
  threads, from /proc/PID/stat, children excluded: what the tools cost is not counted), read
  just before the first call and just after the last answer, after 8 warm-up calls;
- `calls/s`: the throughput of the same calls;
- `driver`: the driver's own CPU per call (it shares the cores with the server and the tools).

The baseline is `benches/spawner.c` (built here too): 8 threads each spawning `true` one after
the other with the confinement packs gives a `read_only` tool (a private directory, a Landlock
write ruleset built per call, a read ruleset built once around the paths packs denies, which
`packs sandbox --json` lists as `reads_denied`, signals and abstract Unix sockets scoped,
`setpgid`, `no_new_privs`, a seccomp filter); it reports its calls per second and its own CPU
per call. The same spawner with `--capture` also does what packs does for every tool
besides confining it: stdout and stderr read from pipes until they close, the child's pidfd
polled beside them (what a timeout needs) and its process group killed after. `vs spawner` and
`vs capture` are serve's throughput over each (target >= 0.90 with the sandbox on). The spawner has no client to answer; the driver is in C so that serve's client
costs a few microseconds per call, not the 0.07 ms a Python client cost on the same two cores.
Each figure is the median of its rounds. Targets: cpu <= 0.10 ms unconfined, <= 0.15 ms
confined.

Where the CPU goes, per call: `tools ms` is what the tools cost (the server's reaped children,
/proc/PID/stat's cutime and cstime; the spawner's RUSAGE_CHILDREN), `machine ms` what the
whole machine spent (/proc/stat's busy time around the run, every process and kernel thread:
the server's start and warm-up included, so slightly more than the calls). With every core
busy at 8 in flight, throughput is about the cores over `machine ms`.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IN_FLIGHT = 8


def env():
    e = dict(os.environ)
    for var in ("PACKS_PATH", "PACKS_SANDBOX", "PACKS_AGENT", "PACKS_LOCK"):
        e.pop(var, None)
    return e


def busy():
    """The whole machine's busy CPU time so far, in seconds (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def measured(argv, calls):
    """Run `argv`: its output's numbers, and the machine's busy CPU per call (ms) meanwhile."""
    before = busy()
    out = subprocess.run(argv, check=True, capture_output=True, text=True, env=env())
    machine = (busy() - before) / calls * 1000
    return [float(x) for x in out.stdout.split()], machine, out.stderr


def serve(driver, binary, packs_dir, sandbox, calls, in_flight):
    argv = [str(driver), str(in_flight), str(calls), "noop", binary, "--packs", str(packs_dir)]
    argv += ["--sandbox", "off"] if sandbox == "off" else []
    (cpu, rate, driver_cpu, tools), machine, _ = measured(argv, calls)
    return cpu, rate, driver_cpu, tools, machine


def denied(bins):
    """The paths packs' read rules deny here, from the first binary that lists them."""
    for binary in bins:
        out = subprocess.run([binary, "sandbox", "--json"], capture_output=True, text=True, env=env())
        if out.returncode == 0 and "reads_denied" in json.loads(out.stdout):
            return json.loads(out.stdout)["reads_denied"]
    raise SystemExit("no --bin lists its denied reads (`packs sandbox --json`, reads_denied)")


def spawner(binary, calls, paths, capture):
    argv = [binary, *(["--capture"] if capture else []), str(IN_FLIGHT), str(calls), "/usr/bin/true", *paths]
    (rate, cpu, tools), machine, stderr = measured(argv, calls)
    return rate, cpu, tools, machine, int(stderr.split()[0])


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
        driver = Path(tmp, "serve_driver")
        subprocess.run(["cc", "-O2", "-o", str(driver), str(ROOT / "benches/serve_driver.c")], check=True)
        packs_dir = Path(tmp, "p")
        packs_dir.mkdir()
        Path(packs_dir, "noop.tool.json").write_text(json.dumps(
            {"name": "noop", "description": "Do nothing", "command": {"program": "true", "args": []}}))
        paths = denied(bins)
        for _ in range(a.rounds):
            results.setdefault("spawner", []).append(spawner(spawn, a.calls, paths, False))
            results.setdefault("capture", []).append(spawner(spawn, a.calls, paths, True))
            for binary in bins:
                for sandbox in ("on", "off"):
                    for n in (1, IN_FLIGHT):
                        results.setdefault((binary, sandbox, n), []).append(serve(driver, binary, packs_dir, sandbox, a.calls, n))
    def median(rows, i):
        return statistics.median(r[i] for r in rows)

    base, runner = median(results["spawner"], 0), median(results["capture"], 0)
    rules = results["spawner"][0][4]
    for key, what in (("spawner", f"C spawner, {IN_FLIGHT} threads, confined ({rules} read rules)"),
                      ("capture", "C spawner --capture (output read, pidfd polled, group killed)")):
        rows = results[key]
        print(f"{what}: {median(rows, 0):.0f} calls/s; per call: its own cpu {median(rows, 1):.3f} ms, "
              f"its tools' {median(rows, 2):.3f} ms, the machine's {median(rows, 3):.3f} ms")
    print(f"{'':48}{'in flight':>10}{'cpu ms/call':>12}{'calls/s':>10}{'vs spawner':>11}{'vs capture':>11}"
          f"{'driver ms':>10}{'tools ms':>10}{'machine ms':>11}")
    for binary in bins:
        for sandbox in ("on", "off"):
            for n in (1, IN_FLIGHT):
                rows = results[(binary, sandbox, n)]
                cpu, rate, driver_cpu, tools, machine = (median(rows, i) for i in range(5))
                ratio = f"{rate / base:11.2f}{rate / runner:11.2f}" if n == IN_FLIGHT else " " * 22
                print(f"{binary[-36:]:36} sandbox {sandbox:3}{n:10}{cpu:12.3f}{rate:10.0f}{ratio}{driver_cpu:10.3f}"
                      f"{tools:10.3f}{machine:11.3f}")

if __name__ == "__main__":
    main()
