#!/usr/bin/env python3
"""The fleet against one `weir run`, measured from outside, in one run.

The same pipeline both ways: --docs generated documents -> trim-whitespace
-> nop-indexer.

run   -- `weir run` on the config: local mode, one process. Its wall time is
    the process's, start to exit; its CPU is the process's (wait4).
fleet -- `weir serve` with a `[fleet]` on the broker, one `weir fleet` worker
    (2 pairs per pipeline), the run submitted by `POST /api/runs` and polled
    until the API says it has ended. A warm-up run first publishes the spec,
    starts the pipeline's process on the worker and fills the compile cache.
    Wall is from the submission to the end the API reports; CPU is read
    from /proc for each role, before and after the run:
      runner     the run's process (`weir serve-run`: the connector, publishing
                 to Kafka, and the run's accounting from its event topic)
      pipeline   the fleet worker's pipeline process (`weir fleet-pipeline`:
                 the worker-indexer pairs)
      control    `weir serve` and `weir fleet` themselves
      broker     the Kafka broker (a JVM), which the local run does not need

Reported: docs/s and CPU per document of each, per role for the fleet, and
the ratios fleet/run. Rounds alternate the order; medians are reported.

    python3 tests/benches/fleet.py --weir target/release/weir \\
        [--docs 200000] [--rounds 3] [--plugins plugins/dist] [--kafka HOST:PORT]

Without --kafka (or WEIR_KAFKA_BOOTSTRAP) it starts the test broker
(tests/kafka/broker.sh) and stops it at the end. Nothing is kept: the data
lives in a temporary directory.
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
import urllib.error
import urllib.request

from weir_api import call, calm_run, processes

TOKEN, ADMIN, FLEET = "bench-tenant-token-0123", "bench-admin-token-0123", "bench-fleet-token-0123"
TICK = os.sysconf("SC_CLK_TCK")
HERE = os.path.dirname(os.path.abspath(__file__))
BROKER = os.path.join(HERE, "..", "kafka", "broker.sh")


def pipeline(docs, plugins=""):
    return calm_run(docs, "bench", plugins)


def operator(work, plugins, port, kafka, name):
    return f"""
[server]
addr = "127.0.0.1:{port}"
data_dir = {json.dumps(os.path.join(work, "data"))}
plugin_dir = {json.dumps(plugins)}
cache_dir = {json.dumps(os.path.join(work, "cache"))}
admin_token_env = "BENCH_ADMIN"
isolation = "process"
requests_per_second = 1000
request_burst = 1000

[fleet]
name = "{name}"
token_env = "BENCH_FLEET"
control = ["http://127.0.0.1:{port}"]
partitions = 6
pairs = 2
work_dir = {json.dumps(os.path.join(work, "fleet"))}
kafka = {{ bootstrap_servers = "{kafka}" }}

