#!/usr/bin/env bash
# Installs the official MCP Python SDK (PyPI's `mcp`, pinned) into a virtualenv outside
# the repository, for tests that need a real MCP client or server speaking stdio or
# streamable HTTP. Idempotent: the install leaves a marker naming the version, so a
# second run only checks that the SDK imports and prints paths.
#
#   BATON_MCP_CACHE  where to install (default ~/.cache/baton/mcp)
#   PYTHON           interpreter for the venv, 3.10 or newer (default python3)
set -euo pipefail

CACHE="${BATON_MCP_CACHE:-$HOME/.cache/baton/mcp}"
PYTHON="${PYTHON:-python3}"
MCP_VERSION=2.3.0

VENV="$CACHE/venv"
started=$SECONDS

say() { echo "mcp: $*"; }
die() { echo "mcp: error: $*" >&2; exit 1; }

mkdir -p "$CACHE"

if [ ! -x "$VENV/bin/python" ]; then
    command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (set PYTHON to a Python 3.10+ interpreter)"
    "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
        die "$("$PYTHON" --version 2>&1) is too old: mcp $MCP_VERSION needs Python 3.10+ (set PYTHON)"
    say "creating venv $VENV with $("$PYTHON" --version 2>&1)"
    # A venv whose interpreter is gone (its base Python removed) is made anew, marker and all.
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV" || die "$PYTHON -m venv $VENV failed (on Debian: apt-get install python3-venv)"
else
    say "venv $VENV (cached)"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)

marker="$VENV/.mcp-$MCP_VERSION"
if [ ! -f "$marker" ]; then
    rm -f "$VENV"/.mcp-*
    say "pip install mcp==$MCP_VERSION"
    "${PIP[@]}" install --quiet "mcp==$MCP_VERSION" ||
        die "pip install mcp==$MCP_VERSION failed"
    # What the pin resolved to, for comparing a later failure with this install.
    "${PIP[@]}" freeze >"$CACHE/resolved.txt"
    touch "$marker"
else
    say "mcp==$MCP_VERSION (cached)"
fi

# The client sessions the tests use, over both transports, must import.
if ! err="$("$VENV/bin/python" -c 'import mcp; from mcp.client.stdio import stdio_client; from mcp.client.streamable_http import streamable_http_client' 2>&1)"; then
    echo "$err" >&2
    rm -f "$marker"
    die "the mcp SDK in $VENV does not import (the marker is removed: run again to reinstall)"
fi
got="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("mcp"))')"
[ "$got" = "$MCP_VERSION" ] || die "$VENV has mcp $got, expected $MCP_VERSION (remove $VENV and run again)"

say "done in $((SECONDS - started))s"
echo "mcp: python $VENV/bin/python, mcp $got"
