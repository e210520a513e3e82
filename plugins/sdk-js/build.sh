#!/usr/bin/env bash
# Build a Weir plugin written in JavaScript into a WebAssembly component.
#
#   build.sh <stage|connector|indexer> <src-dir> <out.wasm>
#
# A stage is built for the `lent-stage` world (contract 0.2.1: a batch of
# documents per call); `per-document-stage` builds it for the `stage` world
# instead (one call per document, as contract 0.2.0 runs stages), to compare.
# A connector is built for the `syncing-connector` world (contract 0.2.3), so it
# can keep state between runs and report deletes with `weir.sync`;
# `streaming-connector` builds one for the world of that name, which also reads
# topics, queues and pushed documents with `weir.messages`.
#
# <src-dir>/app.js default-exports a class extending weir.Stage, weir.Connector
# or weir.Indexer (per the world) and imports the SDK as `weir`:
#
#   import * as weir from "weir";
#   export default class Upper extends weir.Stage { process(doc) { ... } }
#
# The module and what it imports (the SDK in src/ beside this script, other
# files of <src-dir>) are bundled with esbuild, then made a component with
# ComponentizeJS (SpiderMonkey in StarlingMonkey). The tools pinned by
# package-lock.json beside this script are installed with `npm ci` on first use
# into ${WEIR_TOOLS_DIR:-~/.cache/weir/tools}/js-<hash of the lock file>.
#
# WIT: $WEIR_WIT_DIR, else wit/ beside this script, else the repository's wit/.
#
# Build cache: the output depends only on the world, the files of <src-dir>
# (hidden entries and *.wasm left out), the SDK, the WIT files and the lock
# file. A build whose inputs hash to a component in
# ${WEIR_BUILD_CACHE:-~/.cache/weir/builds} reuses it; the
# ${WEIR_BUILD_CACHE_KEEP:-20} most recently used components are kept.
set -euo pipefail

die() {
    echo "build.sh: $*" >&2
    exit 1
}

[[ $# -eq 3 ]] || die "usage: build.sh <stage|connector|streaming-connector|indexer> <src-dir> <out.wasm>"
kind=$1 src=$2 out=$3
# The WIT world, the SDK function that exports the plugin class, the name of
# the interface it makes (the world's export; names destructured for a world
# with two), and the interfaces of the world alone that the entry module hands
# that function (so no module of the SDK names them: a bundle that keeps all of
# the SDK, `const { Stage } = weir`, still builds for every world).
hosts=
case $kind in
stage) world=lent-stage export=exportLentStage api="{ stageBatchApi, stageLentApi }" ;;
per-document-stage) world=stage export=exportStagePerDocument api=stageApi ;;
connector) world=syncing-connector export=exportConnector api=connectorApi hosts="sync packed=publishing-packed progress" ;;
streaming-connector) world=streaming-connector export=exportConnector api=connectorApi hosts="sync messages packed=publishing-packed progress" ;;
indexer) world=indexer export=exportIndexer api=indexerApi ;;
*) die "unknown kind \`$kind\` (expected stage, connector or indexer, or per-document-stage, streaming-connector)" ;;
esac
[[ -f $src/app.js ]] || die "no app.js in \`$src\` (the plugin's module)"
command -v node >/dev/null || die "node is not installed: Node.js 20 or later is needed to build JavaScript plugins"

sdk=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n ${WEIR_WIT_DIR:-} ]]; then
    wit=$WEIR_WIT_DIR
elif [[ -d $sdk/wit ]]; then
    wit=$sdk/wit
else
    wit=$sdk/../../wit
