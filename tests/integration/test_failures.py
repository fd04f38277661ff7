"""Failure handling and pre-run validation in the live scheduler, with real
jobs that fail the ways jobs fail (issue 16 item 3; Philly, ATC'19): a syntax
error, an out-of-memory exit, a job killed from outside, a node that dies
under its job. The scheduler classifies each end from the node's report and
the job's own output: the job's own errors end it at once, never retried;
infrastructure failures and preemptions run again after a wait, at most
--max-retries times. With --validate N a new job runs its first N iterations
as a guest on a device before it queues, so a broken job fails within
seconds even when every device is taken for a long time."""

import json
import os
import signal
import subprocess
import time

import pytest

import nodes
from sched_cluster import SchedCluster, reference_digest
from conftest import GANDIVA, PYTHON

TRAIN = """
import sys, time, torch, gandiva, gandiva.torch
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gandiva.torch.register(model, opt)
gandiva.torch.attach(opt)
for step in range(int(sys.argv[1])):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    time.sleep(0.02)
"""

# A few good steps (argv[1]), then a batch far larger than the machine's
# memory: the allocator refuses it and PyTorch raises (what a too-large batch
# size does).
OOM = TRAIN + """
torch.ones(1 << 42)
"""

SYNTAX_ERROR = """
import torch
for step in range(10)
    print(step)
"""


def stop(c):
    """Jobs outlive their nodes' gandivad by design: a test that failed half-way
    cancels its own first, so that no long job trains on after it."""
    if c.proc and c.proc.poll() is None:
        for j in c.queue()["jobs"]:
            if j["state"] not in ("finished", "failed", "cancelled"):
                c.cli("cancel", str(j["id"]), check=False)
    c.stop()


@pytest.fixture
def cluster(tmp_path):
    c = SchedCluster(tmp_path, names=("a",))
    yield c
    stop(c)


@pytest.fixture
def cluster2(tmp_path):
    c = SchedCluster(tmp_path, names=("a", "b"))
    yield c
    stop(c)


