"""Integration tests: packing on one device with real PyTorch jobs. In pack mode
two jobs iterate during the same wall interval, in slice mode they take turns;
each job's alone time is learned while it runs alone, and rate_vs_alone is
reported for solo, sliced and packed jobs; auto mode measures both modes and
records its decision with the figures."""

import time

from conftest import INTERVAL_JOB, PYTHON, read_result
from test_time_slicing import overlaps


def window(intervals, t0, t1):
    """The iterations that ran entirely within [t0, t1] (CLOCK_MONOTONIC ns)."""
    return [iv for iv in intervals if iv[0] >= t0 and iv[1] <= t1]


def rate_of(d, name):
    return d.jobs().get(name, {}).get("rate_vs_alone")


def settle_rates(d, names, low, high, timeout=30):
    """The jobs once each one's rate_vs_alone is in (low, high]. Polled: on a
    machine other tests load by turns, the alone time (the median of the latest
    iterations) follows a change of load sooner than the rate (over seconds),
    and for that moment a job alone reads faster than alone (1.43 in one CI
    run, its 4 ms iterations slowed to 7.7 just then). A rate that never
    settles in the range still fails, with the last figures."""
    last = {}

    def settled():
        last["jobs"] = d.jobs()
        rates = [last["jobs"].get(n, {}).get("rate_vs_alone") for n in names]
        return all(r is not None and low < r <= high for r in rates) and last["jobs"]

    try:
        return d.wait_for(settled, timeout=timeout, what=f"rates of {names} in ({low}, {high}]")
    except AssertionError as e:
        raise AssertionError(f"{e}\nlast: {last.get('jobs')}") from None


def test_pack_slice_and_auto_with_two_real_jobs(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "50")
    outs = {n: tmp_path / f"{n}.json" for n in ("a", "b")}
    # 4 ms iterations, spinning for their length: the same alone or beside another
    # job while cores are free, so the figures below hold on a loaded machine too.
    cmd = [PYTHON, INTERVAL_JOB, "--iterations", "100000", "--work-ms", "4"]
    procs = [d.run(*cmd, "--out", str(outs["a"]), name="a")]
    try:
        # Solo: the alone time is learned, and the job runs at about its alone rate.
        # Judged once the job has trained a while (~1.2 s): the first rate comes
        # from the first few alone samples, which a loaded machine can slow
        # (7.8 ms for a 4 ms iteration, then a rate of 1.22, in one CI run).
        d.wait_for(lambda: rate_of(d, "a") is not None and d.jobs()["a"]["iterations"] > 300,
                   what="job a's rate_vs_alone", timeout=60)
        a = settle_rates(d, ["a"], 0.5, 1.2)["a"]
        assert 4 <= a["alone_ms"] < 40, a

        procs.append(d.run(*cmd, "--out", str(outs["b"]), name="b"))
        d.wait_for(lambda: d.jobs().get("b", {}).get("iterations", 0) > 20, what="job b to train")
        dev = d.cli_json("devices")[0]
        assert dev["share_mode"] == "slice" and dev["capacity"] == 1 and not dev["packing"]
        # Sliced: they take turns, each at about half its alone rate.
        t0 = time.monotonic_ns()
        time.sleep(3.5)
        t1 = time.monotonic_ns()
        jobs = settle_rates(d, ["a", "b"], 0, 0.8)
        assert jobs["b"]["alone_ms"] is not None, jobs["b"]  # learned in its slices
        ra, rb = (window(read_result(outs[n])["intervals"], t0, t1) for n in ("a", "b"))
        assert len(ra) > 20 and len(rb) > 20
        assert overlaps(ra, rb) == []

        # Packed: both run, their iterations overlap in time.
        d.cli("share", "cpu0", "pack")
        d.wait_for(lambda: len(d.cli_json("devices")[0]["running"]) == 2, what="both running")
        dev = d.cli_json("devices")[0]
        assert dev["share_mode"] == "pack" and dev["capacity"] == 2 and dev["packing"]
        t0 = time.monotonic_ns()
        time.sleep(3.5)
        t1 = time.monotonic_ns()
        settle_rates(d, ["a", "b"], 0, 1.2)
        ra, rb = (window(read_result(outs[n])["intervals"], t0, t1) for n in ("a", "b"))
        assert len(ra) > 20 and len(rb) > 20
        assert len(overlaps(ra, rb)) > 10

        # Auto: a sliced and a packed window, then a decision with the figures.
        d.cli("share", "cpu0", "auto", "--window-ms", "1000")
        d.wait_for(lambda: d.cli_json("devices")[0]["share_phase"] == "decided",
                   what="auto mode's decision", timeout=30)
        dev = d.cli_json("devices")[0]
        dec = dev["share_decision"]
        assert dec["reason"] == "measured", dec
        assert sorted(dec["jobs"]) == sorted(j["id"] for j in d.jobs().values())
        assert dec["mode"] in ("pack", "slice") and dec["window_s"] == 1.0
        assert 0 < dec["slice_rate"] <= 2.4 and 0 < dec["pack_rate"] <= 2.4, dec
        assert dev["packing"] == (dec["mode"] == "pack")
        # A held job leaves the measured set: auto has nothing to share any more.
        d.cli("suspend", str(d.jobs()["b"]["id"]))
        d.wait_for(lambda: d.cli_json("devices")[0]["share_phase"] == "idle", what="idle")
        assert d.jobs()["b"]["state"] == "suspended"
    finally:
        for n in ("a", "b"):
            if n in d.jobs():
                d.cli("kill", str(d.jobs()[n]["id"]), check=False)
        for p in procs:
            p.wait(timeout=30)
    # An ended job keeps its alone time; its rate is no longer current.
    a = d.jobs()["a"]
    assert a["alone_ms"] is not None and a["rate_vs_alone"] is None


def test_share_mode_rejects_bad_input(daemon_factory):
    d = daemon_factory("--devices", "cpu:1")
    for args, message in [(("gpu7", "pack"), "no device 'gpu7'"),
                          (("cpu0", "pack", "--capacity", "1"), "capacity must be 2..16"),
                          (("cpu0", "auto", "--window-ms", "5"), "window_ms must be 500..60000")]:
        r = d.cli("share", *args, check=False)
        assert r.returncode == 1 and message in r.stderr, r.stderr
    r = d.cli("share", "cpu0", "stack", check=False)
    assert r.returncode == 2 and "pack, slice or auto" in r.stderr
    dev = d.cli_json("devices")[0]
    assert dev["share_mode"] == "slice" and dev["mps"] == "off: not a GPU"


def test_a_gpu_device_says_why_mps_is_off(daemon_factory):
    d = daemon_factory("--devices", "gpu:1", "--device-memory-mib", "64")
    dev = d.cli_json("devices")[0]
    assert dev["mps"] == "off: no nvidia-cuda-mps-control on PATH", dev
