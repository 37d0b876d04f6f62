"""A 2026-07-28 client listening for tool changes (`subscriptions/listen`) on one agent's MCP
endpoint, with the official Python `mcp` SDK (2.x).

Usage: listen_client.py URL  (driven by runtime/tests/reload.rs)
Asks "LISTENING" once the server acknowledged the subscription and waits for the driver's
"ok"; then, at the first change, lists the tools again and prints them as the result.
"""

import sys

from driven import run, wait_for_driver
from mcp import Client


async def main(url):
    async with Client(url, mode="2026-07-28") as client:
        async with client.listen(tools_list_changed=True) as subscription:
            wait_for_driver("LISTENING")
            async for _event in subscription:
                tools = await client.list_tools(cache_mode="bypass")
                return {"tools": [t.name for t in tools.tools]}
    return {"tools": None}


if __name__ == "__main__":
    run(main, sys.argv[1])
