#!/usr/bin/python3
"""bench_swap_slicing: a pair of jobs that each fit on the device alone but not
together, time-sliced, against running them one after the other (issue 35).

Each slice of such a pair swaps the outgoing job's memory out to host and the
incoming job's in. gandivad measures what each hand-over costs and lengthens
the slices so that swapping stays under --switch-share of the device's time (2 %
by default). The bench runs, each under its own gandivad, in one run:

  back-to-back   A, then B (no swaps)
  sliced         A and B at once, gandivad's defaults (--switch-share 2)
  sliced, share 0  A and B at once, slices never lengthened (a swap every 100 ms)

and reports the pair's wall time against back-to-back, the hand-overs, the
swaps and the slice gandivad chose (slice_now_ms).

The jobs are the shim's test workload (driver-API programs under the real CUDA
shim) on the CPU stand-in for libcuda (a test double: device memory is host
memory, so a swap is a memcpy, at this machine's memory bandwidth: on a GPU it
is a PCIe or NVLink copy). Prints a table and writes bench_swap_slicing.json:

  /usr/bin/python3 bench/job/bench_swap_slicing.py --build-dir build --out /tmp
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_node import job_env, start_gandivad  # noqa: E402

MIB = 1 << 20


class Pair:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build_dir)
        self.cli = os.path.join(self.build, "cli", "gandiva")
        self.app = os.path.join(self.build, "tests", "shim", "gd_shim_procaddr_app")
        self.image = os.path.join(self.build, "tests", "shim", "kernels.fatbin")
        for path in (self.cli, self.app, self.image):
            if not os.path.exists(path):
                sys.exit(f"bench_swap_slicing: missing {path} (build first)")
        sys.path.insert(0, os.path.join(self.build, "python"))
        import gandiva  # noqa: E402  (the freshly built package)
        self.gandiva = gandiva

    def env(self, endpoint):
        env = job_env(self.build, endpoint)
        env["LD_LIBRARY_PATH"] = os.path.join(self.build, "tests", "shim", "standin")
        env["GANDIVA_SHIM"] = os.path.join(self.build, "shim", "libgandiva_shim.so")
        return env

    def job_argv(self, name):
        a = self.args
        return [self.cli, "run", "--name", name, "--", self.app, "--image", self.image,
                "--iterations", str(a.iterations), "--buffers", "2",
                "--buffer-bytes", str(a.job_mib * MIB // 2), "--sleep-us", str(a.sleep_us)]

    def run(self, together, share):
        """Wall time of A and B (at once or one after the other) under a fresh gandivad."""
        a = self.args
        tmp = tempfile.mkdtemp(prefix="gd-swapslice-")
        endpoint = f"ipc://{tmp}/gd.sock"
        env = self.env(endpoint)
        client = self.gandiva.Client(endpoint, timeout_ms=5000)
        # The device holds one job and a half: never both.
        memory = a.job_mib * 3 // 2
        daemon = start_gandivad(
            [self.cli, "daemon", "--devices", "gpu:1", "--device-memory-mib", str(memory),
             "--slice-ms", "100", "--switch-share", str(share), "--endpoint", endpoint],
            os.path.join(tmp, "gandivad.log"), env, client.hello)
        slice_now = 0
        try:
            start = time.monotonic()
            procs = []
            for name in ("A", "B"):
                log = open(os.path.join(tmp, f"{name}.log"), "w")
                procs.append(subprocess.Popen(self.job_argv(name), stdout=log,
                                              stderr=subprocess.STDOUT, env=env))
                if not together:
                    if procs[-1].wait(timeout=a.timeout_s) != 0:
                        raise RuntimeError(f"job {name} failed; see {tmp}")
            while any(p.poll() is None for p in procs):
                slice_now = max(slice_now, client.call("list_devices")["devices"][0]["slice_now_ms"])
                if time.monotonic() - start > a.timeout_s:
                    raise RuntimeError(f"the pair did not finish; see {tmp}")
                time.sleep(0.05)
            wall = time.monotonic() - start
            if any(p.returncode != 0 for p in procs):
                raise RuntimeError(f"a job failed; see {tmp}")
            device = client.call("list_devices")["devices"][0]
            slice_now = max(slice_now, device["slice_now_ms"])
            jobs = client.jobs()
            return {"wall_s": wall, "switches": device["switches"],
                    "mean_handover_ms": device["mean_handover_ms"],
                    "swaps": sum(j["swaps"] for j in jobs), "slice_now_ms": slice_now}
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=10)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build-dir", default="build")
    p.add_argument("--out", default=".")
    p.add_argument("--job-mib", type=int, default=256, help="device memory of each job")
    p.add_argument("--iterations", type=int, default=400)
    p.add_argument("--sleep-us", type=int, default=10000, help="host time per iteration")
    p.add_argument("--timeout-s", type=int, default=600)
    args = p.parse_args()
    pair = Pair(args)
    rows = [("back-to-back", pair.run(False, 2)),
            ("sliced (defaults: --switch-share 2)", pair.run(True, 2)),
            ("sliced, --switch-share 0", pair.run(True, 0))]
    base = rows[0][1]["wall_s"]
    print(f"two jobs of {args.job_mib} MiB on a device of {args.job_mib * 3 // 2} MiB "
          f"(CPU stand-in), {args.iterations} iterations of >= {args.sleep_us / 1000:g} ms each")
    print(f"{'run':38} {'wall s':>8} {'vs b2b':>7} {'switches':>9} {'swaps':>6} "
          f"{'handover ms':>12} {'slice ms':>9}")
    for name, r in rows:
        r["vs_back_to_back"] = r["wall_s"] / base
        print(f"{name:38} {r['wall_s']:8.2f} {r['vs_back_to_back']:7.3f} {r['switches']:9d} "
              f"{r['swaps']:6d} {r['mean_handover_ms']:12.2f} {r['slice_now_ms']:9d}")
    out = os.path.join(args.out, "bench_swap_slicing.json")
    with open(out, "w") as f:
        json.dump({"args": vars(args), "runs": dict(rows)}, f, indent=2)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
