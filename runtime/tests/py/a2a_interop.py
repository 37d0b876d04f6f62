"""The official A2A Python SDK (a2a-sdk 1.3.0) as a client of our runtime.

Usage: a2a_interop.py <base-url> <JSONRPC|HTTP+JSON|GRPC|JSONRPC-0.3>

Resolves the agent card, picks the binding named (`JSONRPC-0.3` keeps only the card's v0.3
JSON-RPC interface, so the SDK speaks v0.3 through its compat transport), and runs: a blocking
send, get, a streamed send, a send that returns at once and is then canceled, a get of an
unknown task, an input-required task continued by its id, a subscription that joins a running
task, and (v1 only) a paged list of one context's tasks and the extended card. Prints one JSON
line per step for the Rust test to judge.
"""

import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)


def say(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def request(message_id, text, task_id=None, context_id=None, **configuration):
    message = Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        message.task_id = task_id
    if context_id:
        message.context_id = context_id
    return SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(**configuration)
    )


async def last_task(client, req):
    """Sends `req` and answers the last Task the client yields."""
    last = None
    async for response in client.send_message(req):
        if response.HasField("task"):
            last = response.task
    return last


def describe(responses):
    """The kinds of a stream's responses, its text, and its last state."""
    kinds, text, state = [], "", None
    for response in responses:
        if response.HasField("task"):
            kinds.append("task")
            state = state_name(response.task.status.state)
        elif response.HasField("status_update"):
            kinds.append("status")
            state = state_name(response.status_update.status.state)
        elif response.HasField("artifact_update"):
            kinds.append("artifact")
            text += "".join(p.text for p in response.artifact_update.artifact.parts)
    return kinds, text, state


def grpc_channel(target):
    """The SDK's gRPC transport dials the card's GRPC interface (`host:port`) in the clear."""
    import grpc

    return grpc.aio.insecure_channel(target)


def state_name(state):
    return TaskState.Name(state)


async def main(url, binding):
    legacy = binding == "JSONRPC-0.3"
    wire = "JSONRPC" if legacy else binding
    async with httpx.AsyncClient(timeout=30) as http:
        card = None
        if legacy:
            from a2a.client import A2ACardResolver

            card = await A2ACardResolver(http, url).get_agent_card()
            kept = [i for i in card.supported_interfaces if i.protocol_version == "0.3"]
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(kept)
            say("card", v03_interfaces=len(kept))

        async def client(streaming):
            config = ClientConfig(
                streaming=streaming,
                httpx_client=http,
                supported_protocol_bindings=[wire],
                grpc_channel_factory=grpc_channel,
            )
            factory = ClientFactory(config)
            if card is not None:
                return factory.create(card)
            return await factory.create_from_url(url)

        plain = await client(False)
        task = await last_task(plain, request("i-1", "hello"))
        say("send", state=state_name(task.status.state), id=task.id,
            text=task.artifacts[0].parts[0].text if task.artifacts else None)

        got = await plain.get_task(GetTaskRequest(id=task.id))
        say("get", state=state_name(got.status.state), id=got.id)

        streaming = await client(True)
        kinds, text, final_state = describe(
            [r async for r in streaming.send_message(request("i-2", "streamed words"))]
        )
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

        asked = await last_task(plain, request("i-4", "***INPUT which colour?"))
        answered = await last_task(plain, request("i-5", "blue", task_id=asked.id))
        say("input", asked=state_name(asked.status.state), id_kept=answered.id == asked.id,
            state=state_name(answered.status.state))

        running = await last_task(
            plain, request("i-6", "***SLEEP 1500ms joined late", return_immediately=True)
        )
        kinds, text, final_state = describe(
            [r async for r in streaming.subscribe(SubscribeToTaskRequest(id=running.id))]
        )
        say("subscribe", kinds=kinds, text=text, state=final_state)

        if legacy:
            return
        context = "interop-list"
        ids = []
        for i in range(5):
            ids.append((await last_task(plain, request(f"l-{i}", f"task {i}",
                                                       context_id=context))).id)
        listed, token, pages = [], "", 0
        while True:
            page = await plain.list_tasks(
                ListTasksRequest(context_id=context, page_size=2, page_token=token)
            )
            pages += 1
            listed.extend(t.id for t in page.tasks)
            token = page.next_page_token
            if not token:
                break
        say("list", pages=pages, total=page.total_size, newest_first=listed == ids[::-1])

        extended = await plain.get_extended_agent_card(GetExtendedAgentCardRequest())
        say("extended", name=extended.name,
            bindings=sorted({i.protocol_binding for i in extended.supported_interfaces}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
