#!/usr/bin/env python3
"""Confinement on a busy machine (issue 30): what the sandbox costs when other processes use
the CPUs, as on a developer's laptop or a CI runner, against `--sandbox off` in the same run.

    cargo build --release && python3 benches/busy.py [--rounds 3] [--runs 30] [--calls 800]
        [--bin target/release/packs --bin OTHER] [--no-http]

For each packs binary (`--bin`, repeatable, to compare two builds in one run; default
`PACKS_BIN` or target/release/packs) and each machine state, quiet then busy (two
`python3 -c 'while 1: pass'` started alongside, each in a session of its own so each gets
its own autogroup, as a compiler started from another terminal would), rounds alternate the
sandbox on (`enforce`) and off and measure:

- `run`: the median wall time of `packs run noop` (a manifest whose program is `true`);
- `stdio`: `packs serve` over stdio with 8 calls of `noop` in flight, in calls per second;
- `http`: `packs serve --http` on loopback with 8 keep-alive connections, each making its
  calls one after the other, in calls per second.

Each figure is the median of its rounds. The ratios printed are the issue's targets: the
sandboxed `run` median at most 1.3x the unsandboxed one, and serve at 8 in flight at least
80% of its own sandbox-off throughput, busy as quiet. packs is started in a session of its
own, without a controlling terminal (as under an agent, in CI or as a service): with one, a
confined tool gets a session of its own (docs/SANDBOX.md). The load generators and this
script share the machine's CPUs with what is measured, which is the point.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CALL = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"noop","arguments":{}}}'
IN_FLIGHT = 8


def packs(binary, packs_dir, sandbox, *args):
    argv = [binary, "--packs", str(packs_dir)]
    if sandbox == "off":
        argv += ["--sandbox", "off"]
    return argv + list(args)


def env():
    e = dict(os.environ)
    for var in ("PACKS_PATH", "PACKS_SANDBOX", "PACKS_AGENT", "PACKS_LOCK"):
        e.pop(var, None)
    return e


def run_median(binary, packs_dir, sandbox, runs):
    argv = packs(binary, packs_dir, sandbox, "run", "noop")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True,
                       start_new_session=True, env=env())
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def stdio_rate(binary, packs_dir, sandbox, calls):
    server = subprocess.Popen(packs(binary, packs_dir, sandbox, "serve"), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
                              env=env(), bufsize=0)
    out = server.stdout
    try:
        def send(i):
            server.stdin.write((CALL % i + "\n").encode())

        def answer():
            line = out.readline()
            assert b'"isError":false' in line, line
        send(0)  # warm up: the first call compiles the validator
        answer()
        start = time.perf_counter()
        sent = 0
        for _ in range(IN_FLIGHT):
            sent += 1
            send(sent)
        for _ in range(calls):
            answer()
            if sent < calls:
                sent += 1
                send(sent)
        return calls / (time.perf_counter() - start)
    finally:
        server.kill()
        server.wait()


def http_call(sock, buf, host, i):
    body = (CALL % i).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    sock.sendall(head + body)
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:"))
    while len(rest) < length:
        rest += sock.recv(65536)
    assert b'"isError":false' in rest[:length], rest
    return rest[length:]


def http_rate(binary, packs_dir, sandbox, calls):
    server = subprocess.Popen(packs(binary, packs_dir, sandbox, "serve", "--http", "127.0.0.1:0",
                                    "--max-calls-per-client", "64"),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True, env=env())
    try:
        line = server.stderr.readline().decode()
        host = line.split("http://")[1].split("/")[0]
        threading.Thread(target=lambda: server.stderr.read(), daemon=True).start()
        addr = host.rsplit(":", 1)
        addr = (addr[0], int(addr[1]))
        warm = socket.create_connection(addr)
        http_call(warm, b"", host, 0)
        warm.close()
        per = calls // IN_FLIGHT
        barrier = threading.Barrier(IN_FLIGHT + 1)

        def caller(n):
            sock = socket.create_connection(addr)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = b""
            barrier.wait()
            for i in range(per):
                buf = http_call(sock, buf, host, n * 1_000_000 + i + 1)
            sock.close()
        threads = [threading.Thread(target=caller, args=(n,)) for n in range(IN_FLIGHT)]
        for t in threads:
            t.start()
        barrier.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        return per * IN_FLIGHT / (time.perf_counter() - start)
    finally:
        server.kill()
        server.wait()


def load(busy):
    if not busy:
        return []
    return [subprocess.Popen(["python3", "-c", "while 1: pass"], start_new_session=True) for _ in range(2)]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", action="append", help="a packs binary (repeatable)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--runs", type=int, default=30, help="`packs run` per round and configuration")
    p.add_argument("--calls", type=int, default=800, help="serve calls per round and configuration")
    p.add_argument("--no-http", action="store_true")
    a = p.parse_args()
    bins = a.bin or [os.environ.get("PACKS_BIN", str(ROOT / "target/release/packs"))]
    kinds = ["run", "stdio"] + ([] if a.no_http else ["http"])
    results = {}  # (bin, state, kind, sandbox) -> [figures]
    with tempfile.TemporaryDirectory() as tmp:
        packs_dir = Path(tmp, "p")
        packs_dir.mkdir()
        Path(packs_dir, "noop.tool.json").write_text(json.dumps(
            {"name": "noop", "description": "Do nothing", "command": {"program": "true", "args": []}}))
        for state in ("quiet", "busy"):
            loaders = load(state == "busy")
            try:
                time.sleep(0.5 if loaders else 0)
                for _ in range(a.rounds):
                    for binary in bins:
                        for kind in kinds:
                            for sandbox in ("on", "off"):
                                if kind == "run":
                                    v = run_median(binary, packs_dir, sandbox, a.runs)
                                elif kind == "stdio":
                                    v = stdio_rate(binary, packs_dir, sandbox, a.calls)
                                else:
                                    v = http_rate(binary, packs_dir, sandbox, a.calls)
                                results.setdefault((binary, state, kind, sandbox), []).append(v)
            finally:
                for l in loaders:
                    l.kill()
                    l.wait()
    unit = {"run": "ms (median)", "stdio": "calls/s (8 in flight)", "http": "calls/s (8 connections)"}
    for binary in bins:
        print(f"\n{binary}")
        print(f"{'':8}{'':24}{'quiet: on':>11}{'off':>9}{'ratio':>8}   {'busy: on':>10}{'off':>9}{'ratio':>8}")
        for kind in kinds:
            row = f"{kind:8}{unit[kind]:24}"
            for state in ("quiet", "busy"):
                on = statistics.median(results[(binary, state, kind, "on")])
                off = statistics.median(results[(binary, state, kind, "off")])
                # run: on/off (target <= 1.3); serve: on/off throughput (target >= 0.80).
                row += f"{on:11.2f}{off:9.2f}{on / off:8.2f}   " if kind == "run" else f"{on:11.0f}{off:9.0f}{on / off:8.2f}   "
            print(row)


if __name__ == "__main__":
    main()
