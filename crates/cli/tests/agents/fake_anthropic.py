#!/usr/bin/env python3
"""A scripted stand-in for the Anthropic Messages API, as Claude Code calls it.

It is "the model" of baton's end-to-end test of the claude preset
(crates/cli/tests/suite/agent_claude.rs). It listens on 127.0.0.1 only, prints
`PORT <n>` on its first line of stdout, and logs every request (method, path, headers,
body) as one JSON line to --log.

    fake_anthropic.py --script script.json --log requests.jsonl [--port 0] [--fail 401]

The script is {"steps": [...]}: step i answers the main conversation's request that
already holds i assistant messages, so a retried request gets the same answer and the
server keeps no conversation state. A step is
    {"tool_use": {"name": "Read", "input": {...}}}   or   {"text": "..."}
and `{cwd}` anywhere in a tool input is replaced by the agent's working directory,
read from its system prompt (or the briefing's "Your workspace:" line). A step whose
tool is not in the request's `tools` list is answered with a text saying so and logged
as a script error: the names come from what the CLI offers, never from a guess.

Requests without tools (a title or topic from the small fast model) get a short text.
`POST /v1/messages/count_tokens` gets a count; `HEAD`/`GET` probes get 200 `{}`; any
other path is a 404 in the API's error shape. With --fail 401 every model request is
answered `401 authentication_error` in the API's own shape.

Set as the agent's HTTPS_PROXY/HTTP_PROXY (with NO_PROXY=127.0.0.1), it also logs
every attempt to reach another host (`"proxied": true`) and refuses it.
"""

import json
import os
import re
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import fake_common  # noqa: E402

ARGS, SCRIPT = fake_common.arguments_and_script()


def working_directory(body):
    system = body.get("system")
    system = system if isinstance(system, str) else fake_common.text_of(system)
    first_user = next((m for m in body.get("messages", []) if m.get("role") == "user"), {})
    for pattern, text in (
        (r"Primary working directory: (\S+)", system),
        (r"Working directory: (\S+)", system),
        (r"Your workspace: (\S+)", fake_common.text_of(first_user.get("content"))),
    ):
        m = re.search(pattern, text or "")
        if m:
            return m.group(1)
    return None


def answer(body):
    """The content blocks and stop reason for one model request."""
    tools = [t.get("name") for t in body.get("tools") or []]
    if not tools:
        return [{"type": "text", "text": "Fix the failing test"}], "end_turn", None
    steps = SCRIPT["steps"]
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    step = fake_common.pick_step(steps, done)
    if "tool_use" in step:
        call = step["tool_use"]
        if call["name"] not in tools:
            error = f"script names tool {call['name']!r}, the request offers {tools}"
            return [{"type": "text", "text": "SCRIPT ERROR: " + error}], "end_turn", error
        block = {
            "type": "tool_use",
            "id": "toolu_" + uuid.uuid4().hex[:20],
            "name": call["name"],
            "input": fake_common.substitute(call["input"], working_directory(body)),
        }
        return [block], "tool_use", None
    return [{"type": "text", "text": step["text"]}], "end_turn", None


def sse(blocks, stop_reason, model):
    events = []

    def event(kind, data):
        events.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n")

    event("message_start", {
        "type": "message_start",
        "message": {
            "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 1,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        },
    })
    event("ping", {"type": "ping"})
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            event("content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "text", "text": ""}})
            text = block["text"]
            for part in (text[: len(text) // 2], text[len(text) // 2:]):
                event("content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "text_delta", "text": part}})
        else:
            start = dict(block, input={})
            event("content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": start})
            raw = json.dumps(block["input"])
            for part in (raw[: len(raw) // 2], raw[len(raw) // 2:]):
                event("content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "input_json_delta",
                                                        "partial_json": part}})
        event("content_block_stop", {"type": "content_block_stop", "index": i})
    event("message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                            "usage": {"output_tokens": 20}})
    event("message_stop", {"type": "message_stop"})
    return "".join(events)


class Handler(fake_common.ScriptedHandler):
    log_path = ARGS.log
    request_id_header = "request-id"

    def error(self, status, kind, message):
        self.reply(status, json.dumps({"type": "error", "error": {"type": kind, "message": message}}))

    def get(self):
        if self.path.split("?")[0].rstrip("/") in ("", "/v1"):
            self.reply(200, "{}")
        else:
            self.error(404, "not_found_error", f"no such path {self.path}")

    def post(self, body):
        path = self.path.split("?")[0]
        if path == "/v1/messages/count_tokens":
            self.record(body)
            self.reply(200, json.dumps({"input_tokens": 100}))
            return
        if path != "/v1/messages":
            self.record(body)
            self.error(404, "not_found_error", f"no such path {self.path}")
            return
        if ARGS.fail:
            self.record(body)
            self.error(ARGS.fail, "authentication_error", "invalid x-api-key")
            return
        blocks, stop_reason, script_error = answer(body)
        self.record(body, script_error=script_error, answer=blocks)
        model = body.get("model", "claude-fake")
        if body.get("stream"):
            self.reply(200, sse(blocks, stop_reason, model), "text/event-stream")
        else:
            self.reply(200, json.dumps({
                "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
                "model": model, "content": blocks, "stop_reason": stop_reason,
                "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 20},
            }))


def main():
    fake_common.serve(Handler, ARGS.port)


if __name__ == "__main__":
    main()
