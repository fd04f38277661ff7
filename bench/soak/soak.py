#!/usr/bin/env python3
"""Soak under load (issue 15, item 2): one real gandivad time-slicing dozens of
real PyTorch jobs for minutes while a client hammers its API.

1. Starts gandivad --devices cpu:2 --slice-ms 50 on a private ipc:// endpoint
   (tests/integration/conftest.py's Daemon).
2. Launches --jobs copies of soak_job.py (a small MLP, one thread, a boundary
   per optimizer.step()) with the API's `launch`; gandivad spreads them over
   its devices. Waits until every one has passed its first boundary, then
   samples gandivad's RSS and open fds.
3. For --minutes, a thread with its own client calls list_jobs and
   list_switches back to back (no pause) and times each call.
4. At the end: samples RSS and fds again; reads every switch of the window.
   Consecutive switches on a device give the length of each slice (from the
   job running to it parking); counted are slices over 2x the configured
   slice, and of those, the ones over by more than one iteration of the job
   that ran (its p50 iteration time from list_jobs: a slice ends at the first
   boundary after its time is up, so one iteration over is expected).
   Hand-over p50/p99 from the switches' handover_ms.
5. Stops the jobs (the API's `kill`, SIGTERM; each writes the iterations it
   counted), and compares gandivad's `iterations` for each with its own.

Prints a table and writes DIR/soak.json. Every process it started is killed on
the way out, error or not.
usage: soak.py [--build-dir build] [--out DIR] [--jobs 32] [--minutes 10]
"""

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--build-dir", default=str(ROOT / "build"))
ap.add_argument("--out", default=".")
ap.add_argument("--jobs", type=int, default=32)
ap.add_argument("--minutes", type=float, default=10.0)
ap.add_argument("--devices", default="cpu:2")
ap.add_argument("--slice-ms", type=int, default=50)
ap.add_argument("--width", type=int, default=256, help="the job's MLP width (its step time)")
ap.add_argument("--sample-s", type=float, default=30.0, help="RSS/fd sample period during the run")
ap.add_argument("--keep", action="store_true", help="keep the run directory (logs)")
ARGS = ap.parse_args()

BUILD = os.path.abspath(ARGS.build_dir)
os.environ["GANDIVA_BUILD_DIR"] = BUILD  # read by the integration helpers at import
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from conftest import Daemon, pids_running, wait_for  # noqa: E402  (needs GANDIVA_BUILD_DIR)
import gandiva  # noqa: E402  (conftest put build/python on sys.path)

JOB = str(Path(__file__).resolve().parent / "soak_job.py")
PYTHON = "/usr/bin/python3"  # Debian's, which has torch


def percentile(values, q):
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))]


def proc_sample(pid):
    """gandivad's resident memory (kB) and open fds, from /proc. RSS split too:
    RssShmem grows as gandivad first touches pages of the jobs' shared control
    blocks (profile rings), which is not a leak; RssAnon is its own heap."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    kb = {k: int(fields[k].split()[0]) for k in ("VmRSS", "RssAnon", "RssFile", "RssShmem")}
    return {"t": time.monotonic(), "rss_kb": kb["VmRSS"], "anon_kb": kb["RssAnon"],
            "file_kb": kb["RssFile"], "shmem_kb": kb["RssShmem"],
            "fds": len(os.listdir(f"/proc/{pid}/fd"))}


class Hammer(threading.Thread):
    """list_jobs and list_switches back to back until stopped; latencies in ms.
    Its own Client: a client's socket is not for two threads at once."""

    def __init__(self, endpoint):
        super().__init__(daemon=True)
        self.client = gandiva.Client(endpoint)
        self.stop = threading.Event()
        self.latency = {"list_jobs": [], "list_switches": []}
        self.errors = []

    def run(self):
        while not self.stop.is_set():
            for kind in self.latency:
                t = time.perf_counter()
                try:
                    self.client.call(kind)  # list_switches: its default, the last 1000 per device
                except gandiva.GandivaError as e:
                    self.errors.append(f"{kind}: {e}")
                    continue
                self.latency[kind].append((time.perf_counter() - t) * 1000)


def slices(switches, t0, t1):
    """(device, job, length_ms, start_s) of every slice that started and ended in [t0, t1]:
    from switch a's job running (at_s + handover) to it parking (the next switch's
    at_s, whose `from` it is)."""
    out = []
    by_device = {}
    for s in switches:
        by_device.setdefault(s["device"], []).append(s)
    for dev, seq in by_device.items():
        seq.sort(key=lambda s: s["at_s"])
        for a, b in zip(seq, seq[1:]):
            if a["to"] == 0 or b["from"] != a["to"] or a["at_s"] < t0 or b["at_s"] > t1:
                continue
            out.append((dev, a["to"], (b["at_s"] - a["at_s"]) * 1000 - a["handover_ms"], a["at_s"] - t0))
    return out


