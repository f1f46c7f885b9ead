"""`packs serve` in MCP's stateless era (2026-07-28), driven by the official Python SDK's
`Client`, which probes `server/discover` and adopts the newest version both speak.

Run by .ci/run with mcp 2.3.0: PACKS_BIN=target/debug/packs python tests/mcp/test_stateless.py
"""

import json
import os

import anyio
from mcp import Client, StdioServerParameters, types
from mcp.shared.exceptions import MCPError

from harness import check, finish, manifest, scratch

PACKS = os.environ.get("PACKS_BIN", "target/debug/packs")


def server(packs_dir, *extra):
    return StdioServerParameters(command=PACKS, args=["--packs", packs_dir, "serve", *extra],
                                 env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"),
                                      # The approval key serve opens at start: not in the real home.
                                      "PACKS_STATE_DIR": os.path.join(packs_dir, ".state")})


async def main():
    d = scratch("packs-stateless-")
    manifest(d, "echo_words", parameters={"words": {"type": "string", "required": True}},
             command={"program": "echo", "args": ["--", "{{words}}"]}, policy={"read_only": True})
    manifest(d, "count", parameters={"n": {"type": "integer", "required": True}},
             command={"program": "printf", "args": ['{"n": %s}', "{{n}}"]}, output={"format": "json"})
    manifest(d, "careful", command="echo approved-and-ran", policy={"confirm_before_run": True})
    answers = []
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        approve = answers.pop(0) if answers else True
        return types.ElicitResult(action="accept", content={"approve": approve})

    async with Client(server(d), elicitation_callback=on_elicit) as c:

        async def negotiates_2026_07_28():
            assert c.protocol_version == "2026-07-28", c.protocol_version

        async def lists_tools():
            names = {t.name for t in (await c.list_tools()).tools}
            assert names == {"echo_words", "count", "careful"}, names

        async def calls_a_tool():
            r = await c.call_tool("echo_words", {"words": "hi; $(id)"})
            assert not r.is_error and r.content[0].text == "-- hi; $(id)\n", r
            r = await c.call_tool("count", {"n": 3})
            assert r.structured_content == {"n": 3}, r

        async def validation_error_is_an_error_result():
            r = await c.call_tool("echo_words", {"words": 5})
            assert r.is_error, r
            assert json.loads(r.content[0].text)["error"]["kind"] == "validation"

        async def unknown_tool_is_an_error():
            try:
                r = await c.call_tool("no_such_tool", {})
            except MCPError as e:
                assert "Unknown tool" in str(e), e
            else:
                assert r.is_error, r

        async def approval_through_input_required():
            before = len(asked)
            r = await c.call_tool("careful", {})
            assert len(asked) == before + 1, "the server did not ask"
            assert "echo approved-and-ran" in asked[-1], asked[-1]
            assert not r.is_error and r.content[0].text == "approved-and-ran\n", r

        async def a_declined_approval_runs_nothing():
            answers.append(False)
            r = await c.call_tool("careful", {})
            assert r.is_error, r
            assert json.loads(r.content[0].text)["error"]["kind"] == "permission_denied", r

        for name, fn in [
            ("negotiates 2026-07-28 (server/discover)", negotiates_2026_07_28),
            ("tools/list", lists_tools),
            ("tools/call", calls_a_tool),
            ("validation error as isError", validation_error_is_an_error_result),
            ("unknown tool", unknown_tool_is_an_error),
            ("approval through input_required + elicitation", approval_through_input_required),
            ("a declined approval runs nothing", a_declined_approval_runs_nothing),
        ]:
            await check(name, fn)

    # A client that cannot answer a form: a call that needs approval is denied, never run.
    async with Client(server(d)) as c:

        async def without_elicitation_approval_is_denied():
            assert c.protocol_version == "2026-07-28"
            r = await c.call_tool("careful", {})
            assert r.is_error, r
            assert json.loads(r.content[0].text)["error"]["kind"] == "permission_denied", r

        await check("no elicitation: denied (fail closed)", without_elicitation_approval_is_denied)

    # The handshake era still works for a client that asks for it.
    async with Client(server(d), mode="legacy") as c:

        async def legacy_mode():
            assert c.protocol_version == "2025-11-25", c.protocol_version
            r = await c.call_tool("echo_words", {"words": "old"})
            assert r.content[0].text == "-- old\n", r

        await check("mode=legacy: initialize, 2025-11-25", legacy_mode)


anyio.run(main)
finish()
