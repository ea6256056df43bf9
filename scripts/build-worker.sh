#!/bin/sh
# The wrangler [build] command: compiles the crate to wasm with worker-build,
# using the wasm-bindgen CLI installed by scripts/setup.sh (worker-build would
# otherwise download one from GitHub) and the esbuild that wrangler ships,
# then puts the JS entry point (src/wasm/entry.mjs) next to its output.
#
#   sh scripts/build-worker.sh                       # build/ (wrangler.toml's main)
#   OUT_DIR=build-x sh scripts/build-worker.sh --features panic-probe
set -eu
cd "$(dirname "$0")/.."
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$CARGO_BIN/wasm-bindgen}"
if [ -z "${ESBUILD_BIN:-}" ] && [ -x node_modules/.bin/esbuild ]; then
  export ESBUILD_BIN="$PWD/node_modules/.bin/esbuild"
fi
# A target directory of its own: `make test` builds the Worker and runs
# the end-to-end tests while the native tests compile and run in target/,
# and one cargo waits for the other's lock on a shared directory.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target/worker}"
OUT_DIR="${OUT_DIR:-build}"
if [ "$#" -gt 0 ]; then
  worker-build --release --out-dir "$OUT_DIR" -- "$@"
else
  worker-build --release --out-dir "$OUT_DIR"
fi
cp src/wasm/entry.mjs "$OUT_DIR/entry.mjs"
