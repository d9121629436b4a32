"""`baton mcp` over stdio, left while a unit runs: the unit is started without waiting
and the session ended at once. Prints the unit's id; the Rust test then checks that
`baton mcp` stopped it (nothing half-done committed, its lease released) and that
`baton line --resume` finishes it.

    python left_over_stdio.py BATON_BINARY WORKING_DIRECTORY
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from session import call, check


async def main(baton, cwd):
    params = StdioServerParameters(command=baton, args=["mcp"], cwd=cwd)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await call(session, "start_unit", {
                "description": "Add rate limiting to the public API", "wait_seconds": 0})
            check(not r.is_error and r.structured_content["running"] is True,
                  "the unit runs on after the call", r)
    print(json.dumps({"unit": r.structured_content["unit"]}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
