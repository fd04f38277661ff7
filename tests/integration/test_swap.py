"""Jobs time-sliced on one GPU whose memory cannot hold them both: the controller
has the job leaving the device swap its memory out (the CUDA shim copies it to
host and releases it, keeping the device addresses) so the next one fits.
Runs real driver-API programs under the real shim against the CPU stand-in for
libcuda (a test double: there is no GPU here).

Slices of a pair that swaps lengthen so that swapping stays under
--switch-share of the device's time; the tests of the swap itself turn that
off (--switch-share 0), so that every slice swaps."""

import os
import sys
import time

from standin_gpu import FATBIN as IMAGE, PROCADDR_APP as APP, SHIM, STANDIN_DIR, STANDIN_DRIVER, built

pytestmark = built(SHIM, STANDIN_DRIVER, APP, IMAGE)

MIB = 1 << 20


def test_jobs_that_do_not_fit_together_swap_at_each_switch(daemon_factory, tmp_path):
    # Two jobs of ~48 MiB on a device of 80 MiB: never both resident.
    d = daemon_factory("--devices", "gpu:1", "--device-memory-mib", "80", "--slice-ms", "50",
                       "--switch-share", "0")
    d.env["LD_LIBRARY_PATH"] = STANDIN_DIR
    d.env["GANDIVA_SHIM"] = SHIM
    procs = [d.run(APP, "--image", IMAGE, "--iterations", "400", "--buffers", "2",
                   "--buffer-bytes", str(24 * MIB), "--sleep-us", "1000", name=n) for n in ("a", "b")]
    swapped_seen = set()
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, d.read_log()
        for j in d.cli_json("ps", "--all"):
            if j["swap_state"] == "swapped_out" and j["swapped_bytes"] >= 48 * MIB:
                swapped_seen.add(j["name"])
        time.sleep(0.02)
    # Each was seen parked with its memory on the host, not on the device.
    assert swapped_seen == {"a", "b"}
    for p in procs:
        # The program re-reads every buffer at the end: exit 0 means no byte changed.
        assert p.wait(timeout=30) == 0, p.stderr.read()
    jobs = {j["name"]: j for j in d.cli_json("ps", "--all")}
    for name in ("a", "b"):
        assert jobs[name]["state"] == "exited"
        assert jobs[name]["swaps"] >= 2, jobs[name]
        assert jobs[name]["boundary_source"] == "inferred"
    assert d.cli_json("devices")[0]["memory_bytes"] == 80 * MIB


def run_swapping_pair(d, iterations):
    """Two jobs of 2 x 24 MiB on a device of 80 MiB, sliced in 50 ms slices until
    both end; returns their records and the longest slice_now_ms seen meanwhile."""
    d.env["LD_LIBRARY_PATH"] = STANDIN_DIR
    d.env["GANDIVA_SHIM"] = SHIM
    procs = [d.run(APP, "--image", IMAGE, "--iterations", str(iterations), "--buffers", "2",
                   "--buffer-bytes", str(24 * MIB), "--sleep-us", "1000", name=n) for n in ("a", "b")]
    slice_now = 0
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, d.read_log()
        slice_now = max(slice_now, d.cli_json("devices")[0]["slice_now_ms"])
        time.sleep(0.05)
    for p in procs:
        assert p.wait(timeout=30) == 0, p.stderr.read()
    return {j["name"]: j for j in d.cli_json("ps", "--all")}, slice_now


def test_slices_of_a_pair_that_swaps_lengthen_to_keep_swapping_cheap(daemon_factory):
    # The same pair twice: slices never lengthened (a swap at every 50 ms slice),
    # then with --switch-share at its default (2 %: slices >= 49 hand-overs).
    swapping = daemon_factory("--devices", "gpu:1", "--device-memory-mib", "80", "--slice-ms",
                              "50", "--switch-share", "0")
    every_slice, unchanged = run_swapping_pair(swapping, 200)
    assert unchanged == 50
    swapping.stop()  # the next one serves the same endpoint
    d = daemon_factory("--devices", "gpu:1", "--device-memory-mib", "80", "--slice-ms", "50")
    lengthened, slice_now = run_swapping_pair(d, 200)
    # Each hand-over swaps 48 MiB out and 48 MiB in: far more than 1/49 of 50 ms.
    assert slice_now > 50, d.read_log()
    assert "keep it under 2%" in d.read_log()
    swaps = lambda jobs: jobs["a"]["swaps"] + jobs["b"]["swaps"]
    assert swaps(lengthened) >= 1, lengthened  # they did take turns
    assert swaps(lengthened) * 2 < swaps(every_slice), (lengthened, every_slice)
    assert all(j["state"] == "exited" for j in lengthened.values())


def test_jobs_that_fit_together_never_swap(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "gpu:1", "--device-memory-mib", "1024", "--slice-ms", "50")
    d.env["LD_LIBRARY_PATH"] = STANDIN_DIR
    d.env["GANDIVA_SHIM"] = SHIM
    procs = [d.run(APP, "--image", IMAGE, "--iterations", "300", "--buffers", "2",
                   "--buffer-bytes", str(8 * MIB), "--sleep-us", "1000", name=n) for n in ("a", "b")]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    jobs = {j["name"]: j for j in d.cli_json("ps", "--all")}
    assert jobs["a"]["slices"] + jobs["b"]["slices"] >= 4, jobs
    assert jobs["a"]["swaps"] == 0 and jobs["b"]["swaps"] == 0


def test_registered_torch_job_releases_cached_memory_before_swapping(daemon_factory, tmp_path):
    # Each job: 24 MiB live + a 24 MiB block its allocator caches. Device: 64 MiB.
    # With the cache released before the park (gandiva.torch), only the live 24 MiB
    # are swapped; without, 48 MiB would be.
    d = daemon_factory("--devices", "gpu:1", "--device-memory-mib", "64", "--slice-ms", "50",
                       "--switch-share", "0")
    d.env["LD_LIBRARY_PATH"] = STANDIN_DIR
    d.env["GANDIVA_SHIM"] = SHIM
    job = os.path.join(os.path.dirname(__file__), "jobs", "cached_memory_job.py")
    procs = [d.run(sys.executable, job, "300", "24", "24", str(tmp_path / f"{n}.calls"), name=n)
             for n in ("a", "b")]
    swapped = {}
    deadline = time.monotonic() + 120
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, d.read_log()
        for j in d.cli_json("ps", "--all"):
            # (swapped_bytes drops to 0 at the end of a swap-in, a moment before the state.)
            if j["swap_state"] == "swapped_out" and j["swapped_bytes"] > 0:
                swapped.setdefault(j["name"], set()).add(j["swapped_bytes"])
        time.sleep(0.02)
    for p in procs:
        assert p.wait(timeout=30) == 0, p.stderr.read()
    assert set(swapped) == {"a", "b"}, d.read_log()
    for name, sizes in swapped.items():
        # The live buffer only. (A swap requested in the microseconds between the job's
        # check and its boundary still moves the cache too: 48 MiB once, not a failure.)
        assert 24 * MIB in sizes and sizes <= {24 * MIB, 48 * MIB}, (name, sizes)
        calls, pending = map(int, (tmp_path / f"{name}.calls").read_text().split())
        assert calls >= 1 and calls == pending  # called only when a swap-out was pending
