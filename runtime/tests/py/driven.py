"""The side of a test client script that talks to its Rust driver (`support::python::PythonClient`):
a check that fails with a reason, a word the driver acts on before the script goes on, and the
end of the script: "RESULT <json>" and exit 0, or "FAILED <reason>" and exit 1.
"""

import asyncio
import json
import sys


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def wait_for_driver(word):
    """Asks the driver to act (`word`, one line) and waits for its "ok"."""
    print(word, flush=True)
    line = sys.stdin.readline()
    check(line.strip() == "ok", f"the driver answered {line!r} to {word}")


def text_of(result):
    """The text blocks of a tool result, one per line."""
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def run(main, *args):
    """Runs `main(*args)` and prints its summary as the result, or why a check failed."""
    try:
        summary = asyncio.run(main(*args))
    except AssertionError as e:
        print(f"FAILED {e}", flush=True)
        sys.exit(1)
    print("RESULT " + json.dumps(summary), flush=True)
