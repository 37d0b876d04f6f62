"""Daedalus' client (the official Python `mcp` SDK, 2.x in legacy mode) whose MCP session the
runtime ends to make room: its next call fails with "Session terminated", and it reconnects
(a new session, as Streamable HTTP prescribes) and gets its answer.

Usage: evicted_client.py MCP_URL  (driven by runtime/tests/mcp_sessions.rs)
Prints "CALLED" after its first call and waits for a line ("ok") once the driver has ended its
session; prints "RESULT <json>" and exits 0, or "FAILED <why>" and exits 1.
"""

import asyncio
import json
import sys

from mcp import Client


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def main(url):
    async with Client(url, mode="legacy") as client:
        first = await client.call_tool("send_message", {"message": "before"})
        check(text_of(first) == "before", f"first answer: {text_of(first)!r}")
        print("CALLED", flush=True)
        line = sys.stdin.readline()
        check(line.strip() == "ok", f"the driver answered {line!r}")
        try:
            await client.call_tool("send_message", {"message": "lost"})
            ended = None
        except Exception as e:  # the SDK raises its MCP error for a terminated session
            ended = str(e)
    check(ended is not None, "the call on the ended session failed")
    async with Client(url, mode="legacy") as client:
        again = await client.call_tool("send_message", {"message": "after"})
    print("RESULT " + json.dumps({"ended": ended, "answer": text_of(again)}), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1]))
    except AssertionError as e:
        print(f"FAILED {e}", flush=True)
        sys.exit(1)
