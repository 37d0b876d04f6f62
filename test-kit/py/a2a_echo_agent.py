"""An echo agent on the official A2A Python SDK (a2a-sdk 1.3.0 server, uvicorn), with v0.3
compat on: the agent other agents call in the agent-to-agent test, and the baseline of the A2A
benchmark.

Usage: a2a_echo_agent.py <port> [<grpc-port>]

With a gRPC port it serves the SDK's gRPC binding there too (`GrpcHandler` on a `grpc.aio`
server, `a2a-sdk[grpc]`), and its card lists that interface.

It answers "echo: <text>". "SLEEP <seconds> <text>" waits first (a cancel ends the wait).
"ASK <question>" asks for input; the answer to it is echoed. Every request's `traceparent`, and
every cancel, is printed as one JSON line on stdout; "ready" is printed once it serves.
"""

import asyncio
import json
import sys

import uvicorn
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
)


def say(**fields):
    print(json.dumps(fields), flush=True)


class Echo(AgentExecutor):
    async def execute(self, context, event_queue):
        if context.current_task is None:
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        text = context.get_user_input()
        if text.startswith("ASK "):
            await updater.requires_input(
                updater.new_agent_message([Part(text=text[4:])])
            )
            return
        if text.startswith("SLEEP "):
            _, seconds, text = text.split(" ", 2)
            await asyncio.sleep(float(seconds))
        await updater.add_artifact([Part(text=f"echo: {text}")], name="echo")
        await updater.complete()

    async def cancel(self, context, event_queue):
        say(canceled=context.task_id)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def app(port, grpc_port=None):
    card = echo_card(port, grpc_port)
    handler = echo_handler(card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(
        handler, "/a2a/jsonrpc", enable_v0_3_compat=True
    )
    return TraceLog(Starlette(routes=routes)), handler


def echo_handler(card):
    return DefaultRequestHandler(
        agent_executor=Echo(), task_store=InMemoryTaskStore(), agent_card=card
    )


def echo_card(port, grpc_port):
    url = f"http://127.0.0.1:{port}"
    interfaces = [
        AgentInterface(url=f"{url}/a2a/jsonrpc", protocol_binding="JSONRPC",
                       protocol_version="1.0"),
    ]
    if grpc_port is not None:
        interfaces.append(AgentInterface(url=f"127.0.0.1:{grpc_port}", protocol_binding="GRPC",
                                         protocol_version="1.0"))
    return AgentCard(
        name="Echo",
        description="Echoes input",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echo text back",
                           tags=["echo"])],
    )


class TraceLog:
    """ASGI middleware: prints each POST's traceparent."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = dict(scope["headers"])
            traceparent = headers.get(b"traceparent")
            say(traceparent=traceparent.decode() if traceparent else None)
        await self.inner(scope, receive, send)


async def serve_grpc(handler, grpc_port):
    """The SDK's gRPC binding over the same handler."""
    import grpc

    from a2a.server.request_handlers.grpc_handler import GrpcHandler
    from a2a.types import a2a_pb2_grpc

    server = grpc.aio.server()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    await server.start()
    return server


async def main(port, grpc_port=None):
    asgi, handler = app(port, grpc_port)
    if grpc_port is not None:
        grpc_server = await serve_grpc(handler, grpc_port)
    config = uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning",
                            access_log=False)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    say(ready=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main(*(int(arg) for arg in sys.argv[1:3])))
