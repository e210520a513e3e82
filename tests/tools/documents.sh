#!/usr/bin/env bash
# Write the Office and PDF files the extraction tests read into OUT_DIR, with the
# writers pinned in tests/fixtures/documents/requirements.txt, installed from
# PyPI once into $WEIR_TOOLS_DIR/documents-<hash> (default ~/.cache/weir/tools).
#   tests/tools/documents.sh OUT_DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=${1:?usage: documents.sh OUT_DIR}
req=$here/fixtures/documents/requirements.txt
venv=${WEIR_TOOLS_DIR:-$HOME/.cache/weir/tools}/documents-$(sha256sum "$req" | cut -c1-12)
if [[ ! -f $venv/.installed ]]; then
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    if command -v flock >/dev/null; then flock 9; fi
    if [[ ! -f $venv/.installed ]]; then
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
        touch "$venv/.installed"
    fi
    exec 9>&-
fi
"$venv/bin/python" "$here/fixtures/documents/make.py" "$out"
