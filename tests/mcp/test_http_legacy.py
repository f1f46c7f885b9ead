"""`packs serve --http` driven by the handshake-era Python SDK (mcp 1.x: 2025-11-25), the one
most deployed clients still use: its `streamablehttp_client` (session id, GET stream attempt,
DELETE on close) and `ClientSession`: initialize, list, call, validation, elicitation.

Run by .ci/run with mcp 1.26.0: PACKS_BIN=target/debug/packs python tests/mcp/test_http_legacy.py
"""

import json
import os
import socket
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client

from harness import check, finish, free_port, scratch

PACKS = os.environ.get("PACKS_BIN", "target/debug/packs")
TOKEN = "legacy-client-token-0123456789abcdef"


async def main():
    root = Path(scratch("packs-http-legacy-"))
    d = root / "packs"
    d.mkdir()
    (root / "agents" / "ops").mkdir(parents=True)
    (root / "agents" / "ops" / "agent.toml").write_text("")
    (root / "tokens").write_text(f"{TOKEN} ops\n")

    def manifest(name, **body):
        (d / f"{name}.tool.json").write_text(json.dumps({"name": name, "description": f"The {name} tool", **body}))

    manifest("echo_words", parameters={"words": {"type": "string", "required": True}},
             command={"program": "echo", "args": ["--", "{{words}}"]}, policy={"read_only": True})
    manifest("careful", command="echo approved-and-ran", policy={"confirm_before_run": True})
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": str(root), "PACKS_AGENTS": str(root / "agents"),
           "XDG_CONFIG_HOME": str(root / "no-config"), "PACKS_STATE_DIR": str(root / "state")}
    server = subprocess.Popen([PACKS, "--packs", str(d), "serve", "--http", f"127.0.0.1:{port}",
                               "--token-file", str(root / "tokens")], env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        answers = []

        async def on_elicit(context, params):
            return types.ElicitResult(action="accept", content={"approve": answers.pop(0) if answers else True})

        url = f"http://127.0.0.1:{port}/mcp"
        async with streamablehttp_client(url, headers={"Authorization": f"Bearer {TOKEN}"}) as (read, write, session_id):
            async with ClientSession(read, write, elicitation_callback=on_elicit,
                                     read_timeout_seconds=timedelta(seconds=60)) as c:
                init = await c.initialize()

                async def handshake():
                    assert init.protocolVersion == "2025-11-25", init.protocolVersion
                    assert session_id(), "no Mcp-Session-Id"

                async def lists_and_calls():
                    names = {t.name for t in (await c.list_tools()).tools}
                    assert names == {"echo_words", "careful"}, names
                    r = await c.call_tool("echo_words", {"words": "legacy"})
                    assert not r.isError and r.content[0].text == "-- legacy\n", r
                    r = await c.call_tool("echo_words", {"words": 5})
                    assert r.isError and json.loads(r.content[0].text)["error"]["kind"] == "validation", r

                async def elicitation():
                    r = await c.call_tool("careful", {})
                    assert not r.isError and r.content[0].text == "approved-and-ran\n", r
                    answers.append(False)
                    r = await c.call_tool("careful", {})
                    assert r.isError and json.loads(r.content[0].text)["error"]["kind"] == "permission_denied", r

                for name, fn in [("mcp 1.x over HTTP: initialize, session id", handshake),
                                 ("mcp 1.x over HTTP: list, call, validation", lists_and_calls),
                                 ("mcp 1.x over HTTP: approval by elicitation on the SSE stream", elicitation)]:
                    # (mcp 1.x sends no notifications/cancelled for an abandoned call and keeps
                    # its stream open; cancellation over HTTP is checked with the 2.x clients.)
                    await check(name, fn)
    finally:
        server.kill()
        server.wait()


anyio.run(main)
finish()
