#!/usr/bin/env python3
"""A scripted stand-in for the OpenAI Responses API, as Codex CLI calls it.

Used by crates/cli/tests/suite/agent_codex.rs with Codex 0.171.0 and a custom
provider in `$CODEX_HOME/config.toml` (`base_url = "http://127.0.0.1:PORT/v1"`,
`wire_api = "responses"`, `supports_websockets = false`, `env_key = "CODEX_API_KEY"`);
OPENAI_BASE_URL is ignored by that version.

Listens on 127.0.0.1 only, prints `PORT <n>` first, logs every request (method, path,
headers, body) as one JSON line to --log.

    fake_openai_responses.py --script script.json --log requests.jsonl [--port 0] [--fail 401]

The script is {"steps": [...]}: step i answers the request whose `input` already holds
i tool calls, so the server keeps no conversation state. A step is
    {"function_call": {"name": "...", "arguments": {...}}}
    {"custom_tool_call": {"name": "apply_patch", "input": "*** Begin Patch ..."}}
    {"text": "..."}
A step may also hold `"after_output": "..."`: the output of the previous tool call
(the last `function_call_output` in `input`) must contain that text, so a scripted
edit happens only once the model has seen what it edits. A step whose tool is not in
the request's `tools`, or whose `after_output` is not met, is answered with a text
saying so and logged as a script error. `POST /v1/responses` streams SSE (`response.created`,
`response.output_item.added`, `response.output_text.delta`, `response.output_item.done`,
`response.completed`); `GET /v1/models` lists one model; any other path is a 404.
With --fail 401 every model request is answered 401 in the API's error shape. As an
HTTPS_PROXY it logs and refuses every attempt to reach another host.
"""

import json
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import fake_common  # noqa: E402

CALL_TYPES = ("function_call", "custom_tool_call", "local_shell_call")

ARGS, SCRIPT = fake_common.arguments_and_script(fail_help=None)


def tool_names(body):
    names = []
    for t in body.get("tools") or []:
        names.append(t.get("name") or (t.get("function") or {}).get("name") or t.get("type"))
    return names


def answer(body):
    """The output items for one request, and a script error if any."""
    items = body.get("input") or []
    done = sum(1 for i in items if isinstance(i, dict) and i.get("type") in CALL_TYPES)
    steps = SCRIPT["steps"]
    step = fake_common.pick_step(steps, done)
    tools = tool_names(body)
    if "after_output" in step:
        outputs = [i.get("output") for i in items
                   if isinstance(i, dict) and i.get("type") == "function_call_output"]
        last = outputs[-1] if outputs else None
        if not isinstance(last, str) or step["after_output"] not in last:
            error = f"step {done} expects {step['after_output']!r} in the last tool output, got {last!r}"
            return [message("SCRIPT ERROR: " + error)], error
    for kind in ("function_call", "custom_tool_call"):
        if kind in step:
            call = step[kind]
            if call["name"] not in tools:
                error = f"script names tool {call['name']!r}, the request offers {tools}"
                return [message("SCRIPT ERROR: " + error)], error
            item = {"type": kind, "id": "fc_" + uuid.uuid4().hex[:20], "status": "completed",
                    "call_id": "call_" + uuid.uuid4().hex[:20], "name": call["name"]}
            if kind == "function_call":
                item["arguments"] = json.dumps(call["arguments"])
            else:
                item["input"] = call["input"]
            return [item], None
    return [message(step["text"])], None


def message(text):
    return {"type": "message", "id": "msg_" + uuid.uuid4().hex[:20], "status": "completed",
            "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}


def sse(items, model):
    rid = "resp_" + uuid.uuid4().hex[:20]
    events = []
    seq = [0]

    def event(kind, data):
        data = dict(data, type=kind, sequence_number=seq[0])
        seq[0] += 1
        events.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n")

    base = {"id": rid, "object": "response", "model": model, "output": []}
    event("response.created", {"response": dict(base, status="in_progress")})
    for i, item in enumerate(items):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            event("response.output_item.added", {"output_index": i,
                                                 "item": dict(item, content=[], status="in_progress")})
            for part in (text[: len(text) // 2], text[len(text) // 2:]):
                event("response.output_text.delta", {"output_index": i, "content_index": 0,
                                                     "item_id": item["id"], "delta": part})
        else:
            event("response.output_item.added", {"output_index": i, "item": item})
        event("response.output_item.done", {"output_index": i, "item": item})
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 120}
    event("response.completed", {"response": dict(base, status="completed", output=items, usage=usage)})
    return "".join(events)


class Handler(fake_common.ScriptedHandler):
    log_path = ARGS.log
    request_id_header = "x-request-id"

    def get(self):
        if self.path.split("?")[0] == "/v1/models":
            self.reply(200, json.dumps({"object": "list", "data": [
                {"id": "gpt-fake", "object": "model", "owned_by": "fake"}]}))
        else:
            self.reply(404, json.dumps({"error": {"message": f"no such path {self.path}",
                                                  "type": "invalid_request_error"}}))

    def post(self, body):
        if self.path.split("?")[0] != "/v1/responses":
            self.record(body)
            self.reply(404, json.dumps({"error": {"message": f"no such path {self.path}",
                                                  "type": "invalid_request_error"}}))
            return
        if ARGS.fail:
            self.record(body)
            self.reply(ARGS.fail, json.dumps({"error": {
                "message": "Incorrect API key provided: sk-dumm***. You can find your API key at https://platform.openai.com/account/api-keys.",
                "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}))
            return
        items, script_error = answer(body)
        self.record(body, script_error=script_error, answer=items)
        self.reply(200, sse(items, body.get("model", "gpt-fake")), "text/event-stream")


def main():
    fake_common.serve(Handler, ARGS.port)


if __name__ == "__main__":
    main()
