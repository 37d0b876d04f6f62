"""A fast-agent module that builds some arguments at import time: the migration cannot read
those and leaves marked placeholders."""

import os

from mcp_agent.core.fastagent import FastAgent
from mcp_agent.core.request_params import RequestParams

from .prompts import TRIAGE_PROMPT

fast = FastAgent("support")
TOOLS = ["tickets", os.environ.get("EXTRA_SERVER", "kb")]


@fast.agent(
    name="triage",
    instruction=TRIAGE_PROMPT,
    servers=TOOLS,
    model=os.environ.get("TRIAGE_MODEL", "gpt-4.1"),
    request_params=RequestParams(temperature=0.0, maxTokens=int(os.environ["MAX"])),
    human_input=False,
)
async def triage():
    pass


@fast.agent(name="kb_writer", instruction=f"Write articles for {fast.name}.", servers=["kb"])
async def kb_writer():
    pass