def script(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def submit_oom_job(cluster, path, steps):
    """Submits the out-of-memory job. Under the sanitizer suite (make test-asan
    preloads libasan into every process, jobs too) its 16 TiB allocation would
    abort in ASan instead of failing in PyTorch's allocator: this one job gets
    ASan's malloc to return NULL, as the C library's does, and ASan's warning
    goes to its own stderr. The scheduler and nodes keep their settings."""
    env = dict(cluster.env)
    if "libasan" in env.get("LD_PRELOAD", ""):
        env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":allocator_may_return_null=1:log_path=stderr"
    r = subprocess.run([GANDIVA, "submit", "--", PYTHON, path, str(steps)], env=env,
                       capture_output=True, text=True, timeout=60, check=True)
    return int(r.stdout.strip())


def long_job(cluster, tmp_path):
    """A job that holds the only device for minutes: anything queued behind it waits."""
    job = cluster.submit(PYTHON, script(tmp_path, "long.py", TRAIN), "100000")
    nodes.wait_for(lambda: cluster.job(job)["state"] == "running", 60, "the long job to run")
    return job


def test_a_broken_job_fails_in_validation_while_the_device_is_busy(cluster, tmp_path):
    cluster.start("--validate", "3")
    # Validation first, like every job; then it holds the device.
    busy = long_job(cluster, tmp_path)
    submitted = time.monotonic()
    bad = cluster.submit(PYTHON, script(tmp_path, "bad.py", SYNTAX_ERROR))
    oom = submit_oom_job(cluster, script(tmp_path, "oom.py", OOM), 2)
    jobs = cluster.wait_ended([bad, oom], timeout=120)
    took = time.monotonic() - submitted
    for job, cause in ((bad, "syntax error"), (oom, "CPU out of memory")):
        j = jobs[job]
        assert j["state"] == "failed" and j["failure"] == "user", j
        assert cause in j["detail"] and "validation" in j["detail"], j
        assert j["retries"] == 0 and j["attempt"] == 1, "a user error is never run again"
    # They failed while the long job still held the only device: without
    # validation they would have waited for it to finish.
    assert cluster.job(busy)["state"] == "running"
    print(f"\nbroken jobs failed {took:.1f} s after submission, the device busy throughout")
    cluster.cli("cancel", str(busy))
    cluster.kill(signal.SIGTERM)
    assert "validated 1 failed_validation 2" in cluster.read_log()


def test_without_validation_a_broken_job_waits_for_the_device(cluster, tmp_path):
    cluster.start()
    busy = long_job(cluster, tmp_path)
    bad = cluster.submit(PYTHON, script(tmp_path, "bad.py", SYNTAX_ERROR))
    # Watched for as long as validation took to fail it above: it just waits.
    time.sleep(3)
    assert cluster.job(bad)["state"] == "queued"
    cluster.cli("cancel", str(busy))
    j = cluster.wait_ended([bad], timeout=120)[bad]
    assert j["state"] == "failed" and j["failure"] == "user" and "syntax error" in j["detail"], j


@pytest.mark.parametrize("restartable", [False, True])
def test_a_validated_job_queues_and_runs_to_the_same_result(cluster, tmp_path, restartable):
    steps = 40
    reference = reference_digest(tmp_path, steps)
    cluster.start("--validate", "5")
    job = cluster.submit_job(steps, 20, tmp_path / "r.json",
                             flags=("--restartable",) if restartable else ())
    j = cluster.wait_ended([job], timeout=120)[job]
    assert j["state"] == "finished", j
    assert j["attempt"] == 2, "one validation run, then its run"
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["weights_sha256"] == reference, "validation changed nothing of the result"
    if restartable:
        # Checkpointed at the end of its validation: its run went on from there.
        assert r["resumed_at"] is not None and r["resumed_at"] >= 5, r
    else:
        assert r["resumed_at"] is None, "started over"
    assert "validated: " in cluster.read_log()


def test_a_job_killed_from_outside_is_retried_up_to_the_limit(cluster, tmp_path):
    cluster.start("--max-retries", "1", "--retry-backoff", "1")
    job = cluster.submit(PYTHON, script(tmp_path, "long.py", TRAIN), "100000")

    def kill_current_run():
        run = nodes.wait_for(lambda: (j := cluster.job(job))["state"] == "running" and j["node_job"]
                             and j, 60, "the job to run")
        node = cluster.node(run["node"])
        pid = nodes.wait_for(lambda: next((r["pid"] for r in node.jobs()
                                           if r["id"] == run["node_job"] and r["pid"]), None),
                             60, "its pid")
        os.kill(pid, signal.SIGTERM)
        return run["attempt"]

    assert kill_current_run() == 1
    retried = nodes.wait_for(lambda: (j := cluster.job(job))["retries"] == 1 and j, 60, "a retry")
    assert retried["failure"] == "preempted" and "signal 15" in retried["detail"], retried
    assert kill_current_run() == 2, "it ran again"
    j = cluster.wait_ended([job], timeout=60)[job]
    assert j["state"] == "failed" and "gave up after 1 retries" in j["detail"], j


def test_a_job_whose_node_dies_runs_again_elsewhere(cluster2, tmp_path):
    cluster = cluster2
    cluster.start("--node-dead-after", "2", "--retry-backoff", "1")
    job = cluster.submit_job(100, 20, tmp_path / "r.json")
    first = nodes.wait_for(lambda: (j := cluster.job(job))["state"] == "running" and j["node_job"]
                           and j, 60, "the job to run")
    doomed = cluster.node(first["node"])
    pid = nodes.wait_for(lambda: next((r["pid"] for r in doomed.jobs()
                                       if r["id"] == first["node_job"] and r["pid"]), None),
                         60, "its pid")
    doomed.stop(signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)  # the machine went down with its job
    j = cluster.wait_ended([job], timeout=120)[job]
    assert j["state"] == "finished", j
    assert j["failure"] == "infrastructure" and j["retries"] == 1, j
    assert j["node"] != first["node"] and j["attempt"] == 2, j


def test_a_job_that_ends_while_its_gandivad_restarts_is_not_run_again(cluster, tmp_path):
    """Its exit status is lost with the old gandivad (the new one is not its
    parent). It detached cleanly and its output shows no error: finished, not
    retried; a run that may still be alive is never started a second time."""
    cluster.start("--node-dead-after", "120")
    job = cluster.submit(PYTHON, script(tmp_path, "short.py", TRAIN), "150")
    run = nodes.wait_for(lambda: (j := cluster.job(job))["state"] == "running" and j["node_job"]
                         and j, 60, "the job to run")
    node = cluster.node("a")
    pid = nodes.wait_for(lambda: next((r["pid"] for r in node.jobs()
                                       if r["id"] == run["node_job"] and r["pid"]), None),
                         60, "its pid")
    node.stop(signal.SIGKILL)

    def gone():
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True

    nodes.wait_for(gone, 120, "the job to end while its gandivad is down")
    node.start([node.public, cluster.public], [])  # the same state directory
    j = cluster.wait_ended([job], timeout=60)[job]
    assert j["state"] == "finished", j
    assert "exit status was lost" in j["detail"], j
    assert j["attempt"] == 1 and j["retries"] == 0, j
