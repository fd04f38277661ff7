"""gandiva under a real Slurm 22.05 on this machine (slurm_cluster.SlurmCluster:
munged, slurmctld, and per node a slurmd and a gandivad in the node's own
network and UTS namespaces), with the SPANK plugin gandiva_spank.so loaded:

- without --gandiva nothing changes;
- two `sbatch --gandiva` jobs on one node's device are time-sliced by its
  gandivad (their iterations never overlap, each gets its weight's share);
- a job of the high partition preempts a `--gandiva-checkpoint` job of the low
  one: it saves at its next boundary on SIGTERM, is requeued, restarts on the
  other node from that checkpoint and ends with the loss history of an
  undisturbed run, bit for bit;
- a job of another user (nobody) is managed by the root gandivad;
- bad input: --gandiva on a node without gandivad (runs unmanaged, one line
  says so), an invalid weight, an unusable checkpoint directory.

Skipped only where Slurm cannot run (not root, no ip netns, no Slurm)."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import BUILD, INTERVAL_JOB, PYTHON, wait_for
from sched_cluster import SCHED_JOB
from slurm_cluster import SlurmCluster
from test_time_slicing import overlaps

REASON = SlurmCluster.unavailable()
PLUGIN = os.path.join(BUILD, "slurm", "gandiva_spank.so")
if REASON is None and not os.path.exists(PLUGIN):
    REASON = f"the plugin is not built ({PLUGIN}: needs libslurm-dev)"
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Slurm cannot start here: {REASON}")


def plugstack(cluster_dir):
    """The one plugstack.conf line an operator adds (here: each node's own gandivad)."""
    return f"required {PLUGIN} endpoint=ipc://{cluster_dir}/%n/gandivad.sock"


def job_script(*cmd):
    """A batch script running a Python job with the gandiva package (Slurm jobs
    get no PYTHONPATH of ours) as the step's one task."""
    return ("#!/bin/sh\n"
            f"export PYTHONPATH={BUILD}/python OMP_NUM_THREADS=1\n"
            f"exec {PYTHON} " + " ".join(str(c) for c in cmd) + "\n")


def gandiva_lines(output):
    return [line for line in output.splitlines() if line.startswith("gandiva:")]


@pytest.fixture
def cluster(tmp_path):
    c = SlurmCluster(tmp_path, plugstack_lines=[plugstack(tmp_path)], cpus=2, grace_time=0)
    yield c
    c.stop()


def test_without_gandiva_nothing_changes(cluster):
    jobs = {name: cluster.sbatch("-w", name, wrap="hostname; hostname -I; env") for name in cluster.names}
    for name, job_id in jobs.items():
        job = cluster.wait_state(job_id, "COMPLETED", timeout=30)
        assert (job["NodeList"], job["ExitCode"], job["Partition"]) == (name, "0:0", "low"), job
        output = cluster.output(job_id)
        lines = output.splitlines()
        assert lines[0] == name, lines[:3]
        assert lines[1].split() == [cluster.nodes[name][1]], f"{name}'s address only: {lines[1]}"
        env = dict(line.split("=", 1) for line in lines[2:] if "=" in line)
        assert env.get("SLURMD_NODENAME") == name and env.get("SLURM_JOB_ID") == str(job_id)
        assert not [k for k in env if k.startswith("GANDIVA_")], "no --gandiva: no GANDIVA_ variable"
        assert gandiva_lines(output) == [], output
        assert cluster.node_jobs(name) == [], "no --gandiva: gandivad is asked for nothing"

    # stop() ends every daemon and deletes the namespaces and the bridge.
    daemons = [proc for _, proc, _ in cluster.procs]
    spaces = [ns for ns, _ in cluster.nodes.values()]
    bridge = cluster.lan.bridge
    cluster.stop()
    assert all(proc.poll() is not None for proc in daemons)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in spaces if ns in listed]
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0


def share_while_both_ran(a, b):
    """Time job a spent in iterations over job b's, while both were running."""
    start, end = max(a[0][0], b[0][0]), min(a[-1][1], b[-1][1])
    busy = lambda iv: sum(min(e, end) - max(s, start) for s, e in iv if s < end and e > start)
    return busy(a) / max(busy(b), 1)


