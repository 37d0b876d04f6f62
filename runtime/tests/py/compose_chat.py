"""Daedalus' side of the compose stack, with the official Python `mcp` SDK (2.x): find the
agent in the registry behind the published port, chat with it over MCP, have it call the demo
tools server through `***TOOL`, and read get_health.

Usage: compose_chat.py BASE_URL AGENT   (driven by .ci/compose-test)
Prints "RESULT <json>" and exits 0 when every check passed; exits 1 with the reason otherwise.
"""

import asyncio
import json
import sys
import urllib.request

from mcp import Client


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main(base, agent):
    with urllib.request.urlopen(f"{base}/.well-known/mcp/server.json") as r:
        registry = json.load(r)
    remotes = {
        entry["server"]["name"].rsplit("/", 1)[-1]: entry["server"]["remotes"][0]["url"]
        for entry in registry["servers"]
    }
    check(agent in remotes, f"{agent} is in the registry: {remotes}")
    url = remotes[agent]

    async with Client(url, mode="legacy") as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        check("send_message" in tools and "get_health" in tools, f"tools: {tools}")
        echoed = await client.call_tool("send_message", {"message": "hello over MCP"})
        check(text_of(echoed) == "hello over MCP", f"the agent answered: {text_of(echoed)!r}")
        counted = await client.call_tool(
            "send_message",
            {"message": '***TOOL tools__word_count {"text": "three little words"}'},
        )
        counts = json.loads(text_of(counted))
        check(counts.get("words") == 3, f"the demo tool counted: {counts}")
        health = json.loads(text_of(await client.call_tool("get_health", {})))
        check(health.get("status") == "ok", f"healthy: {health}")
    print("RESULT " + json.dumps({"url": url, "tools": tools, "counts": counts}), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1], sys.argv[2]))
    except AssertionError as e:
        print(f"FAILED {e}", flush=True)
        sys.exit(1)
