"""packs' exports and `packs call` checked against the official SDKs' own types.

Golden files only show that packs prints what it printed before; this checks what packs
prints against the types the model APIs' Python SDKs (openai, anthropic, google-genai, mcp)
define, and feeds `packs call` responses the SDKs themselves serialized.

Run: PACKS_BIN=target/debug/packs python tests/sdk/test_sdk_types.py (from the repository
root; .ci/run installs the pinned SDKs in a venv). Exits non-zero on the first failure.
"""

import json
import os
import subprocess
import sys
import tempfile
import typing
from pathlib import Path

import anthropic.types as at
import mcp.types as mt
from google.genai import types as gt
from openai.types.chat import ChatCompletion, ChatCompletionToolMessageParam, ChatCompletionToolParam
from openai.types.responses import FunctionToolParam, Response
from openai.types.responses.response_input_param import FunctionCallOutput
from pydantic import TypeAdapter
from typing_extensions import is_typeddict as _is_typeddict

PACKS = os.environ.get("PACKS_BIN", "target/debug/packs")
REPO = Path(__file__).resolve().parents[2]


def packs(*args, stdin=None, packs_dir=None):
    argv = [PACKS]
    if packs_dir is not None:
        argv += ["--packs", str(packs_dir)]
    argv += list(args)
    env = dict(os.environ, PACKS_CACHE_DIR="", XDG_CONFIG_HOME=str(Path(tempfile.gettempdir()) / "packs-sdk-none"))
    env.pop("PACKS_PATH", None)
    out = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {out.returncode}: {out.stderr}")
    return out.stdout


def unwrap(hint):
    """The types a field's hint allows, with Required/NotRequired/Optional/Union taken apart."""
    origin = typing.get_origin(hint)
    if origin in (typing.Required, typing.NotRequired):
        return unwrap(typing.get_args(hint)[0])
    if origin is typing.Union:
        return [t for a in typing.get_args(hint) for t in unwrap(a)]
    return [hint]


def is_typeddict(t):
    # The SDKs declare theirs with typing_extensions, which typing.is_typeddict misses on 3.11.
    return isinstance(t, type) and _is_typeddict(t)


def open_map(t):
    """A hint that takes any mapping (`Dict[str, object]`): no keys to check below it."""
    return t is dict or typing.get_origin(t) in (dict, typing.Mapping) or str(t).startswith("typing.Dict")


def no_unknown_keys(value, typed, where):
    """TypedDicts accept unknown keys silently: check every key is one the type declares."""
    if not isinstance(value, dict):
        return
    hints = typing.get_type_hints(typed, include_extras=True)
    for key, item in value.items():
        assert key in hints, f"{where}: `{key}` is not a field of {typed.__name__} (fields: {sorted(hints)})"
        alternatives = unwrap(hints[key])
        if any(open_map(t) for t in alternatives):
            continue
        dicts = [t for t in alternatives if is_typeddict(t)]
        if isinstance(item, dict) and dicts:
            one_of(item, dicts, f"{where}.{key}")
        lists = [a for t in alternatives if typing.get_origin(t) is not None
                 for a in typing.get_args(t) if is_typeddict(a) or typing.get_origin(a) is typing.Union]
        if isinstance(item, list) and lists:
            inner = [t for a in lists for t in unwrap(a) if is_typeddict(t)]
            for i, x in enumerate(item):
                one_of(x, inner, f"{where}.{key}[{i}]")


def one_of(value, types, where):
    """`value` has only the keys of at least one of `types`."""
    errors = []
    for t in types:
        try:
            no_unknown_keys(value, t, where)
            return
        except AssertionError as e:
            errors.append(str(e))
    raise AssertionError(" / ".join(errors))


def check_typeddict(value, typed, where):
    TypeAdapter(typed).validate_python(value, strict=False)
    one_of(value, [t for t in unwrap(typed) if is_typeddict(t)] or [typed], where)


SHAPES = {
    "name": "all_shapes",
    "description": "Every parameter shape a manifest can declare",
    "parameters": {
        "query": {"type": "string", "required": True, "description": "Text", "minLength": 1, "pattern": "^[^/]+$"},
        "limit": {"type": "integer", "enum": [10, 20, 50], "default": 10},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "when": {"type": "string", "format": "date-time"},
        "filters": {"type": "array", "items": {"type": "object", "properties": {
            "field": {"type": "string"}, "op": {"type": "string", "enum": ["eq", "ne"]}},
            "required": ["field"], "additionalProperties": False}},
        "verbose": {"type": "boolean", "default": False},
    },
    "command": {"program": "printf", "args": ["%s\\n", "{{query}}"]},
}

REFS = {
    "name": "refs",
    "description": "An executable whose schema uses $ref, oneOf and a map",
    "parameters": {
        "type": "object",
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "properties": {
            "at": {"$ref": "#/$defs/point"},
            "shape": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"r": {"type": "number"}}}]},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["at"],
    },
}

