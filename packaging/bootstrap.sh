#!/usr/bin/env bash
# Set up .venv with everything Hearth needs, from the package index only. Safe to run again: it does only
# what is missing. Called by `make run` and `make test`; `--plan` says what it would do and changes nothing.
#
# llama-cpp-python has no binary wheel, so it is built from source once per set of llama.cpp flags and kept in
# a wheel folder named by those flags (pip's own wheel cache is keyed by the source package alone and would
# hand a CPU build to a CUDA machine).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
LLAMA_CPP_VERSION="0.3.36"
TORCH_VERSION="2.13.0"
WHEEL_ROOT="${HEARTH_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hearth/wheels}"
# Optional dependency groups from pyproject.toml: `make test` adds test-models (real GGUFs for the planner tests).
EXTRAS="${HEARTH_EXTRAS:-dev}"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

find_python() {
    for candidate in "${PYTHON:-}" python3.11 python3.12 python3.13 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    die "Hearth needs Python 3.11 or newer; install it (e.g. apt-get install python3.11 python3.11-venv) and retry."
}

# Patches applied to llama-cpp-python's source before it is built; their names make part of the wheel folder's name,
# so a change to them builds it again.
PATCHES=("$ROOT/packaging/patches/ggml-rpc-unix-socket.patch")

llama_flags() {
    local flags="-DGGML_RPC=ON" flavor="rpc" patched
    if command -v nvcc >/dev/null 2>&1 && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        flags="$flags -DGGML_CUDA=ON"
        flavor="rpc-cuda"
    fi
    patched="$(cat "${PATCHES[@]}" | sha256sum | cut -c1-8)"
    echo "$flavor-p$patched|$flags"
}

stamp_of() {
    # Reinstall when the dependency list, the extras or the llama.cpp flavour changes.
    { cat "$ROOT/pyproject.toml"; echo "$1 $EXTRAS"; } | sha256sum | cut -c1-16
}

patch_source() {
    # GNU patch where it is installed, otherwise git's (which acts as patch outside a repository)
    local folder="$1" patch_file="$2"
    if command -v patch >/dev/null 2>&1; then
        patch -d "$folder" -p1 --forward --silent <"$patch_file"
    else
        (cd "$folder" && git apply -p1 "$patch_file")
    fi
}

build_llama_wheel() {
    # The source from the package index, Hearth's patches applied, then one wheel into the wheel folder.
    local flags="$1" wheel_dir="$2" work source
    shift 2
    work="$(mktemp -d)"
    # A RETURN trap outlives the function that set it: it clears itself, or it fires again when main returns
    # (with $work out of scope, which set -u turns into a failed setup after "Ready").
    trap 'rm -rf "$work"; trap - RETURN' RETURN
    "$@" download --no-deps --no-binary :all: --no-cache-dir "llama-cpp-python==$LLAMA_CPP_VERSION" -d "$work" ||
        die "could not download llama-cpp-python $LLAMA_CPP_VERSION's source from the package index."
    tar -xzf "$work"/llama_cpp_python-"$LLAMA_CPP_VERSION".tar.gz -C "$work"
    source="$work/llama_cpp_python-$LLAMA_CPP_VERSION"
    for patch_file in "${PATCHES[@]}"; do
        patch_source "$source" "$patch_file" || die "$(basename "$patch_file") does not apply to llama-cpp-python $LLAMA_CPP_VERSION."
    done
    CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc 2>/dev/null || echo 2)" \
        "$@" wheel --no-deps --no-cache-dir "$source" -w "$wheel_dir"
}

main() {
    local python flavor flags wheel_dir stamp
    python="$(find_python)"
    IFS='|' read -r flavor flags <<<"$(llama_flags)"
    wheel_dir="$WHEEL_ROOT/llama-cpp-python-$LLAMA_CPP_VERSION-$flavor"
    stamp="$VENV/.hearth-installed-$(stamp_of "$flavor")"

    if [ "${1:-}" = "--plan" ]; then
        # What a run would do, changing nothing: whether the environment is ready and whether llama-cpp-python
        # would be built or its kept wheel reused.
        if [ -f "$stamp" ]; then echo "environment: ready in $VENV"; else echo "environment: install into $VENV"; fi
        if ls "$wheel_dir"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
            echo "llama-cpp-python: reuse the wheel kept in $wheel_dir"
        else
            echo "llama-cpp-python: build it into $wheel_dir"
        fi
        return 0
    fi
    if [ -f "$stamp" ]; then
        return 0
    fi
    if [ ! -x "$VENV/bin/python" ]; then
        say "Creating $VENV with $python"
        "$python" -m venv "$VENV" || die "could not create a virtual environment; install python3-venv."
    fi
    local pip=("$VENV/bin/python" -m pip --disable-pip-version-check)

    if ! ls "$wheel_dir"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl >/dev/null 2>&1; then
        say "Building llama-cpp-python $LLAMA_CPP_VERSION ($flags) — about 12 minutes on 2 cores, once"
        mkdir -p "$wheel_dir"
        build_llama_wheel "$flags" "$wheel_dir" "${pip[@]}"
    fi

    say "Installing torch $TORCH_VERSION first (CPU build where available)"
    "${pip[@]}" install --quiet "torch==$TORCH_VERSION"
    say "Installing llama-cpp-python from $wheel_dir"
    "${pip[@]}" install --quiet --force-reinstall --no-deps "$wheel_dir"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl
    say "Installing Hearth and its dependencies"
    "${pip[@]}" install --quiet -e "$ROOT[$EXTRAS]"

    say "Checking the llama.cpp build"
    "$VENV/bin/python" - "$flavor" <<'PY'
import sys
import llama_cpp

flavor = sys.argv[1]
if not llama_cpp.llama_supports_rpc():
    sys.exit("llama-cpp-python was built without RPC; delete the wheel folder and run make again")
from backends.workers.rpc import unix_sockets_patched

if not unix_sockets_patched():
    sys.exit("llama-cpp-python was built without Hearth's RPC patch; delete the wheel folder and run make again")
print(f"llama-cpp-python {llama_cpp.__version__}: RPC yes, flavour {flavor}")
PY
    rm -f "$VENV"/.hearth-installed-*
    touch "$stamp"
    say "Ready"
}

main "$@"
