"""The official A2A Python SDK (a2a-sdk 1.3.0) reading every answer shape of our runtime.

Usage: a2a_shapes.py <base-url> <JSONRPC|HTTP+JSON>

The runtime serves the `tck` model, whose scenarios are named by messageId prefix. Sends, with
the SDK's client on the binding named: a Message reply, file artifacts (bytes, URL), a data
artifact, a rejected task, and a task whose webhook is set up with the message. Prints one
JSON line per step for the Rust test to judge.
"""

import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)
from google.protobuf.json_format import MessageToDict


def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def request(message_id, **configuration):
    message = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text="shapes")])
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(**configuration))


async def answers(client, req):
    """What the client yields for `req`, each as ("task"|"message", dict)."""
    out = []
    async for response in client.send_message(req):
        if response.HasField("task"):
            out.append(("task", MessageToDict(response.task)))
        elif response.HasField("message"):
            out.append(("message", MessageToDict(response.message)))
    return out


def grpc_channel(target):
    """The SDK's gRPC transport dials the card's GRPC interface (`host:port`) in the clear."""
    import grpc

    return grpc.aio.insecure_channel(target)


async def main(url, binding):
    async with httpx.AsyncClient(timeout=30) as http:
        config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=[binding],
                              grpc_channel_factory=grpc_channel)
        client = await ClientFactory(config).create_from_url(url)

        got = await answers(client, request("tck-message-response-1"))
        say("reply", kinds=[k for k, _ in got], parts=got[-1][1].get("parts"), role=got[-1][1].get("role"))

        for step, prefix in [("file", "tck-artifact-file-1"), ("url", "tck-artifact-file-url-1"), ("data", "tck-artifact-data-1")]:
            got = await answers(client, request(prefix))
            task = got[-1][1]
            say(step, state=task["status"]["state"], part=task["artifacts"][0]["parts"][0])

        got = await answers(client, request("tck-reject-task-1"))
        task = got[-1][1]
        say("rejected", state=task["status"]["state"],
            why=task["status"]["message"]["parts"][0]["text"])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
