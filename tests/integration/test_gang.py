"""Gangs: a real 2-rank DDP job over gloo (torchrun, tests/integration/jobs/ddp_job.py)
under gandivad as one job. Suspend/resume, time-slicing with another job,
checkpoint + restore and migration must each leave every rank's loss history
bitwise equal to an undisturbed run; a rank that dies, or never registers,
fails the gang with a clear reason and leaves no rank behind."""

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import BUILD, GANDIVA, HERE, INTERVAL_JOB, PYTHON, wait_for
from nodes import Node

DDP_JOB = os.path.join(HERE, "jobs", "ddp_job.py")
TORCHRUN = os.path.join(HERE, "jobs", "torchrun.py")
ITERATIONS = 120
WORK_MS = 4  # long enough iterations that a suspend lands mid-run


def ddp_cmd(out, iterations=ITERATIONS, ranks=2, work_ms=WORK_MS):
    # A rendezvous on a port of its own (--standalone's is fixed at 29400): a
    # migration's warm copy starts while the job still runs on its source.
    return [PYTHON, TORCHRUN, "--rdzv_backend=c10d", "--rdzv_endpoint=localhost:0", "--nnodes=1",
            f"--nproc_per_node={ranks}", DDP_JOB,
            "--iterations", str(iterations), "--work-ms", str(work_ms), "--out", str(out)]


