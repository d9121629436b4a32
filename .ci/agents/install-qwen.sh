#!/usr/bin/env bash
# Installs the Qwen Code version baton's qwen preset is proven with into a cache
# outside the repository, for the end-to-end test crates/cli/tests/suite/agent_qwen.rs.
# Idempotent: a second run finds the binary and returns at once.
#
#   .ci/agents/install-qwen.sh          # installs, prints the binary's path
#   BATON_AGENTS_CACHE=DIR .ci/agents/install-qwen.sh
set -euo pipefail

version=0.24.4
cache="${BATON_AGENTS_CACHE:-$HOME/.cache/baton/agents}"
dir="$cache/qwen-$version"
bin="$dir/node_modules/.bin/qwen"

if [ -x "$bin" ] && [ -f "$dir/.installed" ]; then
    echo "install-qwen: qwen $version already in $dir"
    echo "$bin"
    exit 0
fi

command -v npm >/dev/null || { echo "install-qwen: npm not found" >&2; exit 1; }

echo "install-qwen: installing @qwen-code/qwen-code@$version into $dir"
mkdir -p "$dir"
rm -f "$dir/.installed"
# No audit, no funding notice, no update notice: nothing beyond the registry.
npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier --loglevel=error \
    "@qwen-code/qwen-code@$version"
got="$("$bin" --version 2>/dev/null || true)"
case "$got" in
    "$version"*) ;;
    *) echo "install-qwen: $bin --version printed '$got', expected $version" >&2; exit 1 ;;
esac
touch "$dir/.installed"
echo "install-qwen: installed qwen $got"
echo "$bin"
