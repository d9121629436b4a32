"""`/mcp` under `baton serve`, over streamable HTTP, from the official Python client:
the tools listed and an offline unit run end to end; without a token, another `Host`
or another site's `Origin` refused (403); with a token, a request without
it (or with another) is refused with 401 and the client sending it as
`Authorization: Bearer` is served.

    python over_http.py BASE_URL [TOKEN]
"""

import asyncio
import json
import sys

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from session import check, list_tools, unit_end_to_end

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "probe", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


async def refused_without(url, token):
    async with httpx2.AsyncClient(timeout=30) as http:
        for headers, what in [({}, "no token"), ({"Authorization": "Bearer not-" + token}, "another token")]:
            r = await http.post(url, json=INITIALIZE, headers={**ACCEPT, **headers})
            check(r.status_code == 401 and "needs its token" in r.text,
                  f"{what}: refused with 401 ({r.status_code} {r.text[:200]})")


async def other_sites_refused(url):
    """Without a token the server answers its loopback names only (DNS rebinding), and
    no other site's page may call it (Origin)."""
    async with httpx2.AsyncClient(timeout=30) as http:
        r = await http.post(url, json=INITIALIZE, headers={**ACCEPT, "Host": "evil.example:80"})
        check(r.status_code == 403, f"another Host is refused with 403 ({r.status_code} {r.text[:200]})")
        r = await http.post(url, json=INITIALIZE, headers={**ACCEPT, "Origin": "http://evil.example"})
        check(r.status_code == 403, f"another site's Origin is refused with 403 ({r.status_code} {r.text[:200]})")


async def main(base, token):
    url = base.rstrip("/") + "/mcp"
    headers = {}
    if token:
        await refused_without(url, token)
        headers["Authorization"] = f"Bearer {token}"
    else:
        await other_sites_refused(url)
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
    async with http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await list_tools(session)
                done = await unit_end_to_end(session)
    print(json.dumps({"done": done}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
