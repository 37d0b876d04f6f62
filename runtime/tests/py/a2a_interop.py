"""The official A2A Python SDK (a2a-sdk 1.3.0) as a client of our runtime.

Usage: a2a_interop.py <base-url> <JSONRPC|HTTP+JSON>

Resolves the agent card, picks the binding named, and runs: a blocking send, get, a streamed
send, a send that returns at once and is then canceled, and a get of an unknown task. Prints one
JSON line per step for the Rust test to judge.
"""

import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskState,
)


def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def request(message_id, text, **configuration):
    message = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])
    return SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(**configuration)
    )


def state_name(state):
    return TaskState.Name(state)


async def main(url, binding):
    async with httpx.AsyncClient(timeout=30) as http:
        def factory(streaming):
            config = ClientConfig(
                streaming=streaming,
                httpx_client=http,
                supported_protocol_bindings=[binding],
            )
            return ClientFactory(config)

        plain = await factory(False).create_from_url(url)
        last = None
        async for response in plain.send_message(request("i-1", "hello")):
            last = response
        task = last.task
        say("send", state=state_name(task.status.state), id=task.id,
            text=task.artifacts[0].parts[0].text if task.artifacts else None)

        got = await plain.get_task(GetTaskRequest(id=task.id))
        say("get", state=state_name(got.status.state), id=got.id)

        streaming = await factory(True).create_from_url(url)
        kinds = []
        text = ""
        final_state = None
        async for response in streaming.send_message(request("i-2", "streamed words")):
            if response.HasField("task"):
                kinds.append("task")
                final_state = state_name(response.task.status.state)
            elif response.HasField("status_update"):
                kinds.append("status")
                final_state = state_name(response.status_update.status.state)
            elif response.HasField("artifact_update"):
                kinds.append("artifact")
                text += "".join(p.text for p in response.artifact_update.artifact.parts)
        say("stream", kinds=kinds, text=text, state=final_state)

        started = None
        async for response in plain.send_message(
            request("i-3", "***SLEEP 60s too late", return_immediately=True)
        ):
            started = response.task
        say("started", state=state_name(started.status.state))
        canceled = await plain.cancel_task(CancelTaskRequest(id=started.id))
        say("cancel", state=state_name(canceled.status.state))

        try:
            await plain.get_task(GetTaskRequest(id="no-such-task"))
            say("unknown", error=None)
        except Exception as error:  # the SDK's typed error for TaskNotFound
            say("unknown", error=type(error).__name__, message=str(error))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