TOOLS = [
    {"name": "echo_words", "description": "Echo words back",
     "parameters": {"words": {"type": "string", "required": True}, "loud": {"type": "boolean"}},
     "command": {"program": "echo", "args": ["{{#if loud}}LOUD{{/if}}", "--", "{{words}}"]}},
    {"name": "count", "description": "Print JSON with a count",
     "parameters": {"n": {"type": "integer", "required": True, "enum": [1, 2]}},
     "command": {"program": "printf", "args": ["{\"n\": %s}", "{{n}}"]}, "output": {"format": "json"}},
]


def pack_dir(root):
    root = Path(root)
    for m in [SHAPES, *TOOLS]:
        (root / f"{m['name']}.tool.json").write_text(json.dumps(m))
    exe = root / "refs"
    exe.write_text("#!/bin/sh\nprintf '%s' '" + json.dumps(REFS) + "'\n")
    exe.chmod(0o755)
    return root


def check_exports(dirs):
    for d in dirs:
        where = lambda f: f"{d}: {f}"
        openai = json.loads(packs("catalog", "--format", "openai", packs_dir=d))
        strict = json.loads(packs("catalog", "--format", "openai-strict", packs_dir=d))
        for i, t in enumerate(openai + strict):
            check_typeddict(t, ChatCompletionToolParam, where(f"openai[{i}]"))
            assert t["function"].get("parameters") != {}, where("an empty schema is rejected in strict mode")
        for t in json.loads(packs("catalog", "--format", "openai-responses", packs_dir=d)):
            check_typeddict(t, FunctionToolParam, where(f"openai-responses {t['name']}"))
        for t in json.loads(packs("catalog", "--format", "anthropic", packs_dir=d)):
            check_typeddict(t, at.ToolParam, where(f"anthropic {t['name']}"))
        gemini = gt.Tool.model_validate(json.loads(packs("catalog", "--format", "gemini", packs_dir=d)))
        for decl in gemini.function_declarations:
            assert decl.parameters is None or decl.parameters_json_schema is None, where(decl.name)
        for t in json.loads(packs("catalog", "--format", "mcp", packs_dir=d)):
            mt.Tool.model_validate(t)
        print(f"ok: every export of {d} is what the SDKs' types accept")


def check_calls(d):
    # OpenAI Chat Completions, serialized by the SDK.
    completion = ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "echo_words", "arguments": json.dumps({"words": "hi"})}},
                {"id": "call_2", "type": "function", "function": {"name": "count", "arguments": "{\"n\": 9}"}}]}}]})
    replies = json.loads(packs("call", stdin=completion.model_dump_json(), packs_dir=d))
    assert [r["tool_call_id"] for r in replies] == ["call_1", "call_2"], replies
    for r in replies:
        check_typeddict(r, ChatCompletionToolMessageParam, "openai tool message")
    assert json.loads(replies[1]["content"])["error"]["kind"] == "validation", replies

    # OpenAI Responses.
    response = Response.model_validate({
        "id": "resp_1", "object": "response", "created_at": 0, "model": "gpt-x",
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "count",
                    "arguments": "{\"n\": 2}"}]})
    replies = json.loads(packs("call", stdin=response.model_dump_json(), packs_dir=d))
    for r in replies:
        check_typeddict(r, FunctionCallOutput, "responses function_call_output")
    assert replies[0]["call_id"] == "call_9" and json.loads(replies[0]["output"]) == {"n": 2}, replies

    # Anthropic Messages.
    message = at.Message(
        id="msg_1", type="message", role="assistant", model="claude-x", stop_reason="tool_use",
        content=[at.TextBlock(type="text", text="Counting."),
                 at.ToolUseBlock(type="tool_use", id="toolu_1", name="count", input={"n": 1})],
        usage=at.Usage(input_tokens=1, output_tokens=1))
    reply = json.loads(packs("call", stdin=message.model_dump_json(), packs_dir=d))
    check_typeddict(reply, at.MessageParam, "anthropic user message")
    assert reply["content"][0]["tool_use_id"] == "toolu_1", reply

    # Gemini, as google-genai serializes it (snake_case) and as the REST API writes it (camelCase).
    answer = gt.GenerateContentResponse(candidates=[gt.Candidate(content=gt.Content(role="model", parts=[
        gt.Part(text="Counting."),
        gt.Part(function_call=gt.FunctionCall(id="fc_7", name="count", args={"n": 2}))]))])
    for by_alias in (False, True):
        text = answer.model_dump_json(exclude_none=True, by_alias=by_alias)
        out = packs("call", stdin=text, packs_dir=d)
        content = gt.Content.model_validate_json(out)
        part = content.parts[0].function_response
        assert part.name == "count" and part.id == "fc_7" and part.response == {"n": 2}, out
        key = "functionResponse" if by_alias else "function_response"
        assert key in json.loads(out)["parts"][0], f"answered in the input's style: {out}"

    # A final answer (no call) runs nothing and prints nothing.
    final = ChatCompletion.model_validate({
        "id": "c", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Done."}}]})
    assert packs("call", stdin=final.model_dump_json(), packs_dir=d) == ""
    print("ok: packs call reads what the SDKs serialize and answers in their types")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        d = pack_dir(tmp)
        check_exports([REPO / "packs", d])
        check_calls(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
