#!/usr/bin/env python3
"""`weir serve` as tenants see it, measured from outside, in one run.

Two measurements, each against a baseline taken in the same run:

isolation -- what a run in a process of its own costs against a run on a
    thread of the server (`server.isolation = "process"` against
    `"thread"`): the median time from submitting a one-document run to the
    API saying it has ended, and the peak resident memory of the server and
    its run processes together during a run of --docs documents.

fairness -- two tenants on one server (runs in processes of their own).
    `calm` runs --docs generated documents -> trim-whitespace -> nop, alone,
    then again while `hostile` runs the most its tenant may: 16 worker
    threads of a stage that spins until its call deadline on every document.
    Reported: calm's documents per second with the hostile run over alone
    (the goal: at least 0.8), and the 99th percentile of calm's API answers
    (`GET /api/runs/{id}`, polled every 20 ms) during the contended run (the
    goal: at most 100 ms). Twice: without a CPU bound on `hostile`, and with
    `cpus = --hostile-cpus` (0.25 by default) in its tenant table.

    python3 tests/benches/serve_tenants.py --weir target/release/weir \\
        [--docs 200000] [--rounds 3] [--plugins plugins/dist]

Nothing is kept: the data lives in a temporary directory.
"""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from weir_api import call, calm_run, processes

CALM, HOSTILE = "calm-token-0123456789", "hostile-token-0123456789"


def operator(work, plugins, isolation, hostile_cpus=None):
    cpus = f"cpus = {hostile_cpus}" if hostile_cpus else ""
    return f"""
[server]
addr = "127.0.0.1:0"
data_dir = {json.dumps(os.path.join(work, "data"))}
plugin_dir = {json.dumps(plugins)}
cache_dir = {json.dumps(os.path.join(work, "cache"))}
isolation = "{isolation}"
requests_per_second = 1000
request_burst = 1000

[[tenants]]
name = "calm"
token_env = "BENCH_CALM"
pipelines = ["calm"]
plugins = ["generator_connector.wasm", "trim_whitespace.wasm", "nop_indexer.wasm"]

[[tenants]]
name = "hostile"
token_env = "BENCH_HOSTILE"
pipelines = ["hostile"]
plugins = ["test_connector.wasm", "hostile_stage.wasm", "nop_indexer.wasm"]
limits = {{ call_timeout = "2s" }}
{cpus}
"""


def hostile_run(docs):
    spins = ", ".join(f'{{ id = "spin-{i}", action = "loop" }}' for i in range(docs))
    return f"""
[worker]
threads = 16
[[connectors]]
name = "spin"
pipeline = "hostile"
plugin = {{ path = "test_connector.wasm", config = {{ docs = [{spins}] }} }}
[[pipelines]]
name = "hostile"
stages = [{{ name = "spin", plugin = {{ path = "hostile_stage.wasm" }} }}]
[indexer]
plugin = {{ path = "nop_indexer.wasm" }}
"""


class Server:
    def __init__(self, weir, work, plugins, isolation, hostile_cpus=None):
        path = os.path.join(work, f"operator-{isolation}.toml")
        with open(path, "w") as f:
            f.write(operator(work, plugins, isolation, hostile_cpus))
        self.log = open(os.path.join(work, f"serve-{isolation}.log"), "w+")
        env = dict(os.environ, BENCH_CALM=CALM, BENCH_HOSTILE=HOSTILE)
        self.proc = subprocess.Popen(
            [weir, "serve", path], stdout=self.log, stderr=subprocess.STDOUT, env=env
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            self.log.seek(0)
            found = re.search(r"status page on http://([0-9.:]+)/", self.log.read())
            if found:
                self.url = "http://" + found.group(1)
                return
            time.sleep(0.05)
        raise SystemExit("weir serve did not start")

    def call(self, method, path, token, body=None):
        return call(self.url, method, path, token, body)

    def submit(self, token, text):
        status, run = self.call("POST", "/api/runs", token, text)
        if status != 201:
            raise SystemExit(f"refused ({status}): {run}")
        return run["id"]

    def ended(self, token, run_id, poll=0.01, latencies=None):
        while True:
            asked = time.perf_counter()
            status, run = self.call("GET", f"/api/runs/{run_id}", token)
            if latencies is not None:
                latencies.append(time.perf_counter() - asked)
            if run.get("status") not in ("running", "paused", "stopping"):
                return run
            time.sleep(poll)

    def family(self):
        """The server's pid and its run processes'."""
        children = [p for p, (parent, _) in processes().items() if parent == self.proc.pid]
        return [self.proc.pid] + children

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)
        self.log.close()


