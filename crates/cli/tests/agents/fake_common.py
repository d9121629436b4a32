"""What the scripted fake model servers in this folder share.

Each `fake_*.py` here imports it (they put their own folder on `sys.path` first, so
they run from any working directory). For the step-scripted servers (anthropic,
gemini, openai_responses, openai_tools): the command line (`--script`, `--log`,
`--port`, `--fail`), the script file, the choice of a step, the `{cwd}` substitution,
and an HTTP handler that logs every request, refuses every attempt to use it as a
proxy for another host (`"proxied": true` in the log, 403), answers `HEAD` with 200
`{}`, and hands `GET` and `POST` to the server's own code. For all of them: the
JSON-lines request log, the quiet HTTP/1.1 handler base and the server loop that
prints `PORT <n>`. The wire format of each API stays in its own file.
"""

import argparse
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()


def parse_args(fail_help="answer model calls with this status"):
    """`--script`, `--log`, `--port` and `--fail`, the command line of the scripted servers."""
    p = argparse.ArgumentParser()
    p.add_argument("--script", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--fail", type=int, default=0, help=fail_help)
    return p.parse_args()


def load_script(path):
    with open(path) as f:
        return json.load(f)


def arguments_and_script(fail_help="answer model calls with this status"):
    """The parsed command line and the script file it names."""
    args = parse_args(fail_help)
    return args, load_script(args.script)


def append_log(path, entry):
    """Appends `entry` to the JSON-lines log at `path`, one writer at a time."""
    with LOCK:
        with open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")


def pick_step(steps, done):
    """Step `done`, or the last step once the script runs out."""
    return steps[min(done, len(steps) - 1)]


def substitute(value, cwd):
    """`value` with `{cwd}` in every string replaced by `cwd` (kept when it is None)."""
    if isinstance(value, str):
        return value.replace("{cwd}", cwd or "{cwd}")
    if isinstance(value, list):
        return [substitute(v, cwd) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, cwd) for k, v in value.items()}
    return value


def text_of(content):
    """The text of a message's content: a string, or the `text` blocks of a list."""
    if isinstance(content, str):
        return content
    out = []
    for block in content or []:
        if isinstance(block, dict) and block.get("type") == "text":
            out.append(block.get("text", ""))
    return "\n".join(out)


def find_directory(text, patterns):
    """The first path one of `patterns` (case-insensitive) finds in `text`, without
    trailing punctuation; None if none does."""
    for pattern in patterns:
        m = re.search(pattern, text, re.IGNORECASE)
        if m:
            return m.group(1).rstrip(".,`'\"")
    return None


def serve(handler, port, max_seconds=None, daemon_threads=False):
    """Listens on 127.0.0.1:`port` (0: any free port), prints `PORT <n>` first and serves
    until killed, or until `max_seconds` have passed."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    if daemon_threads:
        server.daemon_threads = True
    print(f"PORT {server.server_address[1]}", flush=True)
    if max_seconds is not None:
        timer = threading.Timer(max_seconds, server.shutdown)
        timer.daemon = True
        timer.start()
    server.serve_forever()


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, without the access log on stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *_):
        pass


class ScriptedHandler(QuietHandler):
    """The request handling the scripted servers share. A subclass sets `log_path` (and
    `request_id_header`, to send one) and defines `get()` and `post(body)`."""

    log_path = None
    request_id_header = None

    def reply(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("content-type", content_type)
        if self.request_id_header:
            self.send_header(self.request_id_header, "req_" + uuid.uuid4().hex[:24])
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def record(self, body, **extra):
        entry = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                 "body": body}
        entry.update(extra)
        append_log(self.log_path, entry)

    def do_CONNECT(self):
        # Reached only as the agent's HTTPS_PROXY: a host other than the model's.
        self.record(None, proxied=True)
        self.reply(403, "")

    def proxied(self):
        """A plain-HTTP request for another host, sent here as the agent's proxy."""
        if not self.path.startswith(("http://", "https://")):
            return False
        self.record(None, proxied=True)
        self.reply(403, "")
        return True

    def do_HEAD(self):
        if self.proxied():
            return
        self.record(None)
        self.reply(200, "{}")

    def do_GET(self):
        if self.proxied():
            return
        self.record(None)
        self.get()

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.proxied():
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        self.post(body)
