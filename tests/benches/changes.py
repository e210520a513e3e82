#!/usr/bin/env python3
"""What changing a pipeline costs a running `weir run`, in one run.

The pipeline of binary_ab.py (file connector -> trim-whitespace -> copy-fields
-> split-field-values -> CSV indexer, 2 worker threads, batch 500) on the same
generated documents, run by the release binary as a process, four ways:

- baseline: as it is;
- reload: the same run, sent SIGHUP --reloads times (spread over the run), each
  time with trim-whitespace's settings changed, so every reload publishes a new
  generation and both workers switch to new instances;
- shadow 1% and shadow 100%: copy-fields with a shadow of itself (the same
  component and settings, so every comparison is `same`) on that share.

Rounds go through the four in turn, in a rotating order. Each run is timed
from outside: wall time and the whole process's CPU (user + system). While it
runs, the size of its CSV output is sampled every 2 ms: the longest time the
output did not grow in the second after each SIGHUP is set against the
longest in the same windows of the baseline run -- the time no document got
through because of a reload. Reports medians, and ratios to the baseline.

    python3 tests/benches/changes.py --weir target/release/weir \\
        [--docs 500000] [--rounds 3] [--reloads 4] [--plugins plugins/dist]
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from binary_ab import config, generate

TRIM = 'config = { fields = ["title"] }'
TRIM_AGAIN = 'config = { fields = ["title", "author"] }'
WINDOW = 1.0
POLL = 0.002


def with_shadow(text, plugins, percent):
    """`text` with a shadow of the copy stage on `percent` of documents."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if '{ name = "copy"' in line:
            body = line.rstrip().rstrip(",")
            assert body.endswith("}")
            plugin = json.dumps(os.path.join(plugins, "copy_fields.wasm"))
            shadow = (
                f', shadow = {{ plugin = {{ path = {plugin}, config = {{ mappings = '
                f'[{{ source = "title", target = "title_copy" }}] }} }}, percent = {percent} }}'
            )
            lines[i] = body[:-1].rstrip() + shadow + " },"
            return "\n".join(lines) + "\n"
    sys.exit("the pipeline has no copy stage")


class Growth(threading.Thread):
    """Times at which `path` grew, sampled every POLL seconds."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path = path
        self.times = []
        self.done = threading.Event()

    def run(self):
        size = -1
        while not self.done.is_set():
            try:
                now = os.stat(self.path).st_size
            except FileNotFoundError:
                now = -1
            if now > size:
                self.times.append(time.monotonic())
                size = now
            time.sleep(POLL)

    def longest_pause(self, start, end):
        """The longest time without growth within [start, end]."""
        inside = [t for t in self.times if start <= t <= end]
        points = [start] + inside + [end]
        return max(b - a for a, b in zip(points, points[1:]))


def timed(binary, path, out, hangups=(), rewrite=None):
    """Run `binary run path`, sending SIGHUP at each of `hangups` (seconds
    after its output starts), calling rewrite(i) before the i-th; wall and
    CPU seconds, the output's growth, the SIGHUP times, and stderr."""
    if os.path.exists(out):
        os.remove(out)
    growth = Growth(out)
    growth.start()
    start = time.monotonic()
    child = subprocess.Popen(
        [binary, "run", "--no-progress", path],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    errors = []
    reader = threading.Thread(target=lambda: errors.append(child.stderr.read()), daemon=True)
    reader.start()
    sent = []
    if hangups:
        while len(growth.times) < 2 and child.poll() is None:
            time.sleep(POLL)
        began = growth.times[-1] if growth.times else time.monotonic()
        for i, at in enumerate(hangups):
            delay = began + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if child.poll() is not None:
                break
            rewrite(i)
            sent.append(time.monotonic())
            child.send_signal(signal.SIGHUP)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    growth.done.set()
    growth.join()
    reader.join()
    stderr = errors[0].decode(errors="replace") if errors else ""
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{binary} failed:\n{stderr[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, growth, sent, stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weir", default="target/release/weir")
    parser.add_argument("--docs", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reloads", type=int, default=4)
    parser.add_argument("--plugins", default="plugins/dist")
    args = parser.parse_args()
    plugins = os.path.abspath(args.plugins)
    with tempfile.TemporaryDirectory() as work:
        generate(os.path.join(work, "input.jsonl"), args.docs)
        base = config(work, plugins, os.path.join(work, "cache"))
        assert TRIM in base
        texts = {
            "baseline": base,
            "reload": base,
            "shadow 1%": with_shadow(base, plugins, 1),
            "shadow 100%": with_shadow(base, plugins, 100),
        }
        paths = {}
        for name, text in texts.items():
            paths[name] = os.path.join(work, name.replace(" ", "-").replace("%", "") + ".toml")
            with open(paths[name], "w") as f:
                f.write(text)
        out = os.path.join(work, "out.csv")

        def rewrite(i):
            text = base.replace(TRIM, TRIM_AGAIN) if i % 2 == 0 else base
            with open(paths["reload"], "w") as f:
                f.write(text)

        # An untimed run compiles the components into the cache and says
        # how long a run lasts, to spread the reloads over it.
        wall, _, _, _, _ = timed(args.weir, paths["baseline"], out)
        hangups = [wall * (i + 1) / (args.reloads + 2) for i in range(args.reloads)]
        results = {name: [] for name in texts}
        pauses = {"baseline": [], "reload": []}
        names = list(texts)
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                reloading = name == "reload"
                with open(paths["reload"], "w") as f:
                    f.write(base)
                wall, cpu, growth, sent, stderr = timed(
                    args.weir, paths[name], out,
                    hangups if reloading else (), rewrite,
                )
                results[name].append((wall, cpu))
                line = f"round {r + 1} {name}: {args.docs / wall:,.0f} docs/s, {cpu * 1e6 / args.docs:.2f} us CPU/doc"
                if reloading:
                    applied = stderr.count("config reloaded")
                    if applied != len(sent):
                        sys.exit(f"{applied} of {len(sent)} reloads applied:\n{stderr[-3000:]}")
                    pauses["reload"] += [growth.longest_pause(t, t + WINDOW) for t in sent]
                    line += f", {applied} reloads"
                elif name == "baseline":
                    began = growth.times[1] if len(growth.times) > 1 else 0
                    pauses["baseline"] += [
                        growth.longest_pause(began + at, began + at + WINDOW) for at in hangups
                    ]
                print(line, flush=True)
    median = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in results.items()
    }
    wall_0, cpu_0 = median["baseline"]
    print(f"\n{args.docs:,} documents, {args.rounds} rounds, medians; ratios to the baseline")
    for name, (wall, cpu) in median.items():
        print(f"{name:12} {args.docs / wall:>10,.0f} docs/s ({wall_0 / wall:.3f}x)  "
              f"{cpu * 1e6 / args.docs:6.2f} us CPU/doc ({cpu / cpu_0:.3f}x)")
    extra = (median["reload"][1] - cpu_0) / args.reloads
    print(f"reload: CPU per reload (the run's extra CPU / {args.reloads}) {extra * 1000:.0f} ms")
    print(f"longest output pause in the {WINDOW:.0f} s after a SIGHUP: median "
          f"{statistics.median(pauses['reload']) * 1000:.0f} ms, max {max(pauses['reload']) * 1000:.0f} ms; "
          f"same windows without a reload: median {statistics.median(pauses['baseline']) * 1000:.0f} ms, "
          f"max {max(pauses['baseline']) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
