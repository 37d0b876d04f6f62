"""A reference MCP server written with the official Python `mcp` SDK (2.x, `MCPServer`), served
over Streamable HTTP: a server whose code we did not write, for our MCP client to talk to.

Usage: reference_mcp_server.py [PORT]  (driven by runtime/tests/mcp_python_server.rs)
Listens on 127.0.0.1:PORT (0, the default, picks a free port) at /mcp and prints
"LISTENING <port>" once the port accepts connections. Stops on SIGTERM or SIGINT.

Tools, one of each kind a client must handle:
- add(a, b): typed integer arguments, an integer result (structured as {"result": n});
- echo(message): a string argument, text back;
- divide(dividend, divisor): structured output with an output schema; dividing by zero is an
  error result (isError), not a protocol error;
- count(to): sends a progress notification per step before answering (when the caller sent a
  progress token; its answer says how many it sent);
- sleep(seconds): a slow tool, for read timeouts.
"""

import asyncio
import sys

import uvicorn
from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("python-reference", version="1.0.0")


class Division(BaseModel):
    """Whole-number division."""

    quotient: int
    remainder: int


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def echo(message: str) -> str:
    """Answers with the message it was given."""
    return f"Echo: {message}"


@server.tool()
def divide(dividend: int, divisor: int) -> Division:
    """Divides two integers: the quotient and the remainder."""
    if divisor == 0:
        raise ToolError("cannot divide by zero")
    return Division(quotient=dividend // divisor, remainder=dividend % divisor)


@server.tool()
async def count(to: int, ctx: Context) -> str:
    """Counts to `to`, reporting progress at each step."""
    meta = ctx.request_context.meta or {}
    for step in range(1, to + 1):
        await ctx.report_progress(step, to, f"step {step} of {to}")
    # Without a progress token from the caller the SDK sends nothing: say which it was.
    sent = to if meta.get("progress_token") is not None else 0
    return f"counted to {to} with {sent} progress notifications"


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleeps, then answers."""
    await asyncio.sleep(seconds)
    return f"slept {seconds} s"


class Announcing(uvicorn.Server):
    """Says on stdout when it listens, so the driver needs no polling."""

    async def startup(self, sockets=None):
        await super().startup(sockets=sockets)
        port = self.servers[0].sockets[0].getsockname()[1]
        print(f"LISTENING {port}", flush=True)


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    app = server.streamable_http_app(streamable_http_path="/mcp")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    asyncio.run(Announcing(config).serve())


if __name__ == "__main__":
    main()
