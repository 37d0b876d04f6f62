"""A client on MCP 2026-07-28 against the runtime's MCP face, with the official Python `mcp` SDK
(2.x): stateless requests, no session. Every check a legacy Daedalus session makes (tools,
send_message with progress, the conversation continued, its history) and what only the new
revision has: input-required as a multi-round trip (the SDK's elicitation callback answers the
agent's question and the SDK retries), and long turns as tasks of the tasks extension (a task
polled to completion, a task canceled mid-turn).

Usage: modern_client.py MODE URL AGENT  (driven by runtime/tests/mcp_modern.rs)
MODE is a `Client(mode=...)`: "2026-07-28" or "auto". Talks to the driver on stdout/stdin: prints
"HANGING" and waits for a line once a task's turn should be inside the downstream `hang` tool;
prints "RESULT <json>" and exits 0 when every check passed, "FAILED <reason>" and exits 1
otherwise.
"""

import asyncio
import json
import re
import sys
from typing import Literal

from pydantic import ConfigDict, Field

import mcp_types as types
from mcp import Client
from driven import check, run, text_of, wait_for_driver
from mcp.client.extension import ClientExtension, ResultClaim

PATTERN = re.compile(r"^(\S+/\S+: (started|completed|failed)|\S+ step \d+ \((llm|tool)\))$")
TASKS = "io.modelcontextprotocol/tasks"


# The tasks extension, as a client writes it with the SDK's extension points: a claim on the
# `task` result shape of tools/call, resolved by polling tasks/get.
class TaskParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class TasksGet(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class TasksCancel(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


class UpdateParams(types.RequestParams):
    task_id: str = Field(alias="taskId")
    input_responses: dict = Field(alias="inputResponses")


class TasksUpdate(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param = "taskId"


class AnyResult(types.Result):
    model_config = ConfigDict(extra="allow")


class CreateTaskResult(types.Result):
    """The task handle, its fields at the top level (SEP-2663)."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


async def get_task(session, task_id):
    result = await session.send_request(TasksGet(params=TaskParams(taskId=task_id)), AnyResult)
    return result.model_dump(by_alias=True, exclude_none=True)


async def poll(session, task_id, until, rounds=400):
    for _ in range(rounds):
        task = await get_task(session, task_id)
        if task["status"] in until:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} never reached {until}: {task}")


async def resolve(created, ctx):
    task = await poll(ctx.session, created.task_id, {"completed", "failed", "cancelled"})
    check(task["status"] == "completed", f"the task ended {task}")
    return types.CallToolResult.model_validate(task["result"])


class Tasks(ClientExtension):
    identifier = TASKS

    def claims(self):
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=resolve)]


async def main(mode, url, agent):
    summary = {"mode": mode}
    progress_notes = []

    async def on_message(message):
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/progress":
            progress_notes.append(root)

    async with Client(url, mode=mode, message_handler=on_message) as client:
        check(client.protocol_version == "2026-07-28", f"negotiated {client.protocol_version}")
        summary["version"] = client.protocol_version
        tools = await client.list_tools()
        names = [t.name for t in tools.tools]
        check({"send_message", "get_health", agent} <= set(names), f"tools: {names}")
        schema = next(t for t in tools.tools if t.name == "send_message").input_schema
        check("conversation_id" in schema["properties"], f"conversation_id in {schema}")

        seen = []

        async def on_progress(progress, total, message):
            seen.append((progress, total, message))

        first = await client.call_tool(agent, {"message": "go"}, progress_callback=on_progress)
        check(not first.is_error, f"send_message failed: {text_of(first)}")
        values = [p for p, _, _ in seen]
        check(len(values) >= 5, f"progress arrived: {seen}")
        check(all(a < b for a, b in zip(values, values[1:])), f"progress only increases: {values}")
        messages = [m for _, _, m in seen]
        check(all(PATTERN.match(m or "") for m in messages), f"patterns: {messages}")
        for expected in (f"{agent} step 1 (llm)", "fx/add: completed", "helper/send_message: started"):
            check(expected in messages, f"{expected!r} in {messages}")
        conversation = (first.meta or {}).get("conversation_id")
        check(conversation, f"the answer names its conversation: {first.meta}")

        again = await client.call_tool("send_message", {"message": "again", "conversation_id": conversation})
        check(not again.is_error, f"second call failed: {text_of(again)}")
        check((again.meta or {}).get("conversation_id") == conversation, f"same conversation: {again.meta}")
        history = await client.get_prompt(f"{agent}_history", {"conversation_id": conversation})
        texts = [(m.role, m.content.text) for m in history.messages]
        check(texts[0] == ("user", "go") and texts[-2] == ("user", "again"), f"history: {texts}")
        health = json.loads(text_of(await client.call_tool("get_health", {})))
        check(health["status"] == "ok", f"health: {health}")
        summary.update(answer=text_of(first), again=text_of(again), history=len(texts))

    # Input required: the agent asks, the SDK hands the question to the elicitation callback and
    # retries with the answer; the same turn goes on.
    questions = []

    async def elicit(context, params):
        questions.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "Lisbon"})

    async with Client(url, mode=mode, elicitation_callback=elicit) as client:
        asked = await client.call_tool(agent, {"message": "book a trip"})
        check(not asked.is_error, f"the answered turn failed: {text_of(asked)}")
        check(questions == ["Which city?"], f"the question reached the callback: {questions}")
        summary["after_input"] = text_of(asked)

    # Long turns as tasks: a task polled to completion, and one canceled mid-turn.
    async with Client(url, mode=mode, extensions=[Tasks()]) as client:
        done = await client.call_tool(agent, {"message": "take your time"})
        check(not done.is_error, f"the task's answer: {text_of(done)}")
        summary["task_answer"] = text_of(done)

        # A task that asks: input_required with the question, answered by tasks/update.
        asked = await client.session.call_tool(agent, {"message": "plan it"}, allow_claimed=True)
        check(isinstance(asked, CreateTaskResult), f"a task came back: {asked!r}")
        waiting = await poll(client.session, asked.task_id, {"input_required", "completed", "failed", "cancelled"})
        check(waiting["status"] == "input_required", f"waiting for input: {waiting}")
        ((key, form),) = waiting["inputRequests"].items()
        check(form["params"]["message"] == "Which date?", f"the question: {form}")
        answer = {key: {"action": "accept", "content": {"answer": "Friday"}}}
        update = UpdateParams(taskId=asked.task_id, inputResponses=answer)
        await client.session.send_request(TasksUpdate(params=update), AnyResult)
        updated = await poll(client.session, asked.task_id, {"completed", "failed", "cancelled"})
        check(updated["status"] == "completed", f"completed after the answer: {updated}")
        summary["updated_task"] = text_of(types.CallToolResult.model_validate(updated["result"]))

        created = await client.session.call_tool(agent, {"message": "hang on"}, allow_claimed=True)
        check(isinstance(created, CreateTaskResult), f"a task came back: {created!r}")
        task_id = created.task_id
        check(created.status == "working", f"created working: {created}")
        wait_for_driver("HANGING")
        await client.session.send_request(TasksCancel(params=TaskParams(taskId=task_id)), AnyResult)
        canceled = await poll(client.session, task_id, {"cancelled", "completed", "failed"})
        check(canceled["status"] == "cancelled", f"canceled: {canceled}")
        summary["canceled_task"] = task_id
    return summary


if __name__ == "__main__":
    run(main, sys.argv[1], sys.argv[2], sys.argv[3])
