#!/bin/sh
# The wrangler [build] command: compiles the crate to wasm with worker-build,
# using the wasm-bindgen CLI installed by scripts/setup.sh (worker-build would
# otherwise download one from GitHub) and the esbuild that wrangler ships.
set -eu
cd "$(dirname "$0")/.."
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$CARGO_BIN:$PATH"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$CARGO_BIN/wasm-bindgen}"
if [ -z "${ESBUILD_BIN:-}" ] && [ -x node_modules/.bin/esbuild ]; then
  export ESBUILD_BIN="$PWD/node_modules/.bin/esbuild"
fi
exec worker-build --release
