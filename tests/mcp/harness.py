"""What every MCP client test here shares: named checks that report and go on, manifests
written into a pack directory, free loopback ports, scratch directories, and the summary and
exit status.

The tests run as scripts (`python tests/mcp/test_x.py`), so this directory is on sys.path.
"""

import atexit
import json
import shutil
import socket
import sys
import tempfile
import traceback
from pathlib import Path

RESULTS = []


async def check(name, fn):
    """Run the check `fn`; a failure is reported with its traceback and the run goes on."""
    try:
        await fn()
        RESULTS.append((name, None))
        print(f"PASS {name}")
    except Exception:  # noqa: BLE001 - report every failure and go on
        RESULTS.append((name, traceback.format_exc()))
        print(f"FAIL {name}\n{traceback.format_exc()}")


def manifest(directory, name, **body):
    """Write `NAME.tool.json` (described as "The NAME tool") into `directory`."""
    path = Path(directory) / f"{name}.tool.json"
    path.write_text(json.dumps({"name": name, "description": f"The {name} tool", **body}))
    return path


def scratch(prefix):
    """A new temporary directory, removed when the script exits. The servers a test starts
    keep their state there (`PACKS_STATE_DIR`: the approval key `packs serve` opens at
    start), never in the real user's home."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def finish():
    """Print the summary and exit: 1 if any check failed."""
    failed = sum(1 for _, e in RESULTS if e)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
