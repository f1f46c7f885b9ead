#!/usr/bin/env python3
"""What a process's first JSON Schema validator costs, with and without the `fast-start`
feature (jsonschema's `macros`: the meta-schemas compiled at build time), in one run
(issue 30, item 5).

    python3 benches/first_validator.py [--runs 200]

A one-shot `packs run` compiles one validator for the tool it calls, and jsonschema checks
the tool's schema against draft 7's meta-schema first. Without `macros` that meta-schema is
itself compiled into a validator the first time a process needs it; with `macros` the check
is code generated at build time. This builds a small program against the jsonschema version
packs pins (Cargo.lock), twice (feature off, on), in a scratch directory with packs' release
profile, then runs the two alternately: each run times the first `draft7::new` of a
manifest-shaped schema in a fresh process, and a second one in the same process (what a
server pays per tool). Prints the medians in microseconds and the difference.
"""

import argparse
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MAIN = r"""
use std::time::Instant;
fn main() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"path": {"type": "string", "description": "A path"}},
        "required": ["path"],
        "additionalProperties": false
    });
    let t = Instant::now();
    let first = jsonschema::draft7::new(&schema).unwrap();
    let first_ns = t.elapsed().as_nanos();
    let t = Instant::now();
    let second = jsonschema::draft7::new(&schema).unwrap();
    let second_ns = t.elapsed().as_nanos();
    let call = serde_json::json!({"path": "a"});
    assert!(first.is_valid(&call) && second.is_valid(&call));
    println!("{first_ns} {second_ns}");
}
"""


def pinned(name):
    lock = (ROOT / "Cargo.lock").read_text()
    m = re.search(r'name = "%s"\nversion = "([^"]+)"' % re.escape(name), lock)
    return m.group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "src").mkdir()
        (d / "src/main.rs").write_text(MAIN)
        (d / "Cargo.toml").write_text(f"""[package]
name = "first-validator"
version = "0.0.0"
edition = "2021"
publish = false

[features]
macros = ["jsonschema/macros"]

[dependencies]
jsonschema = {{ version = "={pinned('jsonschema')}", default-features = false }}
serde_json = "={pinned('serde_json')}"

[profile.release]
lto = "fat"
codegen-units = 1
""")
        (d / "Cargo.lock").write_bytes((ROOT / "Cargo.lock").read_bytes())
        bins = {}
        for name, features in (("off", []), ("on", ["--features", "macros"])):
            subprocess.run(["cargo", "build", "--quiet", "--release", *features], cwd=d, check=True)
            bins[name] = d / f"first-validator-{name}"
            (d / "target/release/first-validator").rename(bins[name])
        times = {name: ([], []) for name in bins}
        for _ in range(a.runs):
            for name, binary in bins.items():
                first, second = subprocess.run([binary], capture_output=True, text=True, check=True).stdout.split()
                times[name][0].append(int(first) / 1000)
                times[name][1].append(int(second) / 1000)
        print(f"jsonschema {pinned('jsonschema')}, {a.runs} runs each, alternating; median microseconds")
        print(f"{'fast-start':<12}{'first validator':>18}{'second':>10}")
        med = {}
        for name, (first, second) in times.items():
            med[name] = statistics.median(first)
            print(f"{name:<12}{med[name]:>18.1f}{statistics.median(second):>10.1f}")
        print(f"saved per process: {med['off'] - med['on']:.1f} us")


if __name__ == "__main__":
    main()