def test_two_gandiva_jobs_on_one_device_are_time_sliced_by_weight(cluster, tmp_path):
    out = {w: tmp_path / f"w{w}.json" for w in (1, 2)}
    ids = {w: cluster.sbatch("-w", "n1", "-c", "1", f"--gandiva={w}" if w != 1 else "--gandiva",
                             script=job_script(INTERVAL_JOB, "--iterations", 200, "--work-ms", 6,
                                               "--out", out[w]))
           for w in (1, 2)}
    for w, job_id in ids.items():
        cluster.wait_state(job_id, "COMPLETED", timeout=120)
    results = {w: json.loads(out[w].read_text()) for w in (1, 2)}
    assert all(r["managed"] and r["done"] for r in results.values()), "both ran under gandivad"
    # One device, one job at a time: each parked between iterations.
    assert overlaps(results[1]["intervals"], results[2]["intervals"]) == []
    jobs = {j["name"]: j for j in cluster.node_jobs("n1")}
    for w, job_id in ids.items():
        j = jobs[f"slurm-{job_id}.batch"]
        assert (j["weight"], j["device"], j["state"], j["iterations"]) == (w, "cpu0", "exited", 200), j
        assert j["slices"] >= 3, j
        assert gandiva_lines(cluster.output(job_id)) == [
            f"gandiva: slurm-{job_id}.batch is job {j['id']} on n1's cpu0 (weight {w})"]
    assert cluster.node_jobs("n2") == []
    # Each got its share while both ran: weight 2 about twice weight 1's time.
    share = share_while_both_ran(results[2]["intervals"], results[1]["intervals"])
    print(f"weight 2 against weight 1, device time while both ran: {share:.2f}")
    assert 1.3 < share < 3.0, share


def reference_run(tmp_path, steps):
    """An undisturbed run of sched_job.py outside Slurm and gandiva."""
    out = tmp_path / "reference.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1")
    subprocess.run([PYTHON, SCHED_JOB, "--steps", str(steps), "--step-ms", "0", "--result", str(out)],
                   env=env, check=True, capture_output=True)
    return json.loads(out.read_text())


def test_a_preempted_job_checkpoints_and_continues_on_the_other_node(tmp_path):
    steps = 400
    reference = reference_run(tmp_path, steps)
    with SlurmCluster(tmp_path, plugstack_lines=[plugstack(tmp_path)], cpus=1, grace_time=0) as cluster:
        ckpt, result = tmp_path / "ckpt", tmp_path / "result.json"
        low = cluster.sbatch("-p", "low", "--requeue", "--open-mode=append", "--gandiva",
                             f"--gandiva-checkpoint={ckpt}",
                             script=job_script(SCHED_JOB, "--steps", steps, "--step-ms", 20,
                                               "--result", result))
        assert cluster.wait_state(low, "RUNNING")["NodeList"] == "n1"
        name = f"slurm-{low}.batch"
        [running] = wait_for(lambda: [j for j in cluster.node_jobs("n1")
                                      if j["name"] == name and j["iterations"] >= 40],
                             60, "the low job's first 40 steps")
        # Its processes are Slurm's: gandiva does not move it (Slurm requeues it).
        assert running["managed_by"] == "slurm"
        refused = cluster.node_cli("n1", "migrate", str(running["id"]), "--to", "n2", check=False)
        assert refused.returncode != 0 and "is managed by slurm" in refused.stderr, refused.stderr

        t0 = time.monotonic()
        # It holds n1 until cancelled: the low job can only come back on n2.
        high = cluster.sbatch("-p", "high", "-w", "n1", wrap="echo high $(hostname); sleep 300")
        restarted = re.compile(r"starts at step (\d+)")
        wait_for(lambda: len(restarted.findall(cluster.output(low))) >= 2, 90,
                 "the low job to start again")
        resumed_after = time.monotonic() - t0
        job = cluster.wait_state(low, "COMPLETED", timeout=120)
        assert (job["NodeList"], job["Restarts"]) == ("n2", "1"), job
        assert cluster.job(high)["NodeList"] == "n1"
        cluster.slurm("scancel", str(high))

        output = cluster.output(low)
        saved = re.search(r"SIGTERM: saved the state after (\d+) iterations to (\S+) ", output)
        assert saved and saved.group(2) == str(ckpt), output
        starts = [int(s) for s in restarted.findall(output)]
        assert starts == [0, int(saved.group(1))], f"lost no step beyond the one in flight: {output}"
        assert f"gandiva: restoring from {ckpt}/state.gdck" in output, output
        final = json.loads(result.read_text())
        assert final["losses"] == reference["losses"], "the loss history of an undisturbed run, bit for bit"
        assert final["weights_sha256"] == reference["weights_sha256"]
        # Both nodes' gandivad ran it in turn: ended by SIGTERM on n1, to the end on n2.
        on = {n: [j for j in cluster.node_jobs(n) if j["name"] == name] for n in cluster.names}
        assert [j["exit_signal"] for j in on["n1"]] == [15], on["n1"]
        assert [(j["state"], j["exit_code"]) for j in on["n2"]] == [("exited", 0)], on["n2"]
        print(f"preempted at step {saved.group(1)}; running again from it on n2 "
              f"{resumed_after:.1f} s after the high-priority job was submitted")


