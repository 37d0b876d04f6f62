"""Daedalus' client (the official Python `mcp` SDK, 2.x in legacy mode) whose MCP session the
runtime ends to make room: its next call fails with "Session terminated", and it reconnects
(a new session, as Streamable HTTP prescribes) and gets its answer.

Usage: evicted_client.py MCP_URL  (driven by runtime/tests/mcp_sessions.rs)
Prints "CALLED" after its first call and waits for a line ("ok") once the driver has ended its
session; prints "RESULT <json>" and exits 0, or "FAILED <why>" and exits 1.
"""

import sys

from driven import check, run, wait_for_driver
from mcp import Client


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


async def main(url):
    async with Client(url, mode="legacy") as client:
        first = await client.call_tool("send_message", {"message": "before"})
        check(text_of(first) == "before", f"first answer: {text_of(first)!r}")
        wait_for_driver("CALLED")
        try:
            await client.call_tool("send_message", {"message": "lost"})
            ended = None
        except Exception as e:  # the SDK raises its MCP error for a terminated session
            ended = str(e)
    check(ended is not None, "the call on the ended session failed")
    async with Client(url, mode="legacy") as client:
        again = await client.call_tool("send_message", {"message": "after"})
    return {"ended": ended, "answer": text_of(again)}


if __name__ == "__main__":
    run(main, sys.argv[1])
