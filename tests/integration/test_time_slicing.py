"""Integration tests: a real gandivad time-slicing real PyTorch and libtorch
training processes on one device."""

import bisect
import os
import signal
import socket
import statistics
import time

import pytest

from conftest import CNN_EXAMPLE, INTERVAL_JOB, MLP_EXAMPLE, PYTHON, read_result


def overlaps(a, b):
    """Pairs of iterations of job a and job b that ran at the same time."""
    i = j = 0
    bad = []
    while i < len(a) and j < len(b):
        (s1, e1), (s2, e2) = a[i], b[j]
        if s1 < e2 and s2 < e1:
            bad.append((a[i], b[j]))
        if e1 < e2:
            i += 1
        else:
            j += 1
    return bad


def test_two_jobs_alternate_at_boundaries_and_never_overlap(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "50")
    out_a, out_b = tmp_path / "a.json", tmp_path / "b.json"
    a = d.run(PYTHON, INTERVAL_JOB, "--iterations", "150", "--out", str(out_a), name="a")
    b = d.run(PYTHON, INTERVAL_JOB, "--iterations", "150", "--out", str(out_b), name="b")
    assert a.wait(timeout=120) == 0, a.stderr.read()
    assert b.wait(timeout=120) == 0, b.stderr.read()
    ra, rb = read_result(out_a), read_result(out_b)
    assert ra["managed"] and rb["managed"]
    # Only one job runs an iteration at any moment: each was parked between iterations.
    assert overlaps(ra["intervals"], rb["intervals"]) == []
    jobs = d.jobs()
    assert jobs["a"]["state"] == "exited" and jobs["b"]["state"] == "exited"
    assert jobs["a"]["slices"] >= 5 and jobs["b"]["slices"] >= 5
    switches = d.cli_json("switches", "--limit", "1000")
    assert len(switches) >= 8
    ids = {jobs["a"]["id"], jobs["b"]["id"]}
    own = unparked_iteration_ms(ra["intervals"], rb["intervals"])
    assert len(own) > 100
    # A hand-over is a wake-up and a few syscalls: typically a few ms, and as
    # long as the machine makes the jobs wait for a core when it is busy (270 ms
    # once, with three suites on two cores). So: the typical one is short, and
    # none is longer than the longest stall the jobs' own iterations showed,
    # which a lost wake-up (a hand-over left to a timeout) would be.
    handovers = [s["handover_ms"] for s in switches]
    for s in switches:
        assert {s["from"], s["to"]} == ids
        assert s["handover_ms"] >= 0
    assert statistics.median(handovers) < 50, handovers
    assert max(handovers) < max(50, max(own) + 50), (sorted(handovers)[-3:], max(own))
    # Parked time is not iteration time: gandivad's p99 stays within the job's own
    # iteration times (boundary to boundary, i.e. end to end, leaving out each gap in
    # which b ran), not a slice of b's longer. The bound comes from what the job
    # measured: a busy machine stretches its iterations (p99 82 ms beside a second
    # suite) past any fixed figure.
    assert jobs["a"]["p99_ms"] < max(own) + 10, (jobs["a"]["p99_ms"], sorted(own)[-5:])


def unparked_iteration_ms(mine, other):
    """End-to-end times of a job's iterations (ms) in which no iteration of the
    other job ran: iteration time as the job itself saw it, with no park in it."""
    other_starts = sorted(s for s, _ in other)
    out = []
    for (_, e0), (_, e1) in zip(mine, mine[1:]):
        i = bisect.bisect_left(other_starts, e0)
        if i == len(other_starts) or other_starts[i] >= e1:
            out.append((e1 - e0) / 1e6)
    return out