def test_gandiva_on_a_node_without_gandivad_runs_unmanaged_saying_so(tmp_path):
    with SlurmCluster(tmp_path, names=("n1",), plugstack_lines=[plugstack(tmp_path)],
                      gandivad=False) as cluster:
        job_id = cluster.sbatch("--gandiva", wrap="echo trained")
        assert cluster.wait_state(job_id, "COMPLETED", timeout=30)["ExitCode"] == "0:0"
        output = cluster.output(job_id)
        assert "trained" in output
        lines = gandiva_lines(output)
        assert len(lines) == 1, output
        assert f"no gandivad answered at ipc://{tmp_path}/n1/gandivad.sock on n1" in lines[0]
        assert "runs unmanaged" in lines[0]


def test_bad_options_are_refused_at_submission_and_lose_nothing(cluster, tmp_path):
    def refused(*args):
        with pytest.raises(RuntimeError) as e:
            cluster.sbatch(*args, wrap="true")
        return str(e.value)

    assert "invalid weight '0'" in refused("--gandiva=0")
    assert "invalid weight 'fast'" in refused("--gandiva=fast")
    assert "not an absolute path" in refused("--gandiva", "--gandiva-checkpoint=ckpt")
    (tmp_path / "a-file").write_text("x")
    assert "not a directory" in refused(f"--gandiva-checkpoint={tmp_path}/a-file")
    assert cluster.slurm("squeue", "-h").stdout.strip() == "", "no job was created"
    # The cluster goes on: a good submission runs.
    job_id = cluster.sbatch("--gandiva=2", wrap="echo fine")
    assert cluster.wait_state(job_id, "COMPLETED", timeout=30)