def resident_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def isolation(weir, work, plugins, docs, rounds):
    results = {}
    for mode in ("thread", "process"):
        server = Server(weir, work, plugins, mode)
        try:
            server.ended(CALM, server.submit(CALM, calm_run(1)))  # compile once
            starts = []
            for _ in range(rounds * 5):
                t0 = time.perf_counter()
                server.ended(CALM, server.submit(CALM, calm_run(1)), poll=0.002)
                starts.append(time.perf_counter() - t0)
            peak = [0]
            done = threading.Event()

            def sample():
                while not done.is_set():
                    peak[0] = max(peak[0], sum(resident_kib(p) for p in server.family()))
                    time.sleep(0.05)

            sampler = threading.Thread(target=sample)
            sampler.start()
            run = server.ended(CALM, server.submit(CALM, calm_run(docs)))
            done.set()
            sampler.join()
            results[mode] = {
                "one_doc_run_ms": statistics.median(starts) * 1000,
                "peak_mib": peak[0] / 1024,
                "docs_per_s": docs / (run["summary"]["elapsed_ms"] / 1000),
            }
        finally:
            server.stop()
    return results


def fairness(weir, work, plugins, docs, rounds, hostile_cpus=None):
    server = Server(weir, work, plugins, "process", hostile_cpus)
    alone, contended, latencies = [], [], []
    try:
        server.ended(CALM, server.submit(CALM, calm_run(1000)))  # compile once
        for _ in range(rounds):
            run = server.ended(CALM, server.submit(CALM, calm_run(docs)))
            alone.append(docs / (run["summary"]["elapsed_ms"] / 1000))
            hostile = server.submit(HOSTILE, hostile_run(64))
            time.sleep(1)  # the hostile run's threads are spinning
            run = server.ended(CALM, server.submit(CALM, calm_run(docs)), 0.02, latencies)
            contended.append(docs / (run["summary"]["elapsed_ms"] / 1000))
            server.call("POST", f"/api/runs/{hostile}/stop", HOSTILE)
            server.ended(HOSTILE, hostile)
    finally:
        server.stop()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return {
        "alone_docs_per_s": statistics.median(alone),
        "contended_docs_per_s": statistics.median(contended),
        "ratio": statistics.median(contended) / statistics.median(alone),
        "api_p99_ms": p99,
        "api_answers": len(latencies),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weir", required=True)
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plugins", default="plugins/dist")
    parser.add_argument("--hostile-cpus", type=float, default=0.25)
    args = parser.parse_args()
    plugins = os.path.abspath(args.plugins)
    with tempfile.TemporaryDirectory() as work:
        iso = isolation(args.weir, work, plugins, args.docs, args.rounds)
        fair = fairness(args.weir, work, plugins, args.docs, args.rounds)
        capped = fairness(args.weir, work, plugins, args.docs, args.rounds, args.hostile_cpus)
    t, p = iso["thread"], iso["process"]
    print(f"isolation ({args.docs} docs; {args.rounds * 5} one-document runs)")
    for mode, r in iso.items():
        print(
            f"  {mode:8} one-document run {r['one_doc_run_ms']:7.1f} ms   "
            f"peak memory {r['peak_mib']:6.1f} MiB   {r['docs_per_s']:9.0f} docs/s"
        )
    print(
        f"  process/thread: start-to-end {p['one_doc_run_ms'] / t['one_doc_run_ms']:.2f}x, "
        f"memory {p['peak_mib'] / t['peak_mib']:.2f}x, rate {p['docs_per_s'] / t['docs_per_s']:.2f}x"
    )
    for name, result in (("no cpus bound", fair), (f"hostile cpus = {args.hostile_cpus}", capped)):
        print(
            f"fairness, {name} ({args.docs} docs, {args.rounds} rounds, "
            "hostile: 16 spinning threads)"
        )
        print(
            f"  calm alone {result['alone_docs_per_s']:9.0f} docs/s, with hostile "
            f"{result['contended_docs_per_s']:9.0f} docs/s: {result['ratio']:.2f} of alone (goal >= 0.8)"
        )
        print(
            f"  calm's API p99 with hostile: {result['api_p99_ms']:.1f} ms over "
            f"{result['api_answers']} answers (goal <= 100 ms)"
        )
    json.dump({"isolation": iso, "fairness": fair, "fairness_capped": capped}, sys.stderr)
    print(file=sys.stderr)


if __name__ == "__main__":
    main()
