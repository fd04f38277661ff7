"""A real Slurm 22.05 cluster on this machine (slurm_cluster.SlurmCluster: munged,
slurmctld, and per node a slurmd and a gandivad in the node's own network and
UTS namespaces), without any SPANK plugin yet: batch jobs run on the node
asked for, inside its namespaces, and a job of the high partition preempts
(requeues) a job of the low one, which restarts on the other node.
Skipped only where Slurm cannot run (not root, no ip netns, no Slurm)."""

import subprocess
import time

import pytest

from conftest import wait_for
from slurm_cluster import SlurmCluster

REASON = SlurmCluster.unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"Slurm cannot start here: {REASON}")


@pytest.fixture
def cluster(tmp_path):
    c = SlurmCluster(tmp_path)
    print(f"cluster up in {c.started_s:.2f} s")
    yield c
    c.stop()


def test_batch_jobs_run_on_the_requested_node_in_its_namespaces(cluster):
    jobs = {name: cluster.sbatch("-w", name, wrap="hostname; hostname -I; env") for name in cluster.names}
    for name, job_id in jobs.items():
        job = cluster.wait_state(job_id, "COMPLETED", timeout=30)
        assert (job["NodeList"], job["ExitCode"], job["Partition"]) == (name, "0:0", "low"), job
        lines = cluster.output(job_id).splitlines()
        assert lines[0] == name, lines[:3]
        assert lines[1].split() == [cluster.nodes[name][1]], f"{name}'s address only: {lines[1]}"
        env = dict(line.split("=", 1) for line in lines[2:] if "=" in line)
        assert env.get("SLURMD_NODENAME") == name and env.get("SLURM_JOB_ID") == str(job_id)
        assert not [k for k in env if k.startswith("GANDIVA_")], "no SPANK plugin: no GANDIVA_ variable"
        # The node's gandivad is up and, with no plugin, was asked for nothing.
        assert cluster.node_jobs(name) == []

    # stop() ends every daemon and deletes the namespaces and the bridge.
    daemons = [proc for _, proc, _ in cluster.procs]
    spaces = [ns for ns, _ in cluster.nodes.values()]
    bridge = cluster.lan.bridge
    cluster.stop()
    assert all(proc.poll() is not None for proc in daemons)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in spaces if ns in listed]
    assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0


def test_high_partition_job_requeues_low_job_which_restarts_on_the_other_node(cluster):
    cpus = str(cluster.cpus)
    # The low job fills a node (Slurm picks the first free one, n1) and logs
    # every start and signal; --signal=B:USR1 asks for a USR1 to the batch shell
    # when preemption starts (SlurmctldParameters=preempt_send_user_signal).
    low = cluster.sbatch(
        "-p", "low", "-c", cpus, "--requeue", "--open-mode=append", "--signal=B:USR1@5",
        wrap="echo start $(hostname); trap 'echo USR1' USR1; trap 'echo TERM; exit 1' TERM; "
             "sleep 300 & while :; do wait; done")
    job = cluster.wait_state(low, "RUNNING")
    assert (job["NodeList"], job["Restarts"]) == ("n1", "0"), job
    wait_for(lambda: "start n1" in cluster.output(low), 30, "the low job's start")

    t0 = time.monotonic()
    high = cluster.sbatch("-p", "high", "-w", "n1", "-c", cpus, wrap="echo high $(hostname); sleep 12")

    # Preemption starts at once: the low job is told, and keeps n1 for its GraceTime.
    wait_for(lambda: "USR1" in cluster.output(low), 10, "USR1 to the low job at preemption")
    told = time.monotonic() - t0
    assert cluster.job(high)["JobState"] == "PENDING"
    assert cluster.job(low)["JobState"] == "RUNNING"

    # Then it is requeued (Restarts 1, PENDING for BeginTime), the high job gets n1,
    # and the low job restarts on n2.
    states, requeued, restarted = [], None, None
    deadline = t0 + cluster.grace_time + 30 + 20
    while restarted is None:
        assert time.monotonic() < deadline, f"low job states {states}\n{cluster.logs()}"
        job = cluster.job(low)
        seen = (job["JobState"], job["Reason"], job["NodeList"], job["Restarts"])
        if not states or states[-1] != seen:
            states.append(seen)
        if requeued is None and job["Restarts"] == "1":
            requeued = time.monotonic() - t0
        if job["JobState"] == "RUNNING" and job["Restarts"] == "1":
            restarted = time.monotonic() - t0
        time.sleep(0.05)
    print(f"low job: told after {told:.1f} s, requeued after {requeued:.1f} s, "
          f"running again after {restarted:.1f} s; states {states}")
    assert states[0] == ("RUNNING", "None", "n1", "0"), states
    assert ("PENDING", "BeginTime", "", "1") in states, states
    assert states[-1] == ("RUNNING", "None", "n2", "1"), states
    # Requeued only once the grace is over (slurmctld checks it every 30 s).
    assert cluster.grace_time - 1 <= requeued <= cluster.grace_time + 32, requeued
    high_job = cluster.job(high)
    assert (high_job["JobState"], high_job["NodeList"]) == ("RUNNING", "n1"), high_job

    output = cluster.output(low)
    assert output.index("start n1") < output.index("USR1") < output.index("TERM") < output.index("start n2"), output
    assert "DUE TO PREEMPTION" in output, output
    cluster.wait_state(high, "COMPLETED", timeout=30)
    assert cluster.output(high).splitlines()[0] == "high n1"
    assert cluster.job(low)["JobState"] == "RUNNING"