def soak(root):
    daemon = Daemon(root, "--devices", ARGS.devices, "--slice-ms", str(ARGS.slice_ms))
    client = gandiva.Client(daemon.endpoint, timeout_ms=30000)
    gd_pid = client.hello()["pid"]
    launched = {}  # job id -> (pid, result file)
    hammer = None
    try:
        env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1")
        load_before = os.getloadavg()
        for i in range(ARGS.jobs):
            result = str(root / f"job{i}.json")
            r = client.launch([PYTHON, JOB, "--result", result, "--width", str(ARGS.width)],
                              cwd=str(root), env=env, name=f"soak{i}")
            launched[r["job"]] = (r["pid"], result)
        # Registered and past the first boundary (attach's): torch imports take a while
        # on two shared cores.
        wait_for(lambda: all(j["iterations"] >= 1 for j in client.jobs() if j["id"] in launched)
                 and len(client.jobs()) >= ARGS.jobs, 600, "every job's first boundary")
        dead = [j for j in client.jobs() if j["id"] in launched and j["exit_reason"] != "none"]
        if dead:
            raise RuntimeError(f"jobs ended early: {[(j['name'], j['exit_detail']) for j in dead]}")

        start = proc_sample(gd_pid)
        samples = [start]
        t0 = start["t"]
        hammer = Hammer(daemon.endpoint)
        hammer.start()
        print(f"{ARGS.jobs} jobs running; soaking {ARGS.minutes:g} min "
              f"(load {load_before[0]:.2f} before launch)", flush=True)
        end_at = t0 + ARGS.minutes * 60
        while time.monotonic() < end_at:
            time.sleep(min(ARGS.sample_s, max(0.0, end_at - time.monotonic())))
            samples.append(proc_sample(gd_pid))
            s = samples[-1]
            print(f"  {s['t'] - t0:6.0f} s  rss {s['rss_kb'] / 1024:.1f} MiB (anon "
                  f"{s['anon_kb'] / 1024:.1f})  fds {s['fds']}  "
                  f"calls {sum(len(v) for v in hammer.latency.values())}", flush=True)
        t1 = time.monotonic()
        hammer.stop.set()
        hammer.join()
        end = proc_sample(gd_pid)
        load_after = os.getloadavg()

        switches = client.call("list_switches", limit=1_000_000)["switches"]
        jobs_live = {j["id"]: j for j in client.jobs() if j["id"] in launched}

        # Stop the jobs: SIGTERM through gandivad; a parked (frozen) job acts on it
        # when its turn to run comes, so this takes a round of slices or so.
        for jid in launched:
            client.kill(jid, signal=int(signal.SIGTERM))
        wait_for(lambda: all(os.path.exists(res) for _, res in launched.values()), 300,
                 "every job's result file")
        wait_for(lambda: all(j["exit_reason"] != "none" for j in client.jobs() if j["id"] in launched),
                 60, "gandivad to see every job end")
        jobs_end = {j["id"]: j for j in client.jobs() if j["id"] in launched}
    finally:
        if hammer:
            hammer.stop.set()
        for pid, _ in launched.values():  # whatever is left of them
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            daemon.stop()
        except Exception:  # it did not stop on SIGTERM within 10 s
            daemon.proc.kill()
        for pid in pids_running(str(root)):  # anything else started under the run dir
            os.kill(pid, signal.SIGKILL)

    return analyse(t0, t1, start, end, samples, load_before, load_after, hammer, switches,
                   jobs_live, jobs_end, launched)


def analyse(t0, t1, start, end, samples, load_before, load_after, hammer, switches,
            jobs_live, jobs_end, launched):
    slice_ms = ARGS.slice_ms
    lengths = slices(switches, t0, t1)
    iter_ms = {jid: j["p50_ms"] for jid, j in jobs_live.items()}
    over = [x for x in lengths if x[2] > 2 * slice_ms]  # all weights are 1
    over_iter = [x for x in over if x[2] > 2 * slice_ms + iter_ms.get(x[1], 0)]
    handover = [s["handover_ms"] for s in switches if t0 <= s["at_s"] <= t1]
    per_job = []
    for jid, (pid, result) in sorted(launched.items()):
        with open(result) as f:
            own = json.load(f)["iterations"]
        gd = jobs_end[jid]["iterations"]
        per_job.append({"job": jid, "name": jobs_end[jid]["name"], "device": jobs_end[jid]["device"],
                        "gandivad_iterations": gd, "own_iterations": own, "diff": gd - own,
                        "p50_ms": iter_ms[jid], "slices": jobs_end[jid]["slices"],
                        "device_time_s": jobs_end[jid]["device_time_s"],
                        "exit": jobs_end[jid]["exit_detail"]})
    window = t1 - t0
    calls = {k: {"calls": len(v), "per_s": len(v) / window, "p50_ms": percentile(v, 50),
                 "p99_ms": percentile(v, 99), "max_ms": max(v) if v else None}
             for k, v in hammer.latency.items()}
    slice_lens = [x[2] for x in lengths]
    return {
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "cores": os.cpu_count(), "devices": ARGS.devices, "slice_ms": slice_ms,
        "jobs": len(launched), "width": ARGS.width, "window_s": window,
        "load_before": load_before, "load_after": load_after,
        "api": calls, "api_errors": hammer.errors[:20], "api_error_count": len(hammer.errors),
        "switches": len(handover),
        "handover_p50_ms": percentile(handover, 50), "handover_p99_ms": percentile(handover, 99),
        "handover_max_ms": max(handover) if handover else None,
        "slices": len(lengths), "slice_p50_ms": percentile(slice_lens, 50),
        "slice_p99_ms": percentile(slice_lens, 99),
        "slice_max_ms": max(slice_lens) if slice_lens else None,
        "slices_over_2x": len(over), "slices_over_2x_plus_iteration": len(over_iter),
        # [device, job, length ms, seconds into the window] of the longest ones
        "worst_over": sorted(over_iter, key=lambda x: -x[2])[:10],
        "iteration_p50_ms_median": percentile(list(iter_ms.values()), 50),
        "gandivad_start": start, "gandivad_end": end, "samples": samples,
        "iterations_match": sum(1 for j in per_job if j["diff"] == 0),
        "per_job": per_job,
    }


