#!/usr/bin/env bash
# Installs the Codex CLI version baton's codex preset is proven with into a cache
# outside the repository, for the end-to-end test crates/cli/tests/suite/agent_codex.rs.
# Idempotent: a second run finds the binary and returns at once.
#
#   .ci/agents/install-codex.sh          # installs, prints the binary's path
#   BATON_AGENTS_CACHE=DIR .ci/agents/install-codex.sh
set -euo pipefail

version=0.171.0
cache="${BATON_AGENTS_CACHE:-$HOME/.cache/baton/agents}"
dir="$cache/codex-$version"
bin="$dir/node_modules/.bin/codex"

if [ -x "$bin" ] && [ -f "$dir/.installed" ]; then
    echo "install-codex: codex $version already in $dir"
    echo "$bin"
    exit 0
fi

command -v npm >/dev/null || { echo "install-codex: npm not found (Node 18+ needed)" >&2; exit 1; }

echo "install-codex: installing @openai/codex@$version into $dir"
mkdir -p "$dir"
rm -f "$dir/.installed"
# No audit, no funding notice, no update notice: nothing beyond the registry.
npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier --loglevel=error \
    "@openai/codex@$version"
got="$("$bin" --version 2>/dev/null || true)"
case "$got" in
    "codex-cli $version"*) ;;
    *) echo "install-codex: $bin --version printed '$got', expected $version" >&2; exit 1 ;;
esac
touch "$dir/.installed"
echo "install-codex: installed codex $got"
echo "$bin"
