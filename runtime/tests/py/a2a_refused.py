"""What the official A2A Python SDK (a2a-sdk 1.3.0) tells its caller when a turn is refused.

Usage: a2a_refused.py <base-url> <api-key or -> <text> <blocking|streaming> [...]

Resolves the agent card, then for each mode sends one message saying <text> over JSON-RPC,
with the API key in `X-API-Key` unless it is `-`, and prints one JSON line: the state the task
reached, or the exception the SDK raised (its type and its message, which is all its caller
has to go on).
"""

import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState


async def main(url, key, text, modes):
    headers = {} if key == "-" else {"X-API-Key": key}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        for n, mode in enumerate(modes):
            config = ClientConfig(
                streaming=mode == "streaming",
                httpx_client=http,
                supported_protocol_bindings=["JSONRPC"],
            )
            client = await ClientFactory(config).create_from_url(url)
            message = Message(
                message_id=f"refused-{mode}-{n}", role=Role.ROLE_USER, parts=[Part(text=text)]
            )
            try:
                state = None
                async for response in client.send_message(SendMessageRequest(message=message)):
                    if response.HasField("task"):
                        state = TaskState.Name(response.task.status.state)
                    elif response.HasField("status_update"):
                        state = TaskState.Name(response.status_update.status.state)
                print(json.dumps({"step": mode, "state": state}), flush=True)
            except Exception as error:  # what the caller is told
                print(
                    json.dumps({"step": mode, "error": type(error).__name__, "message": str(error)}),
                    flush=True,
                )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
