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
# b's lease when b restarts while its copy is loaded: longer than the restart.
# (A loaded copy whose gandivad is away longer than its lease runs on
# unmanaged, as every job does: it is the job by then. The test wants it held.)
RESTART_LEASE_MS = 15000


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


def restart(node, sig=signal.SIGTERM):
    """Stops the node's gandivad (if it still runs) and starts it again on the
    same state directory, keys and peers; returns what the stopped one logged."""
    node.stop(sig)
    before = node.read_log()
    authorized = [k for k in (node.dir / "authorized").read_text().splitlines() if k]
    peers = [tuple(line.split()) for line in (node.dir / "peers").read_text().splitlines() if line]
    node.start(authorized, peers)
    return before


def wait_for_switching(a):
    """Until b has loaded the state and a has recorded the move (the job shows
    as migrated) and goes on to end its job and send migrate_start, which
    --fault drop-start loses for 5 s from the first."""
    wait_for(lambda: a.job(1)["state"] == "migrated", timeout=60, what="a to commit the migration")
    op = a.job(1)["operation"]
    assert op["state"] == "running" and op["step"] == "switching", op


def assert_finishes_once_on_b(a, b, copy, pid, out, ref):
    """a's migration is done; the job, the same process b took back, finishes on
    b from where it left a, and no other copy of it ran on either node."""
    wait_for(lambda: a.job(1)["operation"]["state"] != "running", timeout=60,
             what="a's migrate_start to be answered")
    op = a.job(1)["operation"]
    assert op["state"] == "done", op
    assert op["start_tries"] > 1, op  # the lost ones were sent again
    assert op["to_job"] == copy, op
    assert a.job(1)["state"] == "migrated", a.job(1)
    wait_for(lambda: b.job(copy).get("state") in ("exited", "failed"), timeout=60,
             what="the job to finish on b")
    job = b.job(copy)
    assert job["state"] == "exited", b.read_log()
    assert job["pid"] == pid, job
    assert 0 < job["iterations"] < 10000, job  # continued from a's state, not from scratch
    assert [j["id"] for j in b.jobs()] == [copy], b.jobs()
    assert [j["id"] for j in a.jobs()] == [1], a.jobs()
    tm.same_checksum(ref, json.loads(out.read_text()))


@pytest.mark.native_job
def test_a_destination_restarted_between_commit_and_start_keeps_the_job(cluster, tmp_path):
    """The state has loaded on b and a ends its job, but a's migrate_start is
    lost (--fault drop-start). b's gandivad restarts in that window: it takes
    the loaded copy back held (it is the job now, not an orphan to let go), and
    a's migrate_start, sent again each second, releases it. The job finishes
    once, on b, with the checksum of a run never moved."""
    a, b, run, out, ref, copy = start_migration(
        cluster, tmp_path,
        extra={"a": ["--fault", "drop-start"], "b": ["--lease-ms", str(RESTART_LEASE_MS)]})
    wait_for_switching(a)
    # a is held still while b restarts, so that none of its starts lands
    # before: the window stays open however slowly the machine runs.
    a.proc.send_signal(signal.SIGSTOP)
    try:
        held = b.job(copy)
        assert held["state"] == "suspended", held  # loaded, and not started
        before = restart(b)
    finally:
        a.proc.send_signal(signal.SIGCONT)
    assert "has loaded; held until its source sends migrate_start" in before, before
    # The same process, taken back held (the socket is up before the jobs are).
    wait_for(lambda: f"job {copy} (synthetic) re-adopted: pid {held['pid']} on cpu0, its state "
             "loaded from a/1: held until its source sends migrate_start" in b.read_log(),
             timeout=30, what="b to take its loaded copy back")
    assert_finishes_once_on_b(a, b, copy, held["pid"], out, ref)
    assert run.wait(timeout=60) == 0


@pytest.mark.native_job
def test_a_source_restarted_after_the_commit_still_starts_the_job(cluster, tmp_path):
    """a's migrate_start is lost (--fault drop-start) and a's gandivad is killed
    after the state loaded on b and a ended its job: the restarted a finds the
    job committed to b in its job table and sends migrate_start again; b's copy,
    held meanwhile, trains on. The job finishes once, on b."""
    a, b, run, out, ref, copy = start_migration(cluster, tmp_path,
                                                extra={"a": ["--fault", "drop-start"]})
    wait_for_switching(a)
    a.stop(signal.SIGKILL)
    held = b.job(copy)
    assert held["state"] == "suspended", held
    restart(a)
    assert_finishes_once_on_b(a, b, copy, held["pid"], out, ref)
    assert "had moved to b/%d before this gandivad stopped; sending migrate_start" % copy \
        in a.read_log(), a.read_log()
    # `gandiva run` lost its gandivad with the job; its exit code says nothing here.
    if run.poll() is None:
        run.kill()
    run.wait(timeout=10)