[[tenants]]
name = "bench"
token_env = "BENCH_TENANT"
pipelines = ["bench"]
plugins = ["generator_connector.wasm", "trim_whitespace.wasm", "nop_indexer.wasm"]
"""


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return None


class Roles:
    """Samples the CPU of the fleet's processes by role every 50 ms, so that
    a process that ends (the run's) is counted to its last sample."""

    def __init__(self, serve, fleet):
        self.serve, self.fleet = serve, fleet
        self.seen = {}  # pid -> (role, ticks at first sight, last ticks)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.sample()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def role(self, pid, parent, cmdline):
        if pid in (self.serve, self.fleet):
            return "control"
        if parent == self.serve and "serve-run" in cmdline:
            return "runner"
        if parent == self.fleet and "fleet-pipeline" in cmdline:
            return "pipeline"
        if "kafka.Kafka" in cmdline:
            return "broker"
        return None

    def sample(self):
        for pid, (parent, cmdline) in processes().items():
            role = self.role(pid, parent, cmdline)
            ticks = cpu_ticks(pid) if role else None
            if ticks is None:
                continue
            with self.lock:
                first = self.seen.get(pid, (role, ticks, ticks))[1]
                self.seen[pid] = (role, first, ticks)

    def run(self):
        while not self.done.is_set():
            self.sample()
            time.sleep(0.05)

    def mark(self):
        """Seconds of CPU per role so far, from when each was first seen."""
        self.sample()
        with self.lock:
            totals = {}
            for role, first, last in self.seen.values():
                totals[role] = totals.get(role, 0) + (last - first) / TICK
            return totals

    def stop(self):
        self.done.set()
        self.thread.join()


class Fleet:
    def __init__(self, weir, work, plugins, kafka):
        port = free_port()
        path = os.path.join(work, "operator.toml")
        with open(path, "w") as f:
            f.write(operator(work, plugins, port, kafka, f"bench{os.getpid()}"))
        env = dict(os.environ, BENCH_TENANT=TOKEN, BENCH_ADMIN=ADMIN, BENCH_FLEET=FLEET)
        self.logs = [open(os.path.join(work, name), "w+") for name in ("serve.log", "fleet.log")]
        self.serve = subprocess.Popen(
            [weir, "serve", path], stdout=self.logs[0], stderr=subprocess.STDOUT, env=env
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 90
        while not self.ready():
            if time.time() > deadline or self.serve.poll() is not None:
                raise SystemExit("weir serve did not lead:\n" + self.log(0))
            time.sleep(0.1)
        self.fleet = subprocess.Popen(
            [weir, "fleet", path], stdout=self.logs[1], stderr=subprocess.STDOUT, env=env
        )

    def log(self, n):
        self.logs[n].seek(0)
        return self.logs[n].read()[-4000:]

    def ready(self):
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=5) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def call(self, method, path, token, body=None):
        return call(self.url, method, path, token, body)

    def run(self, text):
        """Submit `text`; (seconds from submission to the end, the run)."""
        t0 = time.time()
        status, run = self.call("POST", "/api/runs", TOKEN, text)
        if status != 201:
            raise SystemExit(f"refused ({status}): {run}")
        while run.get("status") in ("running", "paused", "stopping"):
            time.sleep(0.1)
            _, run = self.call("GET", f"/api/runs/{run['id']}", TOKEN)
        if run.get("status") != "success":
            raise SystemExit(f"the fleet run ended {run}\n{self.log(0)}\n{self.log(1)}")
        return (run["finished_ms"] / 1000 - t0), run

    def stop(self):
        for proc in (self.fleet, self.serve):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in self.logs:
            log.close()


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_run(weir, work, plugins, docs):
    """(wall seconds, CPU seconds) of `weir run` on the pipeline."""
    path = os.path.join(work, "run.toml")
    with open(path, "w") as f:
        f.write(pipeline(docs, plugins))
    env = dict(os.environ, WEIR_CACHE_DIR=os.path.join(work, "cache"))
    t0 = time.time()
    proc = subprocess.Popen(
        [weir, "run", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=work
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"weir run failed: {proc.stderr.read().decode()[-4000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def kafka_address(args):
    if args.kafka:
        return args.kafka, False
    if os.environ.get("WEIR_KAFKA_BOOTSTRAP"):
        return os.environ["WEIR_KAFKA_BOOTSTRAP"], False
    subprocess.run(["bash", BROKER, "start"], check=True)
    return "127.0.0.1:" + os.environ.get("WEIR_KAFKA_PORT", "19092"), True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weir", required=True)
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plugins", default="plugins/dist")
    parser.add_argument("--kafka")
    parser.add_argument("--keep", help="keep the work directory (logs) here")
    args = parser.parse_args()
    weir, plugins = os.path.abspath(args.weir), os.path.abspath(args.plugins)
    kafka, started = kafka_address(args)
    runs, fleets = [], []
    try:
        with tempfile.TemporaryDirectory() as temp:
            work = os.path.abspath(args.keep) if args.keep else temp
            os.makedirs(work, exist_ok=True)
            fleet = Fleet(weir, work, plugins, kafka)
            roles = Roles(fleet.serve.pid, fleet.fleet.pid)
            try:
                local_run(weir, work, plugins, 1000)  # compile once
                fleet.run(pipeline(1000))  # the spec, the pipeline's process, the cache
                for n in range(args.rounds):
                    order = ("run", "fleet") if n % 2 == 0 else ("fleet", "run")
                    for which in order:
                        if which == "run":
                            runs.append(local_run(weir, work, plugins, args.docs))
                            continue
                        before = roles.mark()
                        wall, run = fleet.run(pipeline(args.docs))
                        after = roles.mark()
                        cpu = {r: after.get(r, 0) - before.get(r, 0) for r in after}
                        counts = run["counts"]
                        if counts["indexed"] != args.docs:
                            raise SystemExit(f"the fleet indexed {counts}")
                        fleets.append((wall, cpu))
            finally:
                roles.stop()
                fleet.stop()
    finally:
        if started:
            subprocess.run(["bash", BROKER, "stop"], check=False)
    report(args, runs, fleets)


def report(args, runs, fleets):
    docs = args.docs
    run_wall = statistics.median(w for w, _ in runs)
    run_cpu = statistics.median(c for _, c in runs)
    fleet_wall = statistics.median(w for w, _ in fleets)
    roles = sorted({r for _, cpu in fleets for r in cpu})
    role_cpu = {r: statistics.median(cpu.get(r, 0) for _, cpu in fleets) for r in roles}
    fleet_cpu = statistics.median(sum(cpu.values()) for _, cpu in fleets)
    us = lambda seconds: seconds / docs * 1e6  # noqa: E731
    print(f"{docs} documents, {args.rounds} rounds (medians)")
    print(f"  weir run        {docs / run_wall:9.0f} docs/s   CPU {us(run_cpu):6.1f} µs/doc")
    print(f"  fleet           {docs / fleet_wall:9.0f} docs/s   CPU {us(fleet_cpu):6.1f} µs/doc")
    for role in roles:
        print(f"    {role:9}                        {us(role_cpu[role]):6.1f} µs/doc")
    print(
        f"  fleet/run: docs/s {run_wall / fleet_wall:.2f}x, CPU per document "
        f"{fleet_cpu / run_cpu:.2f}x ({us(fleet_cpu - run_cpu):.1f} µs/doc for the extra hops, "
        f"{us(fleet_cpu - role_cpu.get('broker', 0) - run_cpu):.1f} of them in Weir's processes)"
    )
    json.dump(
        {"docs": docs, "run": runs, "fleet": [{"wall": w, "cpu": c} for w, c in fleets]},
        sys.stderr,
    )
    print(file=sys.stderr)


if __name__ == "__main__":
    main()
