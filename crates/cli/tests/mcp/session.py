"""What the MCP scenarios share: the tools baton must list, and checks that say what
was answered when they fail. Run by crates/cli/tests/suite/mcp.rs with the official
Python SDK (`mcp`, installed by .ci/mcp/install.sh)."""

import json
import sys

TOOLS = {
    "start_unit", "unit_status", "answer", "create_run", "step", "resume", "cancel",
    "runs", "state", "compile_briefing", "enqueue", "jobs", "outbox", "judge",
    "pools", "bench_pool", "unbench_pool", "seats",
}


def text(result):
    return result.content[0].text if result.content else ""


def check(cond, what, result=None):
    if not cond:
        shown = ""
        if result is not None:
            shown = f"\n  is_error={result.is_error}\n  text={text(result)!r}\n  structured={json.dumps(result.structured_content)[:2000]}"
        sys.exit(f"FAILED: {what}{shown}")
    print(f"ok: {what}", flush=True)


async def call(session, name, args=None):
    result = await session.call_tool(name, args or {})
    print(f"-> {name} {json.dumps(args or {})}\n   {text(result)}", flush=True)
    return result


async def list_tools(session):
    listed = await session.list_tools()
    names = {t.name for t in listed.tools}
    check(names == TOOLS, f"the tools listed are baton's: {sorted(names)}")
    for t in listed.tools:
        check(bool(t.description) and t.input_schema.get("type") == "object",
              f"{t.name} has a description and an object input schema")


async def unit_end_to_end(session):
    """An offline unit started and ended in one call, as `baton line` offline ends."""
    r = await call(session, "start_unit", {
        "description": "Add rate limiting to the public API", "wait_seconds": 120})
    s = r.structured_content
    check(not r.is_error and s["status"] == "finished" and s["verdicts"] == ["V1 APPROVED"]
          and s["turns"] == 29 and s["running"] is False,
          "an offline unit runs to APPROVED in 29 turns", r)
    check("is done after 29 turns: APPROVED" in text(r), "its text says it is done", r)
    return s["unit"]
