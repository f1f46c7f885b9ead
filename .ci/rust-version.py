#!/usr/bin/env python3
"""Fail when Cargo.toml's rust-version is below what a locked dependency declares.

`cargo metadata` lists every package of the lock file's resolve with its own
`rust-version`; packs' must be at least the highest of them, or a user on the version
packs names gets a build error from a dependency instead of cargo's clear message.
"""
import json
import subprocess
import sys


def version(text):
    return tuple(int(part) for part in text.split("."))


meta = json.loads(
    subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
)
resolved = {node["id"] for node in meta["resolve"]["nodes"]}
root = meta["resolve"]["root"]
ours = next(p for p in meta["packages"] if p["id"] == root)
needed = max(
    (version(p["rust_version"]), p["name"], p["version"])
    for p in meta["packages"]
    if p["id"] in resolved and p["id"] != root and p.get("rust_version")
)
if version(ours["rust_version"]) < needed[0]:
    print(
        f"Cargo.toml says rust-version = \"{ours['rust_version']}\", but {needed[1]} {needed[2]} "
        f"needs {'.'.join(map(str, needed[0]))}: raise it (and the README's set-up line)",
        file=sys.stderr,
    )
    sys.exit(1)
print(f"rust-version {ours['rust_version']} covers every dependency (the highest: {needed[1]} {needed[2]}, "
      f"{'.'.join(map(str, needed[0]))})")
