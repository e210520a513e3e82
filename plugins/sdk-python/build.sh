#!/usr/bin/env bash
# Build a Weir plugin component from Python sources with componentize-py.
#
#   build.sh <kind> <src-dir> <out.wasm>
#
# <kind> is stage, connector or indexer; <src-dir> holds app.py (the plugin: one
# subclass of weir.Stage, weir.Connector or weir.Indexer) and any other files it
# uses. The SDK package `weir/` and requirements.txt sit beside this script.
# A stage is built for the `lent-stage` world (contract 0.2.1: a batch of
# documents per call); `per-document-stage` builds it for the `stage` world
# instead (one call per document, as contract 0.2.0 runs stages), to compare.
# A connector is built for the `syncing-connector` world (contract 0.2.3), so it
# can keep state between runs and report deletes with `weir.sync`;
# `streaming-connector` builds one for the world of that name, which also reads
# topics, queues and pushed documents with `weir.messages`.
#
# componentize-py (the version pinned in requirements.txt) is installed from PyPI
# on first use into a venv under ${WEIR_TOOLS_DIR:-~/.cache/weir/tools}.
# The WIT contract is $WEIR_WIT_DIR, else wit/ beside this script, else the
# repository's wit/ (../../wit).
# Builds are cached in ${WEIR_BUILD_CACHE:-~/.cache/weir/builds}, keyed by a hash
# of everything that makes the output (world, sources, SDK, WIT, componentize-py
# version); the ${WEIR_BUILD_CACHE_KEEP:-20} most recently used are kept.
set -euo pipefail

die() {
    echo "build.sh: $*" >&2
    exit 1
}

[[ $# -eq 3 ]] || die "usage: build.sh <stage|connector|streaming-connector|indexer> <src-dir> <out.wasm>"
kind=$1
src=$2
out=$3
# The WIT world, and the SDK function that makes the class componentize-py exports.
case $kind in
    stage) world=lent-stage export_class="StageBatchApi StageLentApi" export_with="_stage.export _stage.export_lent" ;;
    per-document-stage) world=stage export_class=StageApi export_with=_stage.export_per_document ;;
    connector) world=syncing-connector export_class=ConnectorApi export_with=_connector.export ;;
    streaming-connector) world=streaming-connector export_class=ConnectorApi export_with=_connector.export ;;
    indexer) world=indexer export_class=IndexerApi export_with=_indexer.export ;;
    *) die "unknown kind \`$kind\`: expected stage, connector or indexer (or per-document-stage, streaming-connector)" ;;
esac
[[ -d $src ]] || die "source directory not found: $src"
[[ -f $src/app.py ]] || die "$src has no app.py (the module that defines the plugin class)"
command -v python3 >/dev/null || die "python3 not found: install Python 3 (with its venv module) to build Python plugins"

sdk=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[[ -d $sdk/weir ]] || die "the SDK package is missing: $sdk/weir"
version=$(sed -n 's/^componentize-py==\([^[:space:]]*\).*/\1/p' "$sdk/requirements.txt")
[[ -n $version ]] || die "$sdk/requirements.txt does not pin componentize-py (componentize-py==<version>)"

if [[ -n ${WEIR_WIT_DIR:-} ]]; then
    wit=$WEIR_WIT_DIR
elif [[ -d $sdk/wit ]]; then
    wit=$sdk/wit
else
    wit=$sdk/../../wit
fi
[[ -d $wit ]] || die "WIT directory not found: $wit (set WEIR_WIT_DIR)"
wit=$(cd "$wit" && pwd)

