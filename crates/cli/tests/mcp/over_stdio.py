"""`baton mcp` over stdio, from the official Python client: the tools listed, an
offline unit run end to end, one followed with `unit_status`, a vague unit stopped with a question answered through
the `answer` tool, and a tool error that says what to do.

    python over_stdio.py BATON_BINARY WORKING_DIRECTORY
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from session import call, check, list_tools, text, unit_end_to_end


async def main(baton, cwd):
    params = StdioServerParameters(command=baton, args=["mcp"], cwd=cwd)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "baton", f"the server is baton ({init.server_info})")
            await list_tools(session)
            done = await unit_end_to_end(session)

            r = await call(session, "start_unit", {"description": "Fix it"})
            s = r.structured_content
            check(not r.is_error and s["status"] == "blocked"
                  and 'What should "Fix it" change' in s["question"],
                  "a vague unit stops at the intake with its question", r)
            check("answer it with `answer`" in text(r), "its text says how to go on", r)
            vague = s["unit"]

            r = await call(session, "answer", {
                "unit": vague[:12], "answer": "Return 429 after 100 requests a minute per key",
                "wait_seconds": 120})
            s = r.structured_content
            check(not r.is_error and "recorded as a decision of human" in text(r)
                  and s["status"] == "finished" and s["verdicts"][-1].endswith("APPROVED"),
                  "the answer is recorded and the unit goes on to APPROVED", r)

            r = await call(session, "answer", {"unit": vague, "answer": "twice"})
            check(r.is_error and "is not waiting for an answer" in text(r),
                  "a second answer is a tool error", r)

            r = await call(session, "unit_status", {"unit": done})
            check(not r.is_error and r.structured_content["plan_locked"] == "P3",
                  "unit_status shows the first unit", r)

            # Not waited for: the unit goes on in the server, followed with unit_status.
            r = await call(session, "start_unit", {
                "description": "Add a health check endpoint", "wait_seconds": 0})
            s = r.structured_content
            check(not r.is_error and s["running"] is True and s["status"] == "active"
                  and "call `unit_status` with `wait_seconds`" in text(r),
                  "a unit not waited for is running, and the text says how to follow it", r)
            r = await call(session, "resume", {"run": s["unit"], "wait_seconds": 0})
            check(not r.is_error and r.structured_content["running"] is True,
                  "resuming a unit this server advances already answers where it is", r)
            r = await call(session, "unit_status", {"unit": s["unit"], "wait_seconds": 120})
            s = r.structured_content
            check(not r.is_error and s["running"] is False and s["status"] == "finished"
                  and s["verdicts"][-1].endswith("APPROVED"),
                  "unit_status waits for it to end", r)

            r = await call(session, "state", {"run": "nosuchrun"})
            check(r.is_error and "no run matches" in text(r) and "`runs` tool" in text(r)
                  and r.structured_content["error"]["code"] == "not_found",
                  "an unknown run is a tool error that says where to look", r)

            r = await call(session, "start_unit", {
                "description": "Add a health check", "gates": ["tests=true"]})
            check(r.is_error and 'give "repo" too' in text(r),
                  "gates without a repository are a tool error that says what is missing", r)

            r = await call(session, "start_unit", {"descripton": "typo"})
            # rmcp answers this one itself, as a tool error the model can correct from.
            check(r.is_error and "unknown field `descripton`, expected one of `description`" in text(r),
                  "arguments a tool does not take are a tool error naming them", r)

            r = await call(session, "create_run", {
                "objective": "Write a haiku", "tasks": ["Draft it", "Polish it"]})
            check(not r.is_error and r.structured_content["outcome"] == "run_created",
                  "a plain run is created", r)
            run = r.structured_content["run"]
            r = await call(session, "step", {"run": run})
            check(not r.is_error and r.structured_content["step"] == "turn",
                  "step runs one turn", r)
            r = await call(session, "compile_briefing", {"run": run, "budget": 800})
            check(not r.is_error and r.structured_content["package"]["budget"] == 800,
                  "compile_briefing compiles at the budget asked", r)
            r = await call(session, "resume", {"run": run, "wait_seconds": 60})
            check(not r.is_error and r.structured_content["end"] == "finished",
                  "resume runs the plain run to its end", r)
            r = await call(session, "state", {"run": run})
            check(not r.is_error and r.structured_content["status"] == "finished",
                  "state shows it finished", r)
            r = await call(session, "runs")
            check(len(r.structured_content["runs"]) == 4, "runs lists the four", r)
            for name, args in [("pools", {}), ("jobs", {}), ("outbox", {}), ("seats", {"run": done})]:
                r = await call(session, name, args)
                check(not r.is_error, f"{name} answers", r)
    print(json.dumps({"done": done, "answered": vague, "run": run}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