def print_table(r):
    print(f"\nsoak: {r['jobs']} jobs on {r['devices']} ({r['cores']} cores), slice {r['slice_ms']} ms, "
          f"{r['window_s']:.0f} s; load {r['load_before'][0]:.2f} before, {r['load_after'][0]:.2f} after "
          f"(1-min averages)")
    rows = [
        ("slices measured", f"{r['slices']}  (p50 {r['slice_p50_ms']:.1f} ms, p99 "
                            f"{r['slice_p99_ms']:.1f} ms, max {r['slice_max_ms']:.1f} ms)"),
        (f"slices > 2x ({2 * r['slice_ms']} ms)", f"{r['slices_over_2x']}"),
        ("  of those > 2x + 1 iteration", f"{r['slices_over_2x_plus_iteration']}  "
                                         f"(jobs' median p50 iteration {r['iteration_p50_ms_median']:.1f} ms)"),
        ("hand-over p50 / p99 / max", f"{r['handover_p50_ms']:.3f} / {r['handover_p99_ms']:.3f} / "
                                      f"{r['handover_max_ms']:.1f} ms over {r['switches']} switches"),
    ]
    for k, c in r["api"].items():
        rows.append((f"{k} calls", f"{c['calls']} ({c['per_s']:.1f}/s)  p50 {c['p50_ms']:.2f} ms  "
                                   f"p99 {c['p99_ms']:.2f} ms  max {c['max_ms']:.1f} ms"))
    rows.append(("API errors", str(r["api_error_count"])))
    s, e = r["gandivad_start"], r["gandivad_end"]
    rows.append(("gandivad RSS start -> end", f"{s['rss_kb'] / 1024:.1f} -> {e['rss_kb'] / 1024:.1f} MiB "
                                              f"(anon {s['anon_kb'] / 1024:.1f} -> {e['anon_kb'] / 1024:.1f}, "
                                              f"shmem {s['shmem_kb'] / 1024:.1f} -> {e['shmem_kb'] / 1024:.1f})"))
    rows.append(("gandivad open fds start -> end", f"{s['fds']} -> {e['fds']}"))
    diffs = sorted({j["diff"] for j in r["per_job"]})
    rows.append(("iterations: gandivad = job's own", f"{r['iterations_match']} of {r['jobs']} jobs "
                                                     f"(gandivad - own: {diffs})"))
    if r["worst_over"]:
        rows.append(("longest slices (dev job ms @s)", ", ".join(
            f"{d} {j} {ms:.0f} @{at:.0f}" for d, j, ms, at in r["worst_over"][:5])))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:{width}s}  {v}")
    print(f"\n{'job':>4s} {'device':6s} {'gandivad':>9s} {'own':>8s} {'diff':>5s} {'p50 ms':>7s} "
          f"{'slices':>6s} {'dev s':>6s}")
    for j in r["per_job"]:
        print(f"{j['job']:4d} {j['device']:6s} {j['gandivad_iterations']:9d} {j['own_iterations']:8d} "
              f"{j['diff']:5d} {j['p50_ms']:7.1f} {j['slices']:6d} {j['device_time_s']:6.1f}")


def main():
    out = Path(ARGS.out)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="gandiva-soak-"))
    try:
        result = soak(root)
    except BaseException:
        log = root / "gandivad.log"
        if log.exists():
            print("--- gandivad log (tail) ---\n" + log.read_text()[-3000:], file=sys.stderr)
        raise
    finally:
        if ARGS.keep:
            print(f"run directory kept: {root}")
        else:
            import shutil
            shutil.rmtree(root, ignore_errors=True)
    print_table(result)
    (out / "soak.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nwrote {out / 'soak.json'}")


if __name__ == "__main__":
    main()
