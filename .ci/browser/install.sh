#!/usr/bin/env bash
# Installs what headless browser tests need: Debian's Chromium and its driver (system
# packages, as root or through sudo, like bubblewrap in .ci/run) and the npm package
# playwright-core, pinned, into a cache outside the repository. playwright-core downloads
# no browser of its own: tests launch Debian's /usr/bin/chromium with
#   chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] })
# (--no-sandbox because CI runs as root, where Chromium refuses its own sandbox).
# Idempotent: the npm step leaves a marker, so a second run only checks and prints paths.
#
#   BATON_BROWSER_CACHE  where to install playwright-core (default ~/.cache/baton/browser)
set -euo pipefail

CACHE="${BATON_BROWSER_CACHE:-$HOME/.cache/baton/browser}"
PLAYWRIGHT_CORE_VERSION=1.65.2
CHROMIUM=/usr/bin/chromium
started=$SECONDS

say() { echo "browser: $*"; }
die() { echo "browser: error: $*" >&2; exit 1; }

# --- Chromium (Debian packages) ---------------------------------------------------------
if [ ! -x "$CHROMIUM" ]; then
    say "installing Debian's chromium and chromium-driver"
    if [ "$(id -u)" = 0 ]; then
        SUDO=()
    elif command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo)
    else
        die "$CHROMIUM is missing and this is not root, nor is sudo available to install the chromium package"
    fi
    "${SUDO[@]}" apt-get update -qq >/dev/null ||
        die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq chromium chromium-driver >/dev/null ||
        die "apt-get install chromium chromium-driver failed"
    [ -x "$CHROMIUM" ] || die "$CHROMIUM is still missing after installing the chromium package"
else
    say "chromium $CHROMIUM (installed)"
fi
if ! out="$("$CHROMIUM" --version 2>&1)"; then
    echo "$out" >&2
    die "$CHROMIUM --version fails"
fi
# Debian's launcher script may print noise of its own on stderr first (its
# /etc/chromium.d/dev-shm test breaks where /dev/shm is mounted twice): keep the
# browser's own line.
chromium_version="$(echo "$out" | grep -m1 '^Chromium ' || echo "$out" | tail -n 1)"

# --- playwright-core (npm) --------------------------------------------------------------
PW_DIR="$CACHE/node_modules/playwright-core"
marker="$CACHE/.playwright-core-$PLAYWRIGHT_CORE_VERSION"
if [ -f "$marker" ] && [ -f "$PW_DIR/package.json" ]; then
    say "playwright-core $PLAYWRIGHT_CORE_VERSION (cached)"
else
    command -v npm >/dev/null 2>&1 || die "npm not found (playwright-core $PLAYWRIGHT_CORE_VERSION needs Node 20+)"
    node_major="$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
    [ "$node_major" -ge 20 ] || die "node $(node --version 2>/dev/null || echo missing) is too old: playwright-core $PLAYWRIGHT_CORE_VERSION needs Node 20+"
    say "installing playwright-core@$PLAYWRIGHT_CORE_VERSION into $CACHE"
    mkdir -p "$CACHE"
    rm -f "$CACHE"/.playwright-core-*
    # No browser download (playwright-core has none, the variable makes sure), no audit,
    # no funding notice, no update notice: nothing beyond the registry.
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
        npm install --prefix "$CACHE" --no-audit --no-fund --no-update-notifier \
        --loglevel=error "playwright-core@$PLAYWRIGHT_CORE_VERSION" ||
        die "npm install playwright-core@$PLAYWRIGHT_CORE_VERSION failed"
    touch "$marker"
fi
got="$(node -p 'require(process.argv[1] + "/package.json").version' "$PW_DIR" 2>/dev/null || true)"
[ "$got" = "$PLAYWRIGHT_CORE_VERSION" ] ||
    die "$PW_DIR holds playwright-core '$got', expected $PLAYWRIGHT_CORE_VERSION (remove $CACHE and run again)"

say "done in $((SECONDS - started))s"
echo "browser: chromium $CHROMIUM ($chromium_version)"
echo "browser: playwright-core $PLAYWRIGHT_CORE_VERSION at $PW_DIR"
