#!/usr/bin/env bash
# Build every plugin in this folder for wasm32-wasip2 and copy the components
# to plugins/dist/<name>.wasm. Run from anywhere; needs only rustup and cargo.
#
#   WEIR_PLUGIN_TARGET_DIR  cargo target dir for the plugins (default: plugins/target)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target_dir="${WEIR_PLUGIN_TARGET_DIR:-$here/target}"

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "installing the wasm32-wasip2 Rust target" >&2
    rustup target add wasm32-wasip2 >&2
fi

# Plugins are guests: never let the host build's flags leak into them. They
# are built with WebAssembly SIMD (128-bit), which wasmtime runs natively:
# faster line splitting, UTF-8 checks and copies in the guest.
env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_TARGET \
    CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS="-C target-feature=+simd128" \
    cargo build --quiet --release --target wasm32-wasip2 \
    --manifest-path "$here/Cargo.toml" --target-dir "$target_dir"

mkdir -p "$here/dist"
for wasm in "$target_dir"/wasm32-wasip2/release/*.wasm; do
    cp -p "$wasm" "$here/dist/$(basename "$wasm")"
done
echo "$here/dist"
