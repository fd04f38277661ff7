"""Crash windows of a migration (issue 31, item 5): a node or a scheduler that
stops at the wrong moment must never lose the job nor run it twice. Each test
lets the job finish exactly once, with the checksum of a run never moved."""

import json
import os
import signal
import time

import pytest

import test_migration as tm
from conftest import SYNTHETIC_JOB
from nodes import wait_for

cluster = tm.cluster  # the same two-node fixture

# b's copy drops itself this long after its source's latest step (gandivad's
# default is 10 minutes): short, so that the test sees it happen.
WARM_COPY_TIMEOUT_MS = 2000
# Both copies of the job sleep this long before they start: the window in which
# b's copy is warming up and the test acts. Longer than a poll of `gandiva ps`
# on a loaded machine.
SLOW_START_S = 4


def slow_start_job():
    """The synthetic job (C++, its state 1 MiB, 1 ms an iteration, 10 s in all) started
    SLOW_START_S late, so that a test can act while b's copy warms up."""
    if not os.path.exists(SYNTHETIC_JOB):
        pytest.skip("synthetic_state_job not built")

    def cmd(result):
        return ["/bin/sh", "-c",
                f"sleep {SLOW_START_S}; exec {SYNTHETIC_JOB} --mib 1 --seed 7 --iterations 10000 "
                f"--layout functions --result {result}"]
    return cmd


def start_migration(cluster, tmp_path, extra=None):
    """Runs the job on a and asks to move it to b; returns once b's copy is
    registered and warming up (sleeping), with a's migration waiting for it."""
    cmd = slow_start_job()
    ref = tm.reference(cmd, tmp_path, "slow-start")
    nodes = cluster(extra=extra)
    a, b = nodes["a"], nodes["b"]
    out = tmp_path / "synthetic.json"
    run = a.run(*cmd(out), name="synthetic")
    wait_for(lambda: a.first_iterations() > 100, timeout=60, what="training on a")
    a.cli("migrate", "1", "--to", "b", "--no-wait")
    copy = wait_for(lambda: next(iter(b.jobs()), None), what="b's copy")
    assert (a.job(1)["operation"] or {}).get("step") in ("preparing", "warming"), a.job(1)
    return a, b, run, out, ref, copy["id"]


@pytest.mark.native_job
def test_a_warm_copy_whose_source_went_silent_is_dropped(cluster, tmp_path):
    """a stops (SIGSTOP) while b's copy warms up: b drops the copy once a has
    been silent for --warm-copy-timeout-ms, freeing its device, and the job,
    which never stopped training on a, finishes there once a continues."""
    a, b, run, out, ref, copy = start_migration(
        cluster, tmp_path, extra={"b": ["--warm-copy-timeout-ms", str(WARM_COPY_TIMEOUT_MS)]})
    a.proc.send_signal(signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        wait_for(lambda: b.job(copy).get("state") in ("exited", "failed"), timeout=30,
                 what="b to drop the copy of a silent source")
        # Dropped by the timeout, not by anything that a (stopped) could have done.
        assert time.monotonic() - stopped < 20
        assert "sent no step of the migration" in b.read_log()
        assert not [j for j in b.jobs() if j["state"] not in ("exited", "failed")], b.jobs()
    finally:
        a.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: a.job(1)["operation"]["state"] != "running", timeout=30, what="a's migration to give up")
    tm.assert_job_continues_on_source(a, run, out, ref, same=tm.same_checksum)


@pytest.mark.native_job
def test_a_copy_whose_state_has_not_arrived_is_not_resumed(cluster, tmp_path):
    """A scheduler restarted mid-migration may `resume` every held job it
    finds: b refuses it for a copy whose state has not arrived (released, it
    would train from scratch beside the job on a). The migration then goes on
    and the job finishes once, on b."""
    a, b, run, out, ref, copy = start_migration(cluster, tmp_path)
    r = b.cli("resume", str(copy), check=False)
    assert r.returncode != 0, r.stdout
    assert "state has not loaded" in r.stderr, r.stderr
    wait_for(lambda: a.job(1)["operation"]["state"] != "running", timeout=60, what="the migration")
    op = a.job(1)["operation"]
    assert op["state"] == "done", op
    assert run.wait(timeout=60) == 0
    wait_for(lambda: b.job(copy).get("state") in ("exited", "failed"), timeout=60, what="the job to finish on b")
    assert b.job(copy)["state"] == "exited", b.read_log()
    tm.same_checksum(ref, json.loads(out.read_text()))
