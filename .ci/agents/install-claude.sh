#!/usr/bin/env bash
# Installs the Claude Code CLI version baton's claude preset is proven with into a cache
# outside the repository, for the end-to-end test crates/cli/tests/suite/agent_claude.rs.
# Idempotent: a second run finds the binary and returns at once.
#
#   .ci/agents/install-claude.sh          # installs, prints the binary's path
#   BATON_AGENTS_CACHE=DIR .ci/agents/install-claude.sh
set -euo pipefail

version=2.1.197
cache="${BATON_AGENTS_CACHE:-$HOME/.cache/baton/agents}"
dir="$cache/claude-$version"
bin="$dir/node_modules/.bin/claude"

if [ -x "$bin" ] && [ -f "$dir/.installed" ]; then
    echo "install-claude: claude $version already in $dir"
    echo "$bin"
    exit 0
fi

command -v npm >/dev/null || { echo "install-claude: npm not found (Node 18+ needed)" >&2; exit 1; }

echo "install-claude: installing @anthropic-ai/claude-code@$version into $dir"
mkdir -p "$dir"
rm -f "$dir/.installed"
# --ignore-scripts is not used: the package's postinstall only checks the platform.
# No audit, no funding notice, no update notice: nothing beyond the registry.
npm install --prefix "$dir" --no-audit --no-fund --no-update-notifier --loglevel=error \
    "@anthropic-ai/claude-code@$version"
got="$("$bin" --version 2>/dev/null || true)"
case "$got" in
    "$version"*) ;;
    *) echo "install-claude: $bin --version printed '$got', expected $version" >&2; exit 1 ;;
esac
touch "$dir/.installed"
echo "install-claude: installed claude $got"
echo "$bin"
