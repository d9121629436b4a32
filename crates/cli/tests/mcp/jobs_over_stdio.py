"""`baton mcp` over stdio, for jobs and pools: pools listed, one benched and put back,
two candidates queued in a git repository (run by `baton work` in between, as a
coordinator would start it), their outbox, and a judge that cannot be asked as a tool
error that says what to do.

    python jobs_over_stdio.py BATON_BINARY REPOSITORY
"""

import asyncio
import json
import subprocess
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from session import call, check, text


async def main(baton, repo):
    params = StdioServerParameters(command=baton, args=["mcp"], cwd=repo)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await call(session, "pools")
            pools = [p["id"] for p in r.structured_content["pools"]]
            check(not r.is_error and pools == ["pa", "pb"] and "2 pool(s)" in text(r),
                  "pools lists the configured pools", r)
            r = await call(session, "bench_pool", {"pool": "pa", "reason": "weekly cap"})
            check(not r.is_error and r.structured_content["benched"] is True, "pa is benched", r)
            r = await call(session, "pools")
            benched = r.structured_content["pools"][0]["benched"]
            check(benched["reason"] == "weekly cap" and benched["by"] == "baton mcp",
                  "the bench shows with its reason, as by baton mcp", r)
            r = await call(session, "unbench_pool", {"pool": "pa"})
            check(not r.is_error and r.structured_content["benched"] is False, "pa is back", r)
            r = await call(session, "bench_pool", {"pool": "nosuchpool"})
            check(r.is_error and "nosuchpool" in text(r), "an unknown pool is a tool error", r)

            r = await call(session, "enqueue", {
                "objective": "Write two files", "tasks": ["write a.txt", "write b.txt"],
                "candidates": ["a", "b"], "repo": repo})
            s = r.structured_content
            check(not r.is_error and s["outcome"] == "enqueued" and len(s["jobs"]) == 2,
                  "two candidates are queued", r)
            group = s["group"]
            r = await call(session, "jobs")
            check([j["status"] for j in r.structured_content["jobs"]] == ["queued", "queued"],
                  "jobs shows them queued", r)
            r = await call(session, "outbox")
            check(r.structured_content["jobs"] == [] and "the outbox is empty" in text(r),
                  "the outbox is empty before they run", r)

            worked = subprocess.run([baton, "work"], cwd=repo, capture_output=True, text=True)
            check(worked.returncode == 0, f"baton work runs them: {worked.stdout}{worked.stderr}")

            r = await call(session, "outbox")
            jobs = r.structured_content["jobs"]
            check(len(jobs) == 2 and all(j["status"] == "outbox" and j["outbox"]["branch"] for j in jobs),
                  "both are in the outbox with their branches", r)
            r = await call(session, "outbox", {"job": jobs[1]["id"]})
            check(len(r.structured_content["jobs"]) == 1, "one job's outbox", r)
            r = await call(session, "judge", {"group": group})
            check(r.is_error and r.structured_content["error"]["message"] == text(r),
                  "a group with no API model to judge is a tool error", r)
    print(json.dumps({"group": group}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
