"""A 2026-07-28 client listening for tool changes (`subscriptions/listen`) on one agent's MCP
endpoint, with the official Python `mcp` SDK (2.x).

Usage: listen_client.py URL  (driven by runtime/tests/reload.rs)
Prints "LISTENING" once the server acknowledged the subscription, then "CHANGED <tool names>"
when the first change arrives (after re-listing the tools), and exits 0.
"""

import asyncio
import sys

from mcp import Client


async def main(url):
    async with Client(url, mode="2026-07-28") as client:
        async with client.listen(tools_list_changed=True) as subscription:
            print("LISTENING", flush=True)
            async for _event in subscription:
                tools = await client.list_tools(cache_mode="bypass")
                print("CHANGED " + " ".join(t.name for t in tools.tools), flush=True)
                return


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
