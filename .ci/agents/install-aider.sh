#!/usr/bin/env bash
# Installs the pinned aider CLI that baton's `aider` preset is proven with, into a
# virtualenv outside the repository, so the end-to-end test (crates/cli/tests/suite/
# agent_aider.rs) can find it. Idempotent: a second run checks the version and exits.
#
#   BATON_AGENTS_CACHE  cache root (default: $HOME/.cache/baton/agents)
#   PYTHON              interpreter for the venv (default: python3.11, else python3)
set -euo pipefail

version=0.86.2
cache="${BATON_AGENTS_CACHE:-$HOME/.cache/baton/agents}"
dir="$cache/aider-$version"
bin="$dir/bin/aider"

if [[ -x "$bin" && -f "$dir/.baton-installed" ]]; then
    echo "install-aider: aider $version already installed at $bin"
    "$bin" --version
    exit 0
fi

python="${PYTHON:-}"
if [[ -z "$python" ]]; then
    if command -v python3.11 >/dev/null 2>&1; then python=python3.11; else python=python3; fi
fi
echo "install-aider: creating venv $dir with $("$python" --version 2>&1)"
rm -rf "$dir"
mkdir -p "$cache"
"$python" -m venv "$dir"
echo "install-aider: pip install aider-chat==$version (this takes a few minutes)"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    "aider-chat==$version"
"$bin" --version
touch "$dir/.baton-installed"
echo "install-aider: installed $bin"
