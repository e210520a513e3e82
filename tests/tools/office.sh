#!/usr/bin/env bash
# Write the Office files the extraction tests read into OUT_DIR, with the
# writers pinned in tests/fixtures/office/requirements.txt, installed from
# PyPI once into $WEIR_TOOLS_DIR/office (default ~/.cache/weir/tools).
#   tests/tools/office.sh OUT_DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out=${1:?usage: office.sh OUT_DIR}
req=$here/fixtures/office/requirements.txt
venv=${WEIR_TOOLS_DIR:-$HOME/.cache/weir/tools}/office-$(sha256sum "$req" | cut -c1-12)
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
"$venv/bin/python" "$here/fixtures/office/make.py" "$out"