def read(out, rank):
    try:
        with open(f"{out}.rank{rank}") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def progress(out):
    r = read(out, 0)
    return r["iteration"] if r else 0


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The same 2-rank job run once by torchrun alone, no gandiva."""
    out = tmp_path_factory.mktemp("reference") / "ddp"
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1")
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    subprocess.run(ddp_cmd(out), check=True, env=env, capture_output=True, timeout=120)
    return [read(out, k) for k in range(2)]


def assert_same_training(out, reference):
    for k in range(2):
        got = read(out, k)
        assert got and got["done"], f"rank {k} did not finish"
        assert got["losses"] == reference[k]["losses"], f"rank {k}'s loss history differs"


def run_gang(daemon, out, *flags, iterations=ITERATIONS, work_ms=WORK_MS):
    """`gandiva run --ranks 2` of the DDP job (work_ms only stretches its
    iterations: the losses do not depend on it)."""
    return subprocess.Popen([GANDIVA, "run", "--ranks", "2", "--name", "ddp", *flags, "--",
                             *ddp_cmd(out, iterations, work_ms=work_ms)], env=daemon.env,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def job(daemon, name="ddp"):
    return daemon.jobs().get(name, {})


def test_suspend_parks_every_rank_at_one_iteration_and_resume_releases_them(
        daemon_factory, tmp_path, reference):
    d = daemon_factory("--devices", "cpu:1")
    out = tmp_path / "ddp"
    run = run_gang(d, out)
    for cycle in range(3):
        d.wait_for(lambda: progress(out) >= 20 + 25 * cycle, what="the gang training")
        d.cli("suspend", str(job(d)["id"]))
        d.wait_for(lambda: job(d)["state"] == "suspended", what="the gang parked")
        parked = job(d)["iterations"]
        time.sleep(0.3)
        assert job(d)["iterations"] == parked, "a rank trained while the gang was suspended"
        d.cli("resume", str(job(d)["id"]))
    assert run.wait(timeout=90) == 0, run.stderr.read()
    rec = job(d)
    assert rec["state"] == "exited" and rec["ranks"] == 2 and rec["gang_error"] == ""
    assert rec["parks"] >= 3
    assert_same_training(out, reference)


def test_time_sliced_with_another_job(daemon_factory, tmp_path, reference):
    d = daemon_factory("--devices", "cpu:1", "--slice-ms", "50")
    out = tmp_path / "ddp"
    # The other job first, long enough to outlast the gang's start and its run.
    other = d.run(PYTHON, INTERVAL_JOB, "--iterations", "4000", "--work-ms", "4",
                  "--out", str(tmp_path / "other.json"), name="other")
    d.wait_for(lambda: d.jobs().get("other", {}).get("iterations", 0) > 10, what="the other job")
    gang = run_gang(d, out, work_ms=20)
    assert gang.wait(timeout=120) == 0, gang.stderr.read()
    jobs = d.jobs()
    assert jobs["ddp"]["state"] == "exited"
    assert other.poll() is None, "the other job ended first: they did not share the device"
    d.cli("kill", str(jobs["other"]["id"]))
    other.wait(timeout=30)
    switches = json.loads(d.cli("switches", "--json").stdout)
    handed = {(s["from"], s["to"]) for s in switches}
    ids = (jobs["ddp"]["id"], jobs["other"]["id"])
    assert (ids[0], ids[1]) in handed and (ids[1], ids[0]) in handed, "the two did not take turns"
    assert jobs["ddp"]["slices"] >= 2 and jobs["other"]["slices"] >= 2
    assert_same_training(out, reference)


def test_checkpoint_and_restore_every_rank(daemon_factory, tmp_path, reference):
    d = daemon_factory("--devices", "cpu:1")
    out, ckpt = tmp_path / "ddp", tmp_path / "ckpt"
    first = run_gang(d, out)
    d.wait_for(lambda: progress(out) >= 30, what="the gang training")
    d.cli("checkpoint", str(job(d)["id"]), "--to", str(ckpt))
    d.wait_for(lambda: (job(d)["operation"] or {}).get("state") == "done", what="the checkpoint")
    assert (ckpt / "gang").read_text() == "ranks 2\n"
    for k in range(2):
        assert (ckpt / f"rank-{k}" / "state.gdck").stat().st_size > 0
    assert first.wait(timeout=90) == 0, first.stderr.read()

    # A directory whose rank count does not match is refused before anything starts.
    wrong = d.cli("run", "--ranks", "3", "--restore", str(ckpt), "--", "true", check=False)
    assert wrong.returncode != 0 and "checkpoint of 2 rank(s)" in wrong.stderr
    single = d.cli("run", "--restore", str(ckpt), "--", "true", check=False)
    assert single.returncode != 0 and "--ranks 1" in single.stderr

    restored_out = tmp_path / "restored"
    second = subprocess.Popen([GANDIVA, "run", "--ranks", "2", "--name", "again", "--restore",
                               str(ckpt), "--", *ddp_cmd(restored_out)], env=d.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert second.wait(timeout=90) == 0, second.stderr.read()
    for k in range(2):
        r = read(restored_out, k)
        assert r["restored_at"] is not None and r["restored_at"] >= 30
        assert r["restored_at"] == read(restored_out, 0)["restored_at"], "ranks restored apart"
    assert_same_training(restored_out, reference)


def test_launched_gang_checkpoints_and_restores_under_gandivad(daemon_factory, tmp_path,
                                                                 reference):
    """`gandiva run --detach --ranks 2`: gandivad starts the launcher itself
    (launch), its ranks find their blocks through GANDIVA_RANKS, and a relaunch
    with --restore continues every rank from the gang's checkpoint."""
    d = daemon_factory("--devices", "cpu:1")
    out, ckpt = tmp_path / "ddp", tmp_path / "ckpt"
    first = d.cli("run", "--detach", "--ranks", "2", "--name", "ddp", "--",
                  *ddp_cmd(out)).stdout.strip()
    d.wait_for(lambda: progress(out) >= 30, what="the launched gang training")
    d.cli("checkpoint", first, "--to", str(ckpt))
    d.wait_for(lambda: (job(d)["operation"] or {}).get("state") == "done", what="the checkpoint")
    assert (ckpt / "gang").read_text() == "ranks 2\n"
    assert d.cli("wait", first, timeout=120).returncode == 0
    assert job(d)["ranks"] == 2 and job(d)["launched"]
    assert_same_training(out, reference)

    restored_out = tmp_path / "restored"
    again = d.cli("run", "--detach", "--ranks", "2", "--name", "again", "--restore", str(ckpt),
                  "--", *ddp_cmd(restored_out)).stdout.strip()
    waited = d.cli("wait", again, check=False, timeout=120)
    assert waited.returncode == 0, d.cli("logs", again, "--stderr").stdout
    for k in range(2):
        assert read(restored_out, k)["restored_at"] >= 30
    assert_same_training(restored_out, reference)


