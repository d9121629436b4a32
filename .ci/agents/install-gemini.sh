#!/usr/bin/env bash
# Installs the Gemini CLI version baton's gemini preset is proven with into a cache
# outside the repository, for the end-to-end test crates/cli/tests/suite/agent_gemini.rs.
# Idempotent: a second run finds the binary and returns at once.
#
#   .ci/agents/install-gemini.sh          # installs, prints the binary's path
#   BATON_AGENTS_CACHE=DIR .ci/agents/install-gemini.sh
set -euo pipefail

version=0.61.0
cache="${BATON_AGENTS_CACHE:-$HOME/.cache/baton/agents}"
dir="$cache/gemini-$version"
bin="$dir/node_modules/.bin/gemini"

if [ -x "$bin" ] && [ -f "$dir/.installed" ]; then
    echo "install-gemini: gemini $version already in $dir"
    echo "$bin"
    exit 0
fi

command -v npm >/dev/null || { echo "install-gemini: npm not found" >&2; exit 1; }

echo "install-gemini: installing @google/gemini-cli@$version into $dir"
mkdir -p "$dir"
rm -f "$dir/.installed"
# No audit, no funding notice, no update notice: nothing beyond the registry.
npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier --loglevel=error \
    "@google/gemini-cli@$version"
got="$("$bin" --version 2>/dev/null || true)"
case "$got" in
    "$version"*) ;;
    *) echo "install-gemini: $bin --version printed '$got', expected $version" >&2; exit 1 ;;
esac
touch "$dir/.installed"
echo "install-gemini: installed gemini $got"
echo "$bin"
