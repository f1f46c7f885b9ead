"""`packs serve` driven by the official MCP Python SDK (a client nobody here wrote).

Run by .ci/run with the SDK installed in a virtualenv:
    PACKS_BIN=target/debug/packs python tests/mcp/test_serve.py
Prints one line per check and closes with `N passed, N failed`; exits 1 on a failure.
"""

import json
import os
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

from harness import check, finish, manifest, scratch

PACKS = os.environ.get("PACKS_BIN", "target/debug/packs")


def get(obj, name):
    """`obj.name`: SDK 2.x spells fields in snake_case, 1.x as on the wire (camelCase)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    head, *rest = name.split("_")
    return getattr(obj, head + "".join(w.title() for w in rest))


def make_packs():
    d = scratch("packs-mcp-")
    manifest(d, "echo_words", parameters={"words": {"type": "string", "required": True}},
             command={"program": "echo", "args": ["--", "{{words}}"]}, policy={"read_only": True})
    manifest(d, "count", parameters={"n": {"type": "integer", "required": True}},
             command={"program": "printf", "args": ['{"n": %s}', "{{n}}"]}, output={"format": "json"})
    # A slow tool whose grandchild records its pid, so cancellation can be checked.
    manifest(d, "slow", parameters={"pidfile": {"type": "string", "required": True}},
             command={"program": "sh", "args": ["-c", 'echo started; sleep 30 & echo $! > "$1"; wait', "sh", "{{pidfile}}"]},
             policy={"timeout_secs": 60, "read_only": False})
    manifest(d, "careful", command="echo approved-and-ran", policy={"confirm_before_run": True})
    return d


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie counts as gone.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "zombie" in status.read_text())


async def main():
    packs_dir = make_packs()
    changes = []
    elicited = []

    async def on_message(message):
        if isinstance(message, types.ServerNotification) or hasattr(message, "root"):
            root = getattr(message, "root", message)
            if isinstance(root, types.ToolListChangedNotification):
                changes.append(time.monotonic())
        elif isinstance(message, types.ToolListChangedNotification):
            changes.append(time.monotonic())

    async def on_elicit(context, params):
        elicited.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    server = StdioServerParameters(command=PACKS, args=["--packs", packs_dir, "serve", "--watch"],
                                   env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
                                        "PACKS_STATE_DIR": scratch("packs-mcp-state-")})
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, message_handler=on_message, elicitation_callback=on_elicit) as s:
            init = await s.initialize()

            async def initialized():
                assert get(init, "server_info").name == "packs", init
                # Both SDK generations speak the handshake era with ClientSession.initialize().
                assert str(get(init, "protocol_version")) == "2025-11-25", init
                assert init.capabilities.tools is not None

            async def lists_tools():
                names = {t.name for t in (await s.list_tools()).tools}
                assert {"echo_words", "count", "slow", "careful"} <= names, names
                tool = next(t for t in (await s.list_tools()).tools if t.name == "echo_words")
                assert get(tool, "input_schema")["type"] == "object"
                assert get(tool, "input_schema")["required"] == ["words"]
                assert get(tool.annotations, "read_only_hint") is True
                # What the kernel enforces for it, as `packs run --dry-run` says it (a read_only
                # tool's credential stores are unreadable where the kernel has Landlock).
                sandbox = (tool.meta or {}).get("dev.packs/sandbox")
                assert isinstance(sandbox, str) and sandbox, tool.meta
                # A manifest that does not state read_only is not advertised as read-only.
                count = next(t for t in (await s.list_tools()).tools if t.name == "count")
                assert get(count.annotations, "read_only_hint") is False
                assert get(count.annotations, "destructive_hint") is True

            async def calls_a_tool():
                r = await s.call_tool("echo_words", {"words": "hi; $(id) `x`"})
                assert not get(r, "is_error"), r
                assert r.content[0].text == "-- hi; $(id) `x`\n", r.content

            async def structured_content_for_json():
                r = await s.call_tool("count", {"n": 3})
                assert not get(r, "is_error"), r
                assert get(r, "structured_content") == {"n": 3}, r

            async def validation_error_is_an_error_result():
                r = await s.call_tool("echo_words", {"words": 5})
                assert get(r, "is_error"), r
                body = json.loads(r.content[0].text)
                assert body["error"]["kind"] == "validation", body
                assert body["error"]["errors"][0]["field"] == "words", body

            async def ping_while_a_call_runs():
                pidfile = Path(packs_dir) / "ping.pid"
                async with anyio.create_task_group() as tg:
                    tg.start_soon(lambda: s.call_tool("slow", {"pidfile": str(pidfile)}))
                    await anyio.sleep(0.5)
                    started = time.monotonic()
                    await s.send_ping()
                    assert time.monotonic() - started < 1.0
                    tg.cancel_scope.cancel()
                # mcp 1.x abandons the call without notifications/cancelled: end its sleep, so
                # its answer comes now and not after the client has closed (packs answers every
                # request, at the end of input too, which 1.x's reader cannot take while closing).
                deadline = time.monotonic() + 5
                while not pidfile.exists() and time.monotonic() < deadline:
                    await anyio.sleep(0.05)
                try:
                    os.kill(int(pidfile.read_text()), 9)
                except (ProcessLookupError, ValueError):
                    pass
                await anyio.sleep(0.3)

            async def cancel_kills_the_process_group():
                pidfile = Path(packs_dir) / "cancel.pid"
                with anyio.move_on_after(1.0):
                    await s.call_tool("slow", {"pidfile": str(pidfile)})
                deadline = time.monotonic() + 5
                while not pidfile.exists() and time.monotonic() < deadline:
                    await anyio.sleep(0.05)
                pid = int(pidfile.read_text())
                while alive(pid) and time.monotonic() < deadline:
                    await anyio.sleep(0.05)
                assert not alive(pid), f"grandchild {pid} survived the cancellation"

            async def approval_through_elicitation():
                r = await s.call_tool("careful", {})
                assert elicited, "the server did not ask"
                assert not get(r, "is_error"), r
                assert r.content[0].text == "approved-and-ran\n"

            async def list_changed_after_editing_a_manifest():
                before = len(changes)
                manifest(packs_dir, "added_later", command="echo new")
                deadline = time.monotonic() + 5
                while len(changes) == before and time.monotonic() < deadline:
                    await anyio.sleep(0.05)
                assert len(changes) > before, "no notifications/tools/list_changed"
                names = {t.name for t in (await s.list_tools()).tools}
                assert "added_later" in names, names
                # A broken edit keeps the last good version.
                (Path(packs_dir) / "added_later.tool.json").write_text("{ not json")
                deadline = time.monotonic() + 5
                while len(changes) == before + 1 and time.monotonic() < deadline:
                    await anyio.sleep(0.05)
                r = await s.call_tool("added_later", {})
                assert not get(r, "is_error") and r.content[0].text == "new\n", r

            # mcp 1.x does not send notifications/cancelled when a call is abandoned; 2.x does.
            sends_cancel = "input_schema" in types.Tool.model_fields
            checks = [
                ("initialize", initialized),
                ("tools/list", lists_tools),
                ("tools/call", calls_a_tool),
                ("structuredContent", structured_content_for_json),
                ("validation error as isError", validation_error_is_an_error_result),
                ("ping during a slow call", ping_while_a_call_runs),
                ("approval through elicitation", approval_through_elicitation),
                ("list_changed after an edit", list_changed_after_editing_a_manifest),
            ]
            if sends_cancel:
                checks.append(("cancel kills the process group", cancel_kills_the_process_group))
            for name, fn in checks:
                await check(name, fn)


anyio.run(main)
finish()