fi
compgen -G "$wit/*.wit" >/dev/null || die "no WIT files in \`$wit\` (set WEIR_WIT_DIR)"
wit=$(cd "$wit" && pwd)
contract=$(sed -n 's/^package weir:plugin@\([^;]*\);.*/\1/p' "$wit"/*.wit | head -n 1)
[[ -n $contract ]] || die "no \`package weir:plugin@<version>;\` in $wit"

cache=${WEIR_BUILD_CACHE:-$HOME/.cache/weir/builds}
keep=${WEIR_BUILD_CACHE_KEEP:-20}
[[ $keep =~ ^[0-9]+$ ]] || die "WEIR_BUILD_CACHE_KEEP must be a number, not \`$keep\`"

if command -v sha256sum >/dev/null; then sha256=(sha256sum); else sha256=(shasum -a 256); fi
tools_root=${WEIR_TOOLS_DIR:-$HOME/.cache/weir/tools}
mkdir -p "$tools_root"
tools_root=$(cd "$tools_root" && pwd) # build steps run in other directories
tools=$tools_root/js-$("${sha256[@]}" <"$sdk/package-lock.json" | cut -c1-16)
bin=$tools/node_modules/.bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ ! -x $bin/componentize-js ]]; then
    command -v npm >/dev/null || die "npm is not installed: it is needed once, to install the build tools"
    echo "build.sh: installing the JavaScript build tools into $tools" >&2
    rm -rf "$tools" # an incomplete copy: installs are staged, then moved in place
    staging=$(mktemp -d "$tools_root/.js-staging.XXXXXX")
    trap 'rm -rf "$work" "$staging"' EXIT
    cp "$sdk/package.json" "$sdk/package-lock.json" "$staging/"
    (cd "$staging" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2) ||
        die "installing the build tools failed (npm ci in $staging)"
    # Another build may have installed them meanwhile: then keep its copy.
    [[ -e $tools ]] || mv "$staging" "$tools"
fi

start=$SECONDS
# The world: the Weir world plus the WASI filesystem, for weir.File (the engine
# imports the WASI filesystem anyway), with WASI's WIT as jco ships it; src/file.js
# imports it at this version.
wasi=0.2.12
mkdir -p "$work/wit/deps/weir-plugin"
cp "$wit"/*.wit "$work/wit/deps/weir-plugin/"
for package in wasi-filesystem wasi-io wasi-clocks; do
    mkdir -p "$work/wit/deps/$package"
    cp "$tools/node_modules/@bytecodealliance/jco/lib/wit/builtin/$wasi/$package/package.wit" "$work/wit/deps/$package/"
done
cat >"$work/wit/world.wit" <<EOF
package weir:js-plugin;

world $world {
    include weir:plugin/$world@$contract;
    import wasi:filesystem/preopens@$wasi;
}
EOF

# The entry module exports the plugin class as the world's interface. A host is
# `<name>` (the interface of that name) or `<name>=<interface>`.
names=()
for host in $hosts; do names+=("${host%%=*}"); done
args=Plugin
[[ -z $hosts ]] || args="Plugin, { $(IFS=,; echo "${names[*]}" | sed 's/,/, /g') }"
{
    echo 'import Plugin from "./app.js";'
    for host in $hosts; do
        echo "import * as ${host%%=*} from \"weir:plugin/${host#*=}@$contract\";"
    done
    echo "import { $export } from \"weir\";"
    echo "export const $api = $export($args);"
} |
    (cd "$src" && "$bin/esbuild" --bundle --format=esm --platform=neutral --keep-names \
        --alias:weir="$sdk/src/index.js" --external:'weir:plugin/*' --external:'wasi:*' \
        --sourcefile=weir-entry.js --outfile="$work/plugin.js" --log-level=warning) ||
    die "bundling $src/app.js failed"
# The cache key covers what the component is made of: the bundle (app.js, all it
# imports and the SDK), the world and its WIT, and the tools.
key=$(
    {
        echo "world $world"
        (cd "$work" && find wit -type f -print0 | LC_ALL=C sort -z | xargs -0 "${sha256[@]}")
        "${sha256[@]}" <"$work/plugin.js"
        (cd "$sdk" && "${sha256[@]}" build.sh package-lock.json)
    } | "${sha256[@]}" | cut -c1-64
)
mkdir -p "$(dirname "$out")" "$cache"
# Reuse an entry only whole; `touch -c` never brings back one just evicted.
if [[ -s $cache/$key.wasm ]] && cp "$cache/$key.wasm" "$out" 2>/dev/null; then
    touch -c "$cache/$key.wasm"
    echo "build.sh: reused $out from the build cache ($world, $key)"
    exit 0
fi

(cd "$work" && "$bin/componentize-js" plugin.js --wit wit --world-name "$world" \
    --disable http fetch-event --out plugin.wasm) ||
    die "making the component failed (an exception while app.js loads fails the build too)"

cp "$work/plugin.wasm" "$cache/.$key.$$" && mv "$cache/.$key.$$" "$cache/$key.wasm"
cp "$work/plugin.wasm" "$out"
# Evict the least recently used entries: only this cache's own (64 hex digits).
ls -1t "$cache" | grep -E '^[0-9a-f]{64}\.wasm$' | tail -n +$((keep + 1)) | while IFS= read -r old; do
    rm -f "$cache/$old"
done
echo "build.sh: built $out ($world, $((SECONDS - start)) s, $(($(wc -c <"$out") / 1024)) KiB)"
