"""What the Python benchmarks share: `weir serve`'s API over HTTP, the
`calm` pipeline (generated documents -> trim-whitespace -> nop-indexer),
and the processes below a pid. Imported by the scripts beside it."""

import json
import os
import urllib.error
import urllib.request


def call(url, method, path, token, body=None):
    """(status, JSON answer) of `method path` on the server at `url`."""
    request = urllib.request.Request(
        url + path,
        data=body.encode() if body is not None else None,
        method=method,
        headers={"Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def calm_run(docs, pipeline="calm", plugins=""):
    """--docs generated documents -> trim-whitespace -> nop-indexer, with
    plugin paths under `plugins` (a `weir run`) or named (weir serve finds
    them in its plugin_dir)."""
    at = (plugins + "/") if plugins else ""
    return f"""
[worker]
threads = 2
[[connectors]]
name = "gen"
pipeline = "{pipeline}"
plugin = {{ path = "{at}generator_connector.wasm", config = {{ count = {docs}, fields = {{ title = "  a title  " }} }} }}
[[pipelines]]
name = "{pipeline}"
stages = [{{ name = "trim", plugin = {{ path = "{at}trim_whitespace.wasm", config = {{ fields = ["title"] }} }} }}]
[indexer]
batch_size = 500
plugin = {{ path = "{at}nop_indexer.wasm" }}
"""


def processes():
    """pid -> (parent pid, command line) of every process."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        found[int(entry)] = (parent, cmdline)
    return found
