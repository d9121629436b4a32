#!/usr/bin/env python3
"""A scripted stand-in for the Gemini API (`generateContent`, `streamGenerateContent`),
as Gemini CLI calls it at GOOGLE_GEMINI_BASE_URL.

It is "the model" of baton's end-to-end test of the gemini preset
(crates/cli/tests/suite/agent_gemini.rs). It listens on 127.0.0.1 only, prints
`PORT <n>` on its first line of stdout, and logs every request (method, path, headers,
body) as one JSON line to --log.

    fake_gemini.py --script script.json --log requests.jsonl [--port 0] [--fail 400]

The script is {"steps": [...]}: step i answers the main conversation's request that
already holds i `model` turns, so a retried request gets the same answer and the
server keeps no conversation state. A step is
    {"call": {"name": "read_file", "args": {...}}}   or   {"text": "..."}
and `{cwd}` anywhere in the args is replaced by the agent's working directory, read
from the conversation (Gemini CLI states it in its first user turn). A step whose
function is not among the request's `functionDeclarations`, or that leaves out one of
its required parameters, is answered with a text saying so and logged as a script
error: the names come from what the CLI offers, never from a guess.

Requests without function declarations (Gemini CLI's helpers: a routing classifier,
a next-speaker check, a title) get a value of the JSON schema they ask for (the first
choice of each field), else a short text. `:countTokens` gets a count; any other path is a 404 in the API's error shape.
With --fail 400 every model request is answered as the API answers an invalid key.

Set as the agent's HTTPS_PROXY/HTTP_PROXY (with NO_PROXY=127.0.0.1), it also logs
every attempt to reach another host (`"proxied": true`) and refuses it.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import fake_common  # noqa: E402

ARGS, SCRIPT = fake_common.arguments_and_script()


def texts(body):
    out = []
    system = body.get("systemInstruction") or {}
    for part in system.get("parts", []) if isinstance(system, dict) else []:
        out.append(part.get("text", ""))
    for content in body.get("contents", []):
        for part in content.get("parts", []):
            if isinstance(part, dict) and "text" in part:
                out.append(part["text"])
    return "\n".join(out)


def working_directory(body):
    return fake_common.find_directory(texts(body), (
        r"Workspace Directories:\**\s*- (/\S+)",
        r"working directory[^/\n]*?(/\S+)",
        r"Your workspace: (\S+)",
    ))


def declarations(body):
    out = {}
    for tool in body.get("tools") or []:
        for decl in tool.get("functionDeclarations") or []:
            out[decl.get("name")] = decl
    return out


def required_params(decl):
    schema = decl.get("parametersJsonSchema") or decl.get("parameters") or {}
    return schema.get("required") or []


def sample(schema):
    """A value of the JSON schema a helper request asks for (the first choice of each)."""
    kind = str(schema.get("type", "")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        return {k: sample(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "simple"


def answer(body):
    """The parts for one model request, and a script error if any."""
    decls = declarations(body)
    if not decls:
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":
            return [{"text": json.dumps(sample(config.get("responseJsonSchema") or {}))}], None
        return [{"text": "Fix the failing test"}], None
    steps = SCRIPT["steps"]
    done = sum(1 for c in body.get("contents", []) if c.get("role") == "model")
    step = fake_common.pick_step(steps, done)
    if "call" in step:
        call = step["call"]
        decl = decls.get(call["name"])
        if decl is None:
            error = f"script names function {call['name']!r}, the request offers {sorted(decls)}"
            return [{"text": "SCRIPT ERROR: " + error}], error
        missing = [p for p in required_params(decl) if p not in call["args"]]
        if missing:
            error = f"script leaves out {missing} of {call['name']}: {json.dumps(decl)}"
            return [{"text": "SCRIPT ERROR: " + error}], error
        args = fake_common.substitute(call["args"], working_directory(body))
        return [{"functionCall": {"name": call["name"], "args": args}}], None
    return [{"text": step["text"]}], None


def response(parts, model, last=True):
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    if last:
        candidate["finishReason"] = "STOP"
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20,
                          "totalTokenCount": 120},
        "modelVersion": model,
    }


class Handler(fake_common.ScriptedHandler):
    log_path = ARGS.log

    def error(self, status, state, message):
        self.reply(status, json.dumps(
            {"error": {"code": status, "message": message, "status": state}}))

    def get(self):
        self.error(404, "NOT_FOUND", f"no such path {self.path}")

    def post(self, body):
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/v1(?:beta|alpha)?/models/([^/:]+):(\w+)", path)
        method = m.group(2) if m else None
        if method == "countTokens":
            self.record(body)
            self.reply(200, json.dumps({"totalTokens": 100}))
            return
        if method not in ("generateContent", "streamGenerateContent"):
            self.record(body)
            self.error(404, "NOT_FOUND", f"no such path {self.path}")
            return
        if ARGS.fail:
            self.record(body)
            self.error(ARGS.fail, "INVALID_ARGUMENT",
                       "API key not valid. Please pass a valid API key.")
            return
        parts, script_error = answer(body)
        self.record(body, script_error=script_error, answer=parts)
        model = m.group(1)
        if method == "streamGenerateContent":
            # alt=sse: one event per chunk; the text comes in two.
            chunks = []
            if len(parts) == 1 and "text" in parts[0] and len(parts[0]["text"]) > 1:
                text = parts[0]["text"]
                chunks = [[{"text": text[: len(text) // 2]}], [{"text": text[len(text) // 2:]}]]
            else:
                chunks = [parts]
            events = "".join(
                "data: " + json.dumps(response(c, model, i == len(chunks) - 1)) + "\r\n\r\n"
                for i, c in enumerate(chunks))
            self.reply(200, events, "text/event-stream")
        else:
            self.reply(200, json.dumps(response(parts, model)))


def main():
    fake_common.serve(Handler, ARGS.port)


if __name__ == "__main__":
    main()
