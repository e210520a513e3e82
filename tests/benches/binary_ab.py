#!/usr/bin/env python3
"""Two `weir` binaries side by side, as users run them, in one run.

Each binary runs the same local pipeline as a process -- file connector ->
trim-whitespace -> copy-fields -> split-field-values -> CSV indexer, 2 worker
threads, batch 500, default limits -- on the same generated JSONL file of
~870-byte documents. Rounds alternate the order (A B, B A, ...), so drift in
the machine's speed falls on both alike. Each run is timed from outside: wall
time, and the CPU time (user + system, every thread) of the whole process from
its rusage. The report gives each binary's median documents per second and
CPU microseconds per document, and B's ratios to A.

    python3 tests/benches/binary_ab.py --a OLD/weir --b NEW/weir \\
        [--docs 1000000] [--rounds 5] [--plugins plugins/dist] [--plugins-b DIR]

Plugins come from --plugins (build them with plugins/build.sh); B takes
--plugins-b instead when given, so one binary can be set against itself
with two builds of the plugins (contract 0.2.0 against 0.2.1, say). Nothing
is kept: the data and outputs live in a temporary directory.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

COLUMNS = ["id", "title", "title_copy", "author", "year", "tags", "rating"]


def generate(path, n):
    filler = ("lorem ipsum dolor sit amet " * 26)[:700]
    with open(path, "w") as out:
        for i in range(n):
            doc = {
                "id": f"doc-{i}",
                "title": f"  Document number {i} about weirs and rivers  ",
                "author": f"Author {i % 997}",
                "year": 1900 + i % 125,
                "tags": f"river;weir;water;tag-{i % 31}",
                "rating": (i % 50) / 10.0,
                "body": filler,
            }
            out.write(json.dumps(doc, separators=(",", ":")))
            out.write("\n")


def config(work, plugins, cache):
    def plugin(name):
        return json.dumps(os.path.join(plugins, name))

    grant = '{ dirs = [{ host = %s, guest = "/work", writable = true }] }' % json.dumps(work)
    read = '{ dirs = [{ host = %s, guest = "/work" }] }' % json.dumps(work)
    return f"""
[runner]
cache_dir = {json.dumps(cache)}
[worker]
threads = 2
[indexer]
batch_size = 500
plugin = {{ path = {plugin("csv_indexer.wasm")}, config = {{ path = "/work/out.csv", columns = {json.dumps(COLUMNS)} }}, grants = {grant} }}
[[connectors]]
name = "bench"
pipeline = "p"
plugin = {{ path = {plugin("file_connector.wasm")}, config = {{ paths = ["/work/input.jsonl"] }}, grants = {read} }}
[[pipelines]]
name = "p"
stages = [
  {{ name = "trim", plugin = {{ path = {plugin("trim_whitespace.wasm")}, config = {{ fields = ["title"] }} }} }},
  {{ name = "copy", plugin = {{ path = {plugin("copy_fields.wasm")}, config = {{ mappings = [{{ source = "title", target = "title_copy" }}] }} }} }},
  {{ name = "split", plugin = {{ path = {plugin("split_field_values.wasm")}, config = {{ source = "tags", delimiter = ";" }} }} }},
]
"""


def timed(binary, path):
    """Run `binary run path`; wall seconds and CPU seconds of the process."""
    start = time.monotonic()
    child = subprocess.Popen(
        [binary, "run", "--no-progress", path],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{binary} failed:\n{stderr.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the baseline weir binary")
    parser.add_argument("--b", required=True, help="the weir binary compared with it")
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--plugins", default="plugins/dist")
    parser.add_argument("--plugins-b", help="B's plugins, when not --plugins")
    args = parser.parse_args()
    plugins = {
        "A": os.path.abspath(args.plugins),
        "B": os.path.abspath(args.plugins_b or args.plugins),
    }
    with tempfile.TemporaryDirectory() as work:
        generate(os.path.join(work, "input.jsonl"), args.docs)
        paths = {}
        for name, dist in plugins.items():
            paths[name] = os.path.join(work, f"bench-{name}.toml")
            with open(paths[name], "w") as f:
                f.write(config(work, dist, os.path.join(work, "cache")))
        binaries = {"A": args.a, "B": args.b}
        # One untimed run each compiles the components into the cache.
        for name, binary in binaries.items():
            timed(binary, paths[name])
        results = {"A": [], "B": []}
        for r in range(args.rounds):
            order = ["A", "B"] if r % 2 == 0 else ["B", "A"]
            for name in order:
                wall, cpu = timed(binaries[name], paths[name])
                results[name].append((wall, cpu))
                print(f"round {r + 1} {name}: {args.docs / wall:,.0f} docs/s, "
                      f"{cpu * 1e6 / args.docs:.1f} us CPU/doc", flush=True)
    median = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in results.items()
    }
    for name, (wall, cpu) in median.items():
        print(f"{name} {binaries[name]} ({plugins[name]}): median {args.docs / wall:,.0f} docs/s, "
              f"{cpu * 1e6 / args.docs:.2f} us CPU/doc ({cpu:.1f} CPU-s, {wall:.2f} s wall)")
    (wall_a, cpu_a), (wall_b, cpu_b) = median["A"], median["B"]
    print(f"B/A: docs/s {wall_a / wall_b:.3f}, CPU per document {cpu_b / cpu_a:.3f}")


if __name__ == "__main__":
    main()
