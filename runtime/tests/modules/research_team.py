"""A fast-agent module as a Pallas deployment has them: two agents, every argument literal."""

import asyncio

from mcp_agent.core.fastagent import FastAgent
from mcp_agent.core.request_params import RequestParams

fast = FastAgent("research-team")


@fast.agent(
    name="researcher",
    instruction="""You research questions with the search tools.
Cite every source you use.""",
    servers=["search", "fetch"],
    model="openai.gpt-4.1-mini",
    request_params=RequestParams(maxTokens=4096, temperature=0.1, max_iterations=12),
)
async def researcher():
    async with fast.run() as agent:
        await agent.interactive()


@fast.agent(
    "editor",
    "You edit drafts for " 'clarity and tone.',
    servers=["fetch"],
    model="claude-sonnet-4-5",
    use_history=True,
)
async def editor():
    pass


if __name__ == "__main__":
    asyncio.run(researcher())
