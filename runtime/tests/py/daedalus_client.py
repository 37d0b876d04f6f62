"""Daedalus' side of the MCP face, with the official Python `mcp` SDK (2.x in legacy mode, or
1.x): discover agents from the registry, list their tools, chat with progress, read the history
prompt, and poll get_health while the driving test stops and restarts a downstream server.

Usage: daedalus_client.py REGISTRY_BASE_URL AGENT  (driven by runtime/tests/mcp_python.rs)
Talks to the driver on stdout/stdin: prints "STOP" and waits for a line once the downstream
server should go down, "START" likewise; prints "RESULT <json>" and exits 0 when every check
passed, exits 1 with the reason otherwise.
"""

import asyncio
import json
import re
import sys
import urllib.request

import mcp
from driven import check, run, text_of, wait_for_driver

SDK_MAJOR = int(mcp.__version__.split(".")[0]) if hasattr(mcp, "__version__") else None
if SDK_MAJOR is None:
    from importlib.metadata import version

    SDK_MAJOR = int(version("mcp").split(".")[0])

PATTERN = re.compile(r"^(\S+/\S+: (started|completed|failed)|\S+ step \d+ \((llm|tool)\))$")


class Notes:
    """Every server notification that reached the client, by method."""

    def __init__(self):
        self.progress = 0

    async def __call__(self, message):
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method == "notifications/progress":
            self.progress += 1


async def with_session(url, notes, work):
    if SDK_MAJOR >= 2:
        from mcp import Client

        async with Client(url, mode="legacy", message_handler=notes) as client:
            return await work(client)
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url) as (read, write, _):
        async with ClientSession(read, write, message_handler=notes) as session:
            await session.initialize()
            return await work(session)


def is_error(result):
    # 1.x names the field isError, 2.x is_error.
    return bool(getattr(result, "is_error", None) or getattr(result, "isError", None))


async def health(session):
    result = await session.call_tool("get_health", {})
    return json.loads(text_of(result))


async def main(registry_base, agent):
    with urllib.request.urlopen(f"{registry_base}/.well-known/mcp/server.json") as r:
        check(r.headers.get("content-type", "").startswith("application/json"), "registry content type")
        registry = json.load(r)
    remotes = {}
    for entry in registry["servers"]:
        server = entry["server"]
        server_id = server["name"].rsplit("/", 1)[-1]
        urls = [r["url"] for r in server["remotes"] if r["type"] == "streamable-http"]
        check(urls, f"{server_id} has a streamable-http remote")
        remotes[server_id] = urls[0]
    check(agent in remotes, f"{agent} is listed: {sorted(remotes)}")
    summary = {"sdk": SDK_MAJOR, "agents": sorted(remotes)}

    # Every listed agent answers, with send_message, its alias and get_health.
    for server_id, url in remotes.items():
        async def tools(session):
            listed = await session.list_tools()
            return [t.name for t in listed.tools]

        names = await with_session(url, Notes(), tools)
        check("send_message" in names and "get_health" in names, f"{server_id} tools: {names}")
        check(server_id.replace("-", "_") in names, f"{server_id} has its alias: {names}")

    notes = Notes()

    async def chat(session):
        seen = []

        async def on_progress(progress, total, message):
            seen.append((progress, total, message))

        result = await session.call_tool(agent, {"message": "go"}, progress_callback=on_progress)
        check(not is_error(result), f"send_message failed: {text_of(result)}")
        await asyncio.sleep(0.2)
        values = [p for p, _, _ in seen]
        check(len(values) >= 5, f"progress arrived: {seen}")
        check(all(a < b for a, b in zip(values, values[1:])), f"progress only increases: {values}")
        check(all(t is None for _, t, _ in seen), f"total is left out: {seen}")
        messages = [m for _, _, m in seen]
        bad = [m for m in messages if not PATTERN.match(m or "")]
        check(not bad, f"messages follow the patterns: {bad}")
        for expected in (f"{agent} step 1 (llm)", f"{agent} step 1 (tool)", "fx/add: completed",
                         "helper/send_message: started", "helper step 1 (llm)"):
            check(expected in messages, f"{expected!r} in {messages}")
        counted = notes.progress
        check(counted >= len(seen), f"the handler saw progress too ({counted} vs {len(seen)})")

        quiet = await session.call_tool("send_message", {"message": "again"})
        check(not is_error(quiet), f"second call failed: {text_of(quiet)}")
        await asyncio.sleep(0.2)
        check(notes.progress == counted, f"no token, no progress ({notes.progress - counted} arrived)")

        prompts = await session.list_prompts()
        check(f"{agent}_history" in [p.name for p in prompts.prompts], f"prompts: {prompts}")
        history = await session.get_prompt(f"{agent}_history")
        texts = [(m.role, m.content.text) for m in history.messages]
        check(texts[0] == ("user", "go") and texts[-2] == ("user", "again"), f"history: {texts}")

        check((await health(session))["status"] == "ok", "healthy at first")
        wait_for_driver("STOP")
        down = await health(session)
        check(down["status"] == "degraded" and "fx" in down.get("message", ""), f"degraded: {down}")
        wait_for_driver("START")
        up = await health(session)
        check(up["status"] == "ok", f"ok again: {up}")
        return {"progress": len(seen), "history": len(texts), "answer": text_of(result)}

    summary.update(await with_session(remotes[agent], notes, chat))
    return summary


if __name__ == "__main__":
    run(main, sys.argv[1], sys.argv[2])
