#!/usr/bin/env python3
"""A scripted stand-in for an OpenAI-compatible model server, for end-to-end tests of
coding-agent CLIs (aider through litellm and the openai SDK).

It is "the model": each `POST .../chat/completions` is answered with the next reply of
a JSON script (the last reply is repeated once the script runs out), as a plain
completion or, when the request asks for `"stream": true`, as server-sent events.
Every request it receives is appended to a JSON-lines log (method, path, headers that
matter, body), so a test can assert what the agent sent and that it asked for nothing
but the model. Anything else gets an OpenAI-style error: `GET .../models` an empty
list, any other path 404, and a proxy `CONNECT` (the agent's environment may name this
server as its HTTPS proxy, so an attempt to reach the internet shows up here) 403.

    fake_openai_chat.py --script script.json --log requests.jsonl [--port 0] [--max-seconds 600]

The script: {"replies": [{"content": "...", "requires": "text", "once": true}, "plain reply", ...]}.
Each request is answered with the first reply whose `requires` text (if any) occurs in
the request's messages and that is not a `once` reply already given; when none is
left, the last reply. So a reply can wait for what the agent must show first (the
file's content, once the agent added it to the chat) without the test depending on
how many rounds the agent takes to get there.
It listens on 127.0.0.1 only, prints `PORT <n>` on its first line of standard output,
and stops by itself after --max-seconds.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import fake_common  # noqa: E402

LOCK = threading.Lock()


class State:
    def __init__(self, replies, log_path):
        self.replies = replies
        self.log_path = log_path
        self.answered = 0
        self.used = set()

    def next_reply(self, messages):
        text = "\n".join(str(m.get("content", "")) for m in messages)
        with LOCK:
            self.answered += 1
            for i, reply in enumerate(self.replies):
                if isinstance(reply, str):
                    return reply
                if reply.get("once") and i in self.used:
                    continue
                if reply.get("requires") and reply["requires"] not in text:
                    continue
                self.used.add(i)
                return reply["content"]
            last = self.replies[-1]
            return last if isinstance(last, str) else last["content"]

    def log(self, entry):
        fake_common.append_log(self.log_path, entry)


def make_handler(state):
    class Handler(fake_common.QuietHandler):
        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return {"unparsed": raw.decode("utf-8", "replace")}

        def _record(self, body):
            state.log(
                {
                    "method": self.command,
                    "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "user_agent": self.headers.get("User-Agent"),
                    "body": body,
                }
            )

        def _json(self, status, obj):
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status, message):
            self._json(
                status,
                {"error": {"message": message, "type": "invalid_request_error", "code": None}},
            )

        def do_CONNECT(self):
            self._record(None)
            self.send_response(403, "no internet in tests")
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.close_connection = True

        def do_GET(self):
            self._record(None)
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": []})
            else:
                self._error(404, f"no such endpoint: GET {self.path}")

        def do_POST(self):
            body = self._body()
            self._record(body)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._error(404, f"no such endpoint: POST {self.path}")
                return
            if not isinstance(body, dict) or not body.get("messages"):
                self._error(400, "a chat completion needs messages")
                return
            content = state.next_reply(body["messages"])
            model = body.get("model", "fake")
            prompt_tokens = sum(len(str(m.get("content", ""))) // 4 for m in body["messages"])
            usage = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(content) // 4,
                "total_tokens": prompt_tokens + len(content) // 4,
            }
            created = int(time.time())
            rid = f"chatcmpl-fake-{state.answered}"
            if body.get("stream"):
                self._stream(rid, created, model, content, usage)
                return
            self._json(
                200,
                {
                    "id": rid,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                },
            )

        def _stream(self, rid, created, model, content, usage):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

            def chunk(delta, finish=None, with_usage=False):
                obj = {
                    "id": rid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                if with_usage:
                    obj["usage"] = usage
                self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

            chunk({"role": "assistant", "content": ""})
            for i in range(0, len(content), 40):
                chunk({"content": content[i : i + 40]})
            chunk({}, finish="stop", with_usage=True)
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=600)
    args = parser.parse_args()
    with open(args.script, encoding="utf-8") as f:
        replies = json.load(f)["replies"]
    if not replies:
        sys.exit("the script has no replies")
    fake_common.serve(make_handler(State(replies, args.log)), args.port,
                      max_seconds=args.max_seconds, daemon_threads=True)


if __name__ == "__main__":
    main()