def test_a_rank_killed_fails_the_gang_with_its_reason(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1")
    out = tmp_path / "ddp"
    run = run_gang(d, out, iterations=100000)
    d.wait_for(lambda: progress(out) >= 10, what="the gang training")
    victim = read(out, 1)["pid"]
    survivor = read(out, 0)["pid"]
    killed_at = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    d.wait_for(lambda: job(d)["state"] == "failed", timeout=10, what="the gang failed")
    assert time.monotonic() - killed_at < 10
    rec = job(d)
    assert rec["gang_error"] == f"rank 1 (pid {victim}) was killed by signal 9", rec
    wait_for(lambda: not os.path.exists(f"/proc/{survivor}") or
             open(f"/proc/{survivor}/stat").read().split(")")[1].split()[0] == "Z",
             timeout=10, what="rank 0 killed")
    assert run.wait(timeout=30) != 0
    assert "rank 1" in run.stderr.read()


def test_a_rank_that_never_registers_fails_the_gang(daemon_factory, tmp_path):
    d = daemon_factory("--devices", "cpu:1", "--rank-timeout-ms", "2000")
    script = "import gandiva, time\nwhile True:\n    gandiva.step()\n    time.sleep(0.01)\n"
    run = subprocess.Popen([GANDIVA, "run", "--ranks", "2", "--name", "half", "--", "env",
                            "LOCAL_RANK=0", PYTHON, "-c", script], env=d.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert run.wait(timeout=30) != 0
    rec = d.jobs()["half"]
    assert rec["state"] == "failed"
    assert rec["gang_error"] == f"rank 1 of job {rec['id']} never registered within 2 s"
    assert "never registered" in run.stderr.read()
    d.cli("ps")  # the daemon is fine


def test_migration_restarts_every_rank_on_the_destination(tmp_path, reference):
    (tmp_path / "keys").mkdir()
    a, b = Node(tmp_path, "a"), Node(tmp_path, "b")
    try:
        for node, other in ((a, b), (b, a)):
            node.start([a.public, b.public], [(other.name, other.tcp, other.public)])
        out = tmp_path / "ddp"
        # Slow iterations: the copy on b warms up (torchrun, imports) while it trains on a,
        # and a migration asked at iteration 20 must find it still there. At 100 ms a CI
        # run saw the job end first (b's warm-up took over 10 s beside other suites).
        run = subprocess.Popen([GANDIVA, "run", "--ranks", "2", "--name", "ddp", "--",
                                *ddp_cmd(out, work_ms=200)], env=a.env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        wait_for(lambda: progress(out) >= 20, what="the gang training on a")
        op = json.loads(a.cli("migrate", "1", "--to", "b", "--json").stdout)
        assert op["state"] == "done", op
        assert run.wait(timeout=60) == 0
        assert "migrated to b" in run.stderr.read()
        wait_for(lambda: b.job(op["to_job"]).get("state") in ("exited", "failed"),
                 what="the gang to finish on b")
        moved = b.job(op["to_job"])
        assert moved["state"] == "exited" and moved["ranks"] == 2, b.read_log()
        for k in range(2):
            r = read(out, k)
            assert r["restored_at"] is not None and r["restored_at"] >= 20
        assert read(out, 0)["restored_at"] == read(out, 1)["restored_at"]
        assert_same_training(out, reference)
    finally:
        a.stop()
        b.stop()
