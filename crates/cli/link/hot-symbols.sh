#!/usr/bin/env bash
# Regenerates hot-symbols.txt: the functions a release `baton` runs in a 100-turn bench,
# the offline demo and a fresh compile, in first-run order (see ../build.rs for why).
# Needs valgrind. Run from anywhere after a change that moves a lot of code; then rebuild
# the release binary and re-measure `/usr/bin/time -v baton bench --turns 100`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
cd "$root"
cargo build --release -p baton
bin="${CARGO_TARGET_DIR:-$root/target}/release/baton"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
run() { valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.$1" "${@:2}" >/dev/null 2>&1; }
run bench "$bin" bench --turns 100
run demo "$bin" --db "$work/demo.db" demo
run compile "$bin" --db "$work/demo.db" compile
nm --defined-only "$bin" | awk '{print $3}' | sort -u >"$work/defined"
python3 - "$work" >"$here/hot-symbols.txt" <<'PY'
import re, sys, glob
work = sys.argv[1]
defined = set(open(f"{work}/defined").read().split())
seen, order = set(), []
for name in ("bench", "demo", "compile"):
    names = {}
    for line in open(f"{work}/cg.{name}"):
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.strip())
        if not m:
            continue
        if m.group(3):
            names[m.group(2)] = m.group(3)
        sym = names.get(m.group(2))
        if m.group(1) == "fn" and sym in defined and sym not in seen:
            seen.add(sym)
            order.append(sym)
print("\n".join(order))
PY
wc -l "$here/hot-symbols.txt"