cache=${WEIR_BUILD_CACHE:-$HOME/.cache/weir/builds}
keep=${WEIR_BUILD_CACHE_KEEP:-20}
[[ $keep =~ ^[0-9]+$ ]] || die "WEIR_BUILD_CACHE_KEEP must be a number, not \`$keep\`"
tools_root=${WEIR_TOOLS_DIR:-$HOME/.cache/weir/tools}
mkdir -p "$tools_root"
tools=$(cd "$tools_root" && pwd)/python-$version # build steps run in other directories

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Stage what goes into the component: the sources (hidden entries, __pycache__,
# *.pyc and *.wasm left out), the SDK, and the entry module that exports the
# plugin class. Then hash the staged tree with everything else that makes the
# output. Prints the hash.
hash=$(python3 - "$src" "$sdk" "$wit" "$world" "$export_class" "$export_with" "$version" "$work/app" "${BASH_SOURCE[0]}" <<'PY'
import hashlib, os, shutil, sys

src, sdk, wit, world, export_class, export_with, version, stage, script = sys.argv[1:]
# Each exported class (space-separated), made by the SDK function beside it.
exported = list(zip(export_class.split(), (name.split(".") for name in export_with.split())))

def files(root, keep=lambda name: True):
    """Relative paths of the files under `root` worth building from, sorted."""
    found = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in names:
            if not name.startswith(".") and not name.endswith((".pyc", ".wasm")) and keep(name):
                found.append(os.path.relpath(os.path.join(folder, name), root))
    return sorted(found)

for path in files(src):
    os.makedirs(os.path.dirname(os.path.join(stage, path)), exist_ok=True)
    shutil.copyfile(os.path.join(src, path), os.path.join(stage, path))
if os.path.exists(os.path.join(stage, "weir")):
    sys.exit(f"build.sh: {src} has its own weir/, which would hide the SDK")
for path in files(os.path.join(sdk, "weir"), keep=lambda name: name.endswith(".py")):
    target = os.path.join(stage, "weir", path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(os.path.join(sdk, "weir", path), target)
with open(os.path.join(stage, "weir_entry.py"), "w") as entry:
    entry.write(
        '"""Generated by build.sh: the export class for the plugin that app.py defines."""\n'
        "import app\n"
        + "".join(f"import weir.{module}\n" for _, (module, _) in exported)
        + "".join(f"{name} = weir.{module}.{function}(app)\n" for name, (module, function) in exported)
    )

digest = hashlib.sha256()
def add(label, data):
    digest.update(f"{label}\0{len(data)}\0".encode())
    digest.update(data)
add("world", world.encode())
add("componentize-py", version.encode())
with open(script, "rb") as file:
    add("build.sh", file.read())
for label, root, keep in (("app", stage, lambda name: True), ("wit", wit, lambda name: name.endswith(".wit"))):
    for path in files(root, keep):
        with open(os.path.join(root, path), "rb") as file:
            add(f"{label}/{path}", file.read())
print(digest.hexdigest())
PY
)

mkdir -p "$(dirname "$out")"
cached=$cache/$hash.wasm
# Reuse an entry only whole; `touch -c` never brings back one just evicted.
if [[ -s $cached ]] && cp "$cached" "$out" 2>/dev/null; then
    touch -c "$cached"
    echo "build.sh: reused $out from the build cache (${hash:0:12})"
    exit 0
fi

# componentize-py, installed once per version. A lock keeps concurrent builds
# from installing it twice at once (where flock exists).
componentize=$tools/bin/componentize-py
if [[ ! -f $tools/.installed ]]; then
    mkdir -p "$(dirname "$tools")"
    exec 9>"$tools.lock"
    if command -v flock >/dev/null; then flock 9; fi
    if [[ ! -f $tools/.installed ]]; then
        echo "build.sh: installing componentize-py $version into $tools" >&2
        rm -rf "$tools"
        python3 -m venv "$tools" ||
            die "python3 -m venv failed (on Debian or Ubuntu: apt-get install python3-venv)"
        "$tools/bin/pip" install --quiet --disable-pip-version-check -r "$sdk/requirements.txt" ||
            die "could not install componentize-py $version from PyPI"
        touch "$tools/.installed"
    fi
    exec 9>&-
fi

# componentize-py adds a site-packages found through VIRTUAL_ENV (or else the
# system's) to the search path; an empty one keeps the build to the staged files.
# Its own Rust backtrace says nothing about a plugin's error: left out.
mkdir -p "$work/no-site/lib/python/site-packages"
started=$(date +%s)
(
    cd "$work/app"
    VIRTUAL_ENV=$work/no-site RUST_BACKTRACE=0 "$componentize" --quiet -d "$wit" -w "$world" \
        componentize --python-path . --output "$work/out.wasm" weir_entry
) || die "componentize-py failed to build $src (see above)"
elapsed=$(($(date +%s) - started))

mkdir -p "$cache"
cp "$work/out.wasm" "$cache/.$hash.$$.tmp"
mv -f "$cache/.$hash.$$.tmp" "$cached"
cp "$work/out.wasm" "$out"

# Keep the most recently used builds.
ls -t "$cache" | { grep -E '^[0-9a-f]{64}\.wasm$' || true; } | tail -n +$((keep + 1)) | while read -r stale; do
    rm -f "$cache/$stale"
done

echo "build.sh: built $out in ${elapsed}s ($(($(wc -c <"$out") / 1024)) KiB)"
