#!/usr/bin/env bash
# Installs the opencode version baton's opencode preset is proven with into a cache
# outside the repository, for the end-to-end test crates/cli/tests/suite/agent_opencode.rs.
# Idempotent: a second run finds the binary and returns at once.
#
#   .ci/agents/install-opencode.sh          # installs, prints the binary's path
#   BATON_AGENTS_CACHE=DIR .ci/agents/install-opencode.sh
set -euo pipefail

version=1.18.33
cache="${BATON_AGENTS_CACHE:-$HOME/.cache/baton/agents}"
dir="$cache/opencode-$version"
bin="$dir/node_modules/.bin/opencode"

if [ -x "$bin" ] && [ -f "$dir/.installed" ]; then
    echo "install-opencode: opencode $version already in $dir"
    echo "$bin"
    exit 0
fi

command -v npm >/dev/null || { echo "install-opencode: npm not found" >&2; exit 1; }

echo "install-opencode: installing opencode-ai@$version into $dir"
mkdir -p "$dir"
rm -f "$dir/.installed"
# No audit, no funding notice, no update notice: nothing beyond the registry.
npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier --loglevel=error \
    "opencode-ai@$version"
got="$("$bin" --version 2>/dev/null || true)"
case "$got" in
    "$version"*) ;;
    *) echo "install-opencode: $bin --version printed '$got', expected $version" >&2; exit 1 ;;
esac
touch "$dir/.installed"
echo "install-opencode: installed opencode $got"
echo "$bin"
