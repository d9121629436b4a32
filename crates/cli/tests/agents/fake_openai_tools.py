#!/usr/bin/env python3
"""A scripted stand-in for an OpenAI-compatible chat-completions server that calls the
agent's tools, as Qwen Code calls it at OPENAI_BASE_URL.

It is "the model" of baton's end-to-end test of the qwen preset
(crates/cli/tests/suite/agent_qwen.rs). It listens on 127.0.0.1 only, prints
`PORT <n>` on its first line of stdout, and logs every request (method, path, headers,
body) as one JSON line to --log.

    fake_openai_tools.py --script script.json --log requests.jsonl [--port 0] [--fail 401]

The script is {"steps": [...]}: step i answers the main conversation's request that
already holds i assistant messages, so a retried request gets the same answer and the
server keeps no conversation state. A step is
    {"call": {"name": "read_file", "arguments": {...}}}   or   {"text": "..."}
and `{cwd}` anywhere in the arguments is replaced by the agent's working directory,
read from its system prompt or first user message. A step whose function is not in the
request's `tools`, or that leaves out one of its required parameters, is answered with
a text saying so and logged as a script error: the names come from what the CLI
offers, never from a guess.

Requests without tools (a title, a summary) get a short text. `GET .../models` lists
one model; any other path is a 404 in the API's error shape. With --fail 401 every
model request is answered `401 invalid_api_key` in the API's own shape.

Set as the agent's HTTPS_PROXY/HTTP_PROXY (with NO_PROXY=127.0.0.1), it also logs
every attempt to reach another host (`"proxied": true`) and refuses it.
"""

import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import fake_common  # noqa: E402

ARGS, SCRIPT = fake_common.arguments_and_script()


def working_directory(body):
    text = "\n".join(
        fake_common.text_of(m.get("content")) for m in body.get("messages", [])
        if m.get("role") in ("system", "user"))
    return fake_common.find_directory(text, (
        r"currently working in the directory: (/\S+)",
        r"working directory[^/\n]*?(/\S+)",
        r"Your workspace: (\S+)",
    ))


def answer(body):
    """The assistant message for one request, and a script error if any."""
    tools = {t["function"]["name"]: t["function"] for t in body.get("tools") or []
             if t.get("type") == "function"}
    if not tools:
        return {"role": "assistant", "content": "Fix the failing test"}, None
    steps = SCRIPT["steps"]
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    step = fake_common.pick_step(steps, done)
    if "call" in step:
        call = step["call"]
        decl = tools.get(call["name"])
        if decl is None:
            error = f"script names tool {call['name']!r}, the request offers {sorted(tools)}"
            return {"role": "assistant", "content": "SCRIPT ERROR: " + error}, error
        required = (decl.get("parameters") or {}).get("required") or []
        missing = [p for p in required if p not in call["arguments"]]
        if missing:
            error = f"script leaves out {missing} of {call['name']}: {json.dumps(decl)}"
            return {"role": "assistant", "content": "SCRIPT ERROR: " + error}, error
        cwd = working_directory(body)
        if cwd is None and "{cwd}" in json.dumps(call["arguments"]):
            error = "the request names no working directory to put for {cwd}"
            return {"role": "assistant", "content": "SCRIPT ERROR: " + error}, error
        args = fake_common.substitute(call["arguments"], cwd)
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{
                "id": "call_" + uuid.uuid4().hex[:20],
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(args)},
            }],
        }, None
    return {"role": "assistant", "content": step["text"]}, None


USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


def chunks(message, rid, created, model):
    """The streamed form of `message`: a role chunk, its content or tool call in two
    pieces, the finish reason, the usage."""
    def chunk(delta, finish=None, usage=None):
        obj = {"id": rid, "object": "chat.completion.chunk", "created": created,
               "model": model, "choices": [{"index": 0, "delta": delta,
                                            "finish_reason": finish}]}
        if usage is not None:
            obj["choices"] = []
            obj["usage"] = usage
        return "data: " + json.dumps(obj) + "\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        raw = call["function"]["arguments"]
        out.append(chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"],
                                                       "arguments": raw[: len(raw) // 2]}}]}))
        out.append(chunk({"tool_calls": [{"index": 0,
                                          "function": {"arguments": raw[len(raw) // 2:]}}]}))
        out.append(chunk({}, "tool_calls"))
    else:
        text = message["content"]
        for part in (text[: len(text) // 2], text[len(text) // 2:]):
            out.append(chunk({"content": part}))
        out.append(chunk({}, "stop"))
    out.append(chunk({}, usage=USAGE))
    out.append("data: [DONE]\n\n")
    return "".join(out)


class Handler(fake_common.ScriptedHandler):
    log_path = ARGS.log

    def error(self, status, code, message):
        self.reply(status, json.dumps({"error": {"message": message, "type":
                                                 "invalid_request_error", "param": None,
                                                 "code": code}}))

    def get(self):
        if self.path.split("?")[0].rstrip("/").endswith("/models"):
            self.reply(200, json.dumps({"object": "list", "data": [
                {"id": "fake-model", "object": "model", "created": 0, "owned_by": "baton"}]}))
        else:
            self.error(404, "not_found", f"no such path {self.path}")

    def post(self, body):
        if not self.path.split("?")[0].rstrip("/").endswith("/chat/completions"):
            self.record(body)
            self.error(404, "not_found", f"no such path {self.path}")
            return
        if ARGS.fail:
            self.record(body)
            self.error(ARGS.fail, "invalid_api_key",
                       "Incorrect API key provided. You can find your API key at your provider.")
            return
        message, script_error = answer(body)
        self.record(body, script_error=script_error, answer=message)
        model = body.get("model", "fake-model")
        rid = "chatcmpl-" + uuid.uuid4().hex[:20]
        created = int(time.time())
        if body.get("stream"):
            self.reply(200, chunks(message, rid, created, model), "text/event-stream")
        else:
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            self.reply(200, json.dumps({
                "id": rid, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": USAGE,
            }))


def main():
    fake_common.serve(Handler, ARGS.port)


if __name__ == "__main__":
    main()
