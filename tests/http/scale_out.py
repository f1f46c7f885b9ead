"""Scale-out: two `packs serve --http` replicas behind a real haproxy (Debian's package),
driven by the official MCP Python SDK client (2026-07-28, stateless: every request may land
on either replica).

1. 200 calls all succeed and both replicas served some (their audit logs say so).
2. One replica is killed (SIGKILL) mid-run, four callers keeping calls in flight: the calls
   go on through the other. Every call the client saw succeed ran exactly once (its unique
   argument is in exactly one audit log), a call that failed ran at most once (nothing is
   retried into a second run), and only the calls in flight at the kill (at most four) may
   fail.
3. In the 2025-11-25 era, with haproxy balancing on the Mcp-Session-Id header, approval by
   elicitation works across replicas (ten calls from ten sessions; with round robin the
   answer reaches the wrong replica and the call waits: checked by hand, it times out).

Run by .ci/run: PACKS_BIN=target/debug/packs python tests/http/scale_out.py
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

PACKS = os.environ.get("PACKS_BIN", "target/debug/packs")
TOKEN = "scale-out-token-0123456789abcdef"
CONFIG = Path(__file__).with_name("haproxy.cfg.in")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, proc, what):
    deadline = time.time() + 20
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port}")


def logged(log):
    """The `id` argument of every call in an audit log."""
    if not log.exists():
        return []
    return [json.loads(line)["argv"][1] for line in log.read_text().splitlines() if line.strip()]


async def run_calls(url, ids, failed, on_call=None, callers=4):
    """Call `stamp` once per id from `callers` SDK clients at once; a failure is recorded and
    that client is made again (no id is ever called twice)."""
    succeeded = []
    pending = list(ids)
    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(caller, url, pending, succeeded, failed, on_call)
    return succeeded


async def caller(url, pending, succeeded, failed, on_call):
    while pending:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        # The call in flight: when the client itself breaks under it (its task group ends
        # with the connection, and the error comes out of `async with`, not `call_tool`),
        # that call failed in flight.
        in_flight = None
        try:
            async with Client(streamable_http_client(url, http_client=http)) as c:
                while pending:
                    call_id = pending.pop(0)
                    if on_call:
                        on_call(len(succeeded))
                    in_flight = call_id
                    try:
                        r = await c.call_tool("stamp", {"id": call_id})
                    except Exception as e:  # noqa: BLE001 - a call that failed is recorded, not retried
                        in_flight = None
                        failed.append((call_id, repr(e)))
                        break
                    in_flight = None
                    assert not r.is_error and r.content[0].text == f"{call_id}\n", r
                    succeeded.append(call_id)
        except Exception as e:  # noqa: BLE001 - the client itself broke (its connection): make another
            failed.append((in_flight or "(client)", repr(e)))


async def legacy_approvals(url):
    """Ten approval-needing calls in the 2025-11-25 era from fresh clients (fresh sessions);
    how many ran after their approval was asked and given."""
    from mcp import types

    ran = 0
    for _ in range(10):
        asked = []

        async def on_elicit(context, params):
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={"approve": True})

        http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        async with Client(streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=on_elicit) as c:
            with anyio.fail_after(20):
                r = await c.call_tool("careful", {})
            assert not r.is_error and r.content[0].text == "approved\n", r
            ran += len(asked)
    return ran


def main():
    root = Path(tempfile.mkdtemp(prefix="packs-scale-out-"))
    packs = root / "packs"
    packs.mkdir()
    (packs / "stamp.tool.json").write_text(json.dumps({
        "name": "stamp", "description": "Echo a call's unique id",
        "parameters": {"id": {"type": "string", "required": True}},
        "command": {"program": "echo", "args": ["{{id}}"]}, "policy": {"read_only": True}}))
    (packs / "careful.tool.json").write_text(json.dumps({
        "name": "careful", "description": "Needs approval", "command": "echo approved",
        "policy": {"confirm_before_run": True}}))
    (root / "agents" / "ops").mkdir(parents=True)
    (root / "agents" / "ops" / "agent.toml").write_text("")
    (root / "tokens").write_text(f"{TOKEN} ops\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "PACKS_AGENTS": str(root / "agents"),
           "XDG_CONFIG_HOME": str(root / "no-config")}
    procs = []
    try:
        replicas = []
        for n in (1, 2):
            port = free_port()
            log = root / f"audit-{n}.jsonl"
            p = subprocess.Popen([PACKS, "--packs", str(packs), "--log", str(log), "serve", "--http", f"127.0.0.1:{port}",
                                  "--token-file", str(root / "tokens")], env=env, stderr=subprocess.DEVNULL)
            procs.append(p)
            wait_for(port, p, f"replica {n}")
            replicas.append((p, port, log))
        front = free_port()
        config = root / "haproxy.cfg"
        config.write_text(CONFIG.read_text().format(front=front, port1=replicas[0][1], port2=replicas[1][1], balance="roundrobin"))
        subprocess.run(["haproxy", "-c", "-q", "-f", str(config)], check=True)
        haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stderr=subprocess.PIPE, text=True)
        procs.append(haproxy)
        wait_for(front, haproxy, "haproxy")
        time.sleep(0.5)  # both servers seen up by the health checks
        url = f"http://127.0.0.1:{front}/mcp"

        # 1. 200 calls through the balancer.
        failed = []
        ids = [f"a-{i}" for i in range(200)]
        ok = anyio.run(run_calls, url, ids, failed)
        assert not failed, f"calls failed with both replicas up: {failed[:3]}"
        assert sorted(ok) == sorted(ids)
        per_replica = [logged(log) for _, _, log in replicas]
        assert all(per_replica), f"one replica served nothing: {[len(p) for p in per_replica]}"
        assert sorted(per_replica[0] + per_replica[1]) == sorted(ids), "every call ran exactly once"
        print(f"PASS 200 calls through haproxy: replica 1 ran {len(per_replica[0])}, replica 2 ran {len(per_replica[1])}")

        # 2. Replica 1 killed after 50 of 200 calls.
        victim = replicas[0][0]

        def kill_at(done):
            # Four callers keep calls in flight: the kill lands in the middle of some.
            if done >= 50 and victim.poll() is None:
                victim.send_signal(signal.SIGKILL)
                victim.wait()

        failed = []
        ids = [f"b-{i}" for i in range(200)]
        ok = anyio.run(run_calls, url, ids, failed, kill_at)
        assert victim.poll() is not None, "the replica was not killed"
        runs = [i for log in (r[2] for r in replicas) for i in logged(log) if i.startswith("b-")]
        counts = {i: runs.count(i) for i in set(runs)}
        duplicated = [i for i, n in counts.items() if n > 1]
        assert not duplicated, f"tool runs duplicated: {duplicated}"
        lost = [i for i in ok if counts.get(i) != 1]
        assert not lost, f"calls the client saw succeed are not in the logs: {lost}"
        real_failures = [f for f in failed if f[0] != "(client)"]
        assert len(real_failures) <= 4, f"more calls failed than were in flight at the kill: {failed}"
        assert len(ok) + len(real_failures) == 200, (len(ok), failed)
        print(f"PASS replica killed mid-run: {len(ok)} of 200 succeeded, {len(real_failures)} failed in flight, "
              f"none duplicated or lost")

        # 3. 2025-11-25 elicitation across replicas: balanced on Mcp-Session-Id, the answer
        # reaches the replica holding the call.
        haproxy.kill()
        haproxy.wait()
        port = replicas[0][1]
        p = subprocess.Popen([PACKS, "--packs", str(packs), "--log", str(replicas[0][2]), "serve", "--http",
                              f"127.0.0.1:{port}", "--token-file", str(root / "tokens")], env=env, stderr=subprocess.DEVNULL)
        procs.append(p)
        wait_for(port, p, "replica 1 (again)")
        config.write_text(CONFIG.read_text().format(front=front, port1=port, port2=replicas[1][1], balance="hdr(Mcp-Session-Id)"))
        haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stderr=subprocess.DEVNULL)
        procs.append(haproxy)
        wait_for(front, haproxy, "haproxy (session affinity)")
        time.sleep(0.5)
        asked = anyio.run(legacy_approvals, url)
        assert asked == 10, f"{asked} of 10 approvals reached their call"
        print("PASS 2025-11-25: 10 approvals by elicitation through haproxy balancing on Mcp-Session-Id")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"FAIL {e}")
        sys.exit(1)