def test_a_job_of_another_user_is_managed_by_a_root_gandivad():
    """Slurm jobs run as their users, gandivad as root: the plugin passes the
    job's uid and gandivad gives that user the job's control block (owner-only,
    so without it the job could not attach and would run unmanaged)."""
    root = Path(tempfile.mkdtemp(prefix="gd-slurm-user."))  # nobody must reach slurm.conf, munge
    try:
        root.chmod(0o755)
        out = root / "out"
        out.mkdir(mode=0o1777)
        out.chmod(0o1777)
        with SlurmCluster(root, names=("n1",), plugstack_lines=[plugstack(root)]) as cluster:
            cluster.munge_socket.parent.chmod(0o755)
            script = root / "job.sh"
            script.write_text(job_script(INTERVAL_JOB, "--iterations", 50, "--work-ms", 2,
                                         "--out", out / "r.json"))
            script.chmod(0o755)
            r = subprocess.run(["runuser", "-u", "nobody", "--", "sbatch", "--parsable", "--gandiva",
                                f"--chdir={out}", "-o", str(out / "slurm-%j.out"), str(script)],
                               env=cluster.env, capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr
            job_id = int(r.stdout.strip())
            assert cluster.wait_state(job_id, "COMPLETED", timeout=60)["UserId"] == "nobody(65534)"
            assert json.loads((out / "r.json").read_text())["managed"], \
                (out / f"slurm-{job_id}.out").read_text()
            [job] = cluster.node_jobs("n1")
            assert (job["name"], job["iterations"], job["state"]) == (f"slurm-{job_id}.batch", 50, "exited")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_step_of_several_tasks_runs_unmanaged_saying_why(cluster, tmp_path):
    """`srun --gandiva -n 2`: gandivad ends a gang when its one reported process
    (a launcher such as torchrun) ends, and a Slurm step has none (reporting task
    0 killed task 1 when task 0 finished first, seen in CI), so the plugin runs
    such a step unmanaged and says so, rather than kill ranks."""
    script = ("#!/bin/sh\n"
              f"export PYTHONPATH={BUILD}/python OMP_NUM_THREADS=1\n"
              f"srun --gandiva -n 2 sh -c 'exec {PYTHON} {INTERVAL_JOB} --iterations 60 --work-ms 2 "
              f"--out {tmp_path}/rank$SLURM_LOCALID.json'\n")
    job_id = cluster.sbatch("-w", "n1", "-n", "2", script=script)
    assert cluster.wait_state(job_id, "COMPLETED", timeout=60)["ExitCode"] == "0:0"
    for rank in (0, 1):
        r = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert r["done"] and len(r["intervals"]) == 60 and not r["managed"], r
    assert cluster.node_jobs("n1") == []
    lines = gandiva_lines(cluster.output(job_id))
    assert lines == [f"gandiva: slurm-{job_id}.0 has 2 tasks on n1; a gang without a launcher "
                     "process is not supported yet: it runs unmanaged (one task per node, or "
                     "torchrun as the one task, is managed)"], lines


def test_preempting_two_time_sliced_jobs_saves_both_the_parked_one_too(tmp_path):
    """Two --gandiva-checkpoint jobs share n1's device, so at any moment one is
    parked (and stopped by gandivad's freezer); a high job that needs all of n1
    preempts both: each saves at once (the parked one where it is parked) and
    both continue on n2 from where they stopped."""
    steps = 300
    reference = reference_run(tmp_path, steps)
    with SlurmCluster(tmp_path, plugstack_lines=[plugstack(tmp_path)], cpus=2, grace_time=0) as cluster:
        low = {}
        for k in ("a", "b"):
            low[k] = cluster.sbatch("-p", "low", "-c", "1", "--requeue", "--open-mode=append",
                                    "--gandiva", f"--gandiva-checkpoint={tmp_path}/ckpt-{k}",
                                    script=job_script(SCHED_JOB, "--steps", steps, "--step-ms", 10,
                                                      "--result", tmp_path / f"{k}.json"))
        for job_id in low.values():  # Slurm fills the first node
            assert cluster.wait_state(job_id, "RUNNING")["NodeList"] == "n1"
        names = {f"slurm-{i}.batch" for i in low.values()}
        wait_for(lambda: len([j for j in cluster.node_jobs("n1")
                              if j["name"] in names and j["iterations"] >= 30]) == 2, 60,
                 "both jobs' first 30 steps on n1")
        # They are time-sliced: wait for a moment where one is parked.
        wait_for(lambda: any(j["state"] == "suspended" for j in cluster.node_jobs("n1")
                             if j["name"] in names), 10, "one job parked")
        high = cluster.sbatch("-p", "high", "-w", "n1", "-c", "2", wrap="sleep 300")
        for k, job_id in low.items():
            job = cluster.wait_state(job_id, "COMPLETED", timeout=120)
            assert (job["NodeList"], job["Restarts"]) == ("n2", "1"), job
            output = cluster.output(job_id)
            saved = re.search(r"SIGTERM: saved the state after (\d+) iterations", output)
            assert saved, output
            assert [int(s) for s in re.findall(r"starts at step (\d+)", output)] == [0, int(saved.group(1))]
            final = json.loads((tmp_path / f"{k}.json").read_text())
            assert final["losses"] == reference["losses"][:steps]
        cluster.slurm("scancel", str(high))
