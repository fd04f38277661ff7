#!/usr/bin/python3
"""bench_disk: a checkpoint of N MiB to local disk and the restore from it,
against a dd-style sequential write and read of the same number of bytes to
the same directory, measured in one run.

  checkpoint   synthetic_state_job --checkpoint-at: gd_checkpoint(DIR) from
               its call to its return (stream written, fsynced, renamed,
               directory fsynced)
  dd write     dd if=/dev/zero of=DIR/dd.bin bs=4M count=N/4 conv=fsync
  restore      a new synthetic_state_job with GANDIVA_RESTORE=DIR: its first
               boundary (the file mapped, every chunk checked, the state
               loaded into the job's memory: each chunk its load reads whole
               is copied and checked in one pass, on two cores)
  dd read      dd if=DIR/state.gdck of=/dev/null bs=4M, the faster of two (the
               page cache is warm for both: each reads right after the write;
               dd reads into one 4 MiB buffer, a restore into the job's 1 GiB)

Goal (issue 14): each <= 1.3x its dd. Runs --repeat times, alternating, and
reports the medians; writes bench_disk.json.

  /usr/bin/python3 bench/migration/bench_disk.py --build-dir build --dir /var/tmp/gd-disk --out DIR
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_migration import read_timing

GOAL_RATIO = 1.3


def events(path):
    """{event: its last CLOCK_MONOTONIC ns} from the job's timing file."""
    return {what: seen[-1][1] for what, seen in read_timing(path).items()}


def dd(args):
    t0 = time.monotonic()
    subprocess.run(["dd", *args, "status=none"], check=True)
    return (time.monotonic() - t0) * 1e3


def one_round(job_exe, work, mib):
    ckpt = os.path.join(work, "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    os.makedirs(ckpt)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANDIVA_")}
    timing = os.path.join(work, "save.timing")
    if os.path.exists(timing):
        os.unlink(timing)
    subprocess.run([job_exe, "--mib", str(mib), "--seed", "3", "--iterations", "6",
                    "--iteration-ms", "0", "--checkpoint-at", "5", "--checkpoint-dir", ckpt,
                    "--timing", timing], check=True, env=env, capture_output=True, timeout=600)
    e = events(timing)
    checkpoint_ms = (e["checkpoint_end"] - e["checkpoint_begin"]) / 1e6
    state = os.path.join(ckpt, "state.gdck")
    size = os.path.getsize(state)

    dd_file = os.path.join(work, "dd.bin")
    dd_write_ms = dd(["if=/dev/zero", f"of={dd_file}", "bs=4M", f"count={(size + (4 << 20) - 1) // (4 << 20)}",
                      "conv=fsync"])
    os.unlink(dd_file)

    timing = os.path.join(work, "restore.timing")
    if os.path.exists(timing):
        os.unlink(timing)
    # The faster of two reads: the same read here takes 35-45 ms or, now and
    # then, twice that; the slow one would flatter the ratio.
    dd_read_ms = min(dd([f"if={state}", "of=/dev/null", "bs=4M"]) for _ in range(2))
    env_restore = dict(env, GANDIVA_RESTORE=ckpt)
    subprocess.run([job_exe, "--mib", str(mib), "--seed", "3", "--iterations", "6",
                    "--iteration-ms", "0", "--timing", timing], check=True, env=env_restore,
                   capture_output=True, timeout=600)
    e = events(timing)
    restore_ms = (e["first_boundary_end"] - e["first_boundary_begin"]) / 1e6
    return {"bytes": size, "checkpoint_ms": checkpoint_ms, "dd_write_ms": dd_write_ms,
            "restore_ms": restore_ms, "dd_read_ms": dd_read_ms}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary directory in /var/tmp)")
    ap.add_argument("--out", default=".", help="directory for bench_disk.json")
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    job_exe = os.path.join(os.path.abspath(args.build_dir), "bench", "migration", "synthetic_state_job")
    if not os.path.exists(job_exe):
        sys.exit(f"bench_disk: {job_exe} not built (cmake --build {args.build_dir} --target synthetic_state_job)")
    work = args.dir or tempfile.mkdtemp(prefix="gd-disk-", dir="/var/tmp")
    os.makedirs(work, exist_ok=True)
    rounds = []
    try:
        for _ in range(args.repeat):
            rounds.append(one_round(job_exe, work, args.mib))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if k != "bytes"}
    ratios = {"checkpoint_to_dd_write": round(med["checkpoint_ms"] / med["dd_write_ms"], 2),
              "restore_to_dd_read": round(med["restore_ms"] / med["dd_read_ms"], 2)}
    print(f"{args.mib} MiB of state ({rounds[0]['bytes']} bytes on disk), median of {args.repeat}:")
    print(f"{'':>12} {'gandiva ms':>11} {'dd ms':>8} {'ratio':>6}")
    print(f"{'checkpoint':>12} {med['checkpoint_ms']:>11.1f} {med['dd_write_ms']:>8.1f} "
          f"{ratios['checkpoint_to_dd_write']:>6.2f}")
    print(f"{'restore':>12} {med['restore_ms']:>11.1f} {med['dd_read_ms']:>8.1f} "
          f"{ratios['restore_to_dd_read']:>6.2f}")
    met = all(v <= GOAL_RATIO for v in ratios.values())
    print(f"goal (each <= {GOAL_RATIO}x its dd): {'met' if met else 'MISSED'}")
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, "bench_disk.json")
    with open(out, "w") as f:
        json.dump({"bench": "disk", "mib": args.mib, "medians_ms": med, "ratios": ratios,
                   "goal_met": met, "rounds": rounds}, f, indent=2)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