def test_slice_length_is_honoured(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "100")
    procs = [d.run(PYTHON, INTERVAL_JOB, "--iterations", "250", "--work-ms", "3",
                   "--out", str(tmp_path / f"{n}.json"), name=n) for n in ("a", "b")]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    switches = d.cli_json("switches", "--limit", "1000")
    starts = [s["at_s"] for s in switches]
    # A slice runs from one hand-over to the next: 100 ms plus at most about
    # one iteration (the slice ends at the next boundary) and the hand-over.
    # Both are ~3 ms on a quiet machine (the 125 ms bound) and stretch when
    # the jobs wait for a core: then the bound is what the jobs measured (their
    # 90th-percentile iteration) and the typical hand-over.
    slices_ms = [(t1 - t0) * 1000 for t0, t1 in zip(starts, starts[1:])]
    assert len(slices_ms) >= 8
    ra, rb = (read_result(tmp_path / f"{n}.json") for n in ("a", "b"))
    own = (unparked_iteration_ms(ra["intervals"], rb["intervals"]) +
           unparked_iteration_ms(rb["intervals"], ra["intervals"]))
    iteration_p90 = statistics.quantiles(own, n=10)[-1]
    handover = statistics.median(s["handover_ms"] for s in switches)
    upper = max(125, 100 + iteration_p90 + handover + 10)
    med = statistics.median(slices_ms)
    assert 98 <= med <= upper, (slices_ms, iteration_p90, handover)
    # gandivad asks for the park only once 100 ms are up, but a hand-over's time is
    # the job's boundary timestamp, read before the job looks at the request: a job
    # descheduled in between (a busy machine) parks with the earlier time, and that
    # slice looks shorter by the delay (85 ms beside a second suite; the next one
    # as much longer). So nearly every slice, not all, is at least 95 ms, and none
    # is cut to half.
    short = [s for s in slices_ms if s < 95]
    assert len(short) <= max(1, len(slices_ms) // 10) and min(slices_ms) >= 50, slices_ms


def test_suspended_job_makes_no_progress_and_resumes(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1")
    out = tmp_path / "a.json"
    p = d.run(PYTHON, INTERVAL_JOB, "--iterations", "100000", "--work-ms", "2", "--out", str(out), name="a")
    d.wait_for(lambda: d.jobs().get("a", {}).get("iterations", 0) > 20, what="job a to train")
    job = d.jobs()["a"]["id"]
    d.cli("suspend", str(job))
    d.wait_for(lambda: d.jobs()["a"]["state"] == "suspended", what="job a to park")
    n = d.jobs()["a"]["iterations"]
    time.sleep(0.5)
    assert d.jobs()["a"]["iterations"] == n, "a suspended job made progress"
    assert d.jobs()["a"]["held"] is True
    d.cli("resume", str(job))
    d.wait_for(lambda: d.jobs()["a"]["iterations"] > n + 20, what="job a to resume")
    d.cli("kill", str(job))
    assert p.wait(timeout=30) != 0
    d.wait_for(lambda: d.jobs()["a"]["state"] in ("exited", "failed"), what="job a to end")


def test_libtorch_job_is_time_sliced_with_a_python_job(daemon_factory, tmp_path):
    if not os.path.exists(MLP_EXAMPLE):
        pytest.skip("libtorch example not built")
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "50")
    mlp = d.run(MLP_EXAMPLE, "--iterations", "600", "--result", str(tmp_path / "mlp.json"), name="mlp")
    cnn = d.run(PYTHON, CNN_EXAMPLE, "--iterations", "150", "--result", str(tmp_path / "cnn.json"), name="cnn")
    assert mlp.wait(timeout=120) == 0, mlp.stderr.read()
    assert cnn.wait(timeout=120) == 0, cnn.stderr.read()
    jobs = d.jobs()
    for name in ("mlp", "cnn"):
        assert jobs[name]["state"] == "exited"
        assert jobs[name]["parks"] >= 3, jobs[name]
        assert jobs[name]["device_time_s"] > 0
    assert jobs["mlp"]["iterations"] == 600
    assert jobs["cnn"]["iterations"] == 150


def test_jobs_resume_by_themselves_when_the_daemon_is_killed(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "250", "--lease-ms", "800")
    outs = [tmp_path / f"{n}.json" for n in ("a", "b")]
    procs = [d.run(PYTHON, INTERVAL_JOB, "--iterations", "300", "--work-ms", "2", "--out", str(o), name=n)
             for o, n in zip(outs, ("a", "b"))]
    d.wait_for(lambda: {j["state"] for j in d.jobs().values()} == {"running", "suspended"},
               what="one job running, one parked")
    d.stop(signal.SIGKILL)  # no goodbye: only the lease can free the parked job
    t0 = time.monotonic()
    for p in procs:
        assert p.wait(timeout=60) == 0, p.stderr.read()
    results = [read_result(o) for o in outs]
    assert all(r["done"] for r in results)
    assert any("lease expired" in p.stderr.read() for p in procs)
    assert time.monotonic() - t0 < 30


def test_sigterm_resumes_parked_jobs_before_the_daemon_exits(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "250", "--lease-ms", "60000")
    outs = [tmp_path / f"{n}.json" for n in ("a", "b")]
    procs = [d.run(PYTHON, INTERVAL_JOB, "--iterations", "200", "--work-ms", "2", "--out", str(o), name=n)
             for o, n in zip(outs, ("a", "b"))]
    d.wait_for(lambda: "suspended" in {j["state"] for j in d.jobs().values()}, what="a parked job")
    d.stop(signal.SIGTERM)
    # With a 60 s lease, only the daemon's release on SIGTERM can free them this fast.
    t0 = time.monotonic()
    for p in procs:
        assert p.wait(timeout=20) == 0, p.stderr.read()
    assert time.monotonic() - t0 < 15
    assert "released" in d.read_log()


def test_a_crashed_job_is_detected_and_the_device_moves_on(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "50")
    a = d.run(PYTHON, INTERVAL_JOB, "--iterations", "100000", "--out", str(tmp_path / "a.json"), name="a")
    b = d.run(PYTHON, INTERVAL_JOB, "--iterations", "300", "--work-ms", "2", "--out", str(tmp_path / "b.json"), name="b")
    d.wait_for(lambda: d.jobs().get("a", {}).get("pid", 0) > 0 and d.jobs()["a"]["iterations"] > 5,
               what="job a to train")
    os.kill(d.jobs()["a"]["pid"], signal.SIGKILL)
    assert a.wait(timeout=30) == 128 + signal.SIGKILL
    d.wait_for(lambda: d.jobs()["a"]["state"] == "failed", what="job a marked failed")
    assert b.wait(timeout=60) == 0
    assert d.jobs()["b"]["state"] == "exited"


def test_garbage_on_the_api_socket_gets_an_error_and_the_daemon_lives(daemon_factory, tmp_path):
    import gandiva
    d = daemon_factory("--devices", "cpu:1")
    client = gandiva.Client(d.endpoint)
    for junk in [b"", b"\xff\xfe garbage", b"{", b'{"v":1,"type":"nope"}', b'{"v":1,"type":"suspend"}',
                 b'{"v":1,"type":"suspend","job":"x"}', b"[]" * 10000]:
        reply = client.raw_call(junk)
        assert '"ok":false' in reply.replace(" ", ""), reply
    # Not even ZeroMQ: raw bytes straight into the Unix socket.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(d.endpoint[len("ipc://"):])
    s.sendall(os.urandom(4096))
    s.close()
    with pytest.raises(gandiva.GandivaError) as e:
        client.suspend(12345)
    assert e.value.code == "not_found"
    assert client.hello()["version"] == 1
    assert d.proc.poll() is None


def test_cli_errors_are_clear(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1")
    r = d.cli("suspend", "99", check=False)
    assert r.returncode == 1 and "no job 99" in r.stderr
    r = d.cli("ps", "--bogus", check=False)
    assert r.returncode == 2 and "unknown flag --bogus" in r.stderr
    r = d.cli("slice", "--device", "cpu0", "--ms", "10", check=False)
    assert r.returncode == 1 and "50..250" in r.stderr
    r = d.cli("slice", "--device", "gpu7", "--ms", "100", check=False)
    assert r.returncode == 1 and "no device 'gpu7'" in r.stderr
    d.cli("slice", "--device", "cpu0", "--ms", "200")
    assert d.cli_json("devices")[0]["slice_ms"] == 200
    r = d.cli("run", "--device", "gpu9", "--", "true", check=False)
    assert r.returncode == 1 and "no device 'gpu9'" in r.stderr
    # The job's own exit code comes back.
    r = d.cli("run", "--", "sh", "-c", "exit 3", check=False)
    assert r.returncode == 3
    d.stop()
    r = d.cli("ps", check=False)
    assert r.returncode == 1 and "no gandivad running" in r.stderr


def test_a_second_daemon_on_the_same_socket_is_refused(daemon_factory, tmp_path):
    import subprocess
    from conftest import GANDIVAD
    d = daemon_factory("--devices", "cpu:1")
    r = subprocess.run([GANDIVAD, "--endpoint", d.endpoint, "--devices", "cpu:1"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 1 and "already running" in r.stderr
    assert d.cli_json("devices")


def test_thousands_of_mangled_requests_never_kill_the_daemon(daemon_factory, tmp_path):
    """Every message type with fields of every wrong type, missing, extra, or
    truncated: each gets an error reply (or a sane one), the daemon lives on."""
    import json
    import random

    import gandiva
    d = daemon_factory("--devices", "cpu:1")
    client = gandiva.Client(d.endpoint)
    rng = random.Random(7)
    types = ["hello", "list_devices", "list_jobs", "register_job", "job_started", "job_exited", "suspend",
             "resume", "kill", "set_slice", "set_weight", "set_share_mode", "assign_device", "list_switches", "checkpoint",
             "migrate", "migrate_prepare", "migrate_begin", "migrate_commit",
             "migrate_start", "migrate_abort"]
    fields = ["job", "device", "ms", "weight", "command", "name", "pid", "exit_code", "signal", "dir", "to",
              "limit", "env", "cwd", "bulk_key", "source_node", "source_job", "mode", "capacity", "window_ms"]
    values = [None, True, -1, 0, 1, 2**63, -2**63, 1.5, 1e308, "", "x" * 5000,
              "../../etc", [], ["a"], [1, 2], {}, {"a": 1}, {"PATH": "/bin"}]
    replies = 0
    for i in range(1500):
        msg = {"v": 1, "type": rng.choice(types)}
        for _ in range(rng.randint(0, 4)):
            msg[rng.choice(fields)] = rng.choice(values)
        data = json.dumps(msg).encode()
        if i % 7 == 0:
            data = data[: rng.randint(0, len(data))]
        reply = client.raw_call(data)
        assert reply.startswith("{"), reply
        replies += 1
    assert replies == 1500
    assert client.hello()["version"] == 1
    assert d.proc.poll() is None, d.read_log()
    # Whatever the mangled requests registered, the daemon still schedules real work.
    r = d.cli("run", "--", "sh", "-c", "exit 0", check=False)
    assert r.returncode == 0
