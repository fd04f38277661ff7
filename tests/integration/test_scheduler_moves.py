"""A scheduler restarted mid-migration (issue 31, item 5): the live scheduler
(policy gandiva) moves a job from one real gandivad node to the other to make
room for a 2-device job, and is killed (SIGKILL) while the move is under way.
Restarted on the same state, it finds the move in its database and finishes it
from what the nodes report: the job finishes exactly once, on the destination,
from the state it left its source with (the checksum of a run never moved),
never launched again nor resumed before its state arrived, and the scheduler
says it finished. The pure logic's cases (a move that failed, one never asked
for, a source that forgot it) are tests/scheduler/live_moves_test.cc."""

import json
import os
import re
import signal

import pytest

import nodes
import test_migration as tm
from conftest import SYNTHETIC_JOB
from sched_cluster import SchedCluster

# The synthetic C++ job (1 MiB of state, 1 ms an iteration): long enough that
# it still trains on its source when its copy is up on the destination.
ITERATIONS = 10000
# Every copy sleeps this long before it starts: the window, while the
# destination's copy warms up, in which the test kills the scheduler.
SLOW_START_S = 4


def slow_job(result):
    return ["/bin/sh", "-c",
            f"sleep {SLOW_START_S}; exec {SYNTHETIC_JOB} --mib 1 --seed 7 --iterations {ITERATIONS} "
            f"--layout functions --result {result}"]


def migrating(cluster):
    """(source node, its job record) of a migration under way, or None."""
    for n in cluster.nodes:
        for j in n.jobs():
            op = j.get("operation") or {}
            if op.get("kind") == "migrate" and op.get("state") == "running":
                return n, j
    return None


def training(cluster, names):
    """Whether each named job has trained a while on its node (the scheduler's
    queue says where it runs, not how far it got)."""
    jobs = [j for n in cluster.nodes for j in n.jobs() if j["state"] == "running"]
    return all(any(j["name"].startswith(f"{name}.s") and j["iterations"] > 200 for j in jobs)
               for name in names)


@pytest.mark.native_job
def test_a_scheduler_killed_mid_migration_finishes_the_move_once(tmp_path):
    if not os.path.exists(SYNTHETIC_JOB):
        pytest.skip("synthetic_state_job not built")
    ref = tm.reference(lambda out: tm.synthetic_cmd(out, ITERATIONS, iteration_ms=0, mib=1,
                                                    flags=("--layout", "functions")),
                       tmp_path, "synthetic")
    cluster = SchedCluster(tmp_path, devices="cpu:2")
    # No packing and no growing: the only way to one node's two devices for
    # the 2-device job is to move a job aside.
    flags = ("--max-share", "1", "--no-grow")
    try:
        cluster.start(*flags, policy="gandiva")
        name = {cluster.submit(*slow_job(tmp_path / f"{n}.json"), flags=("--name", n)): n
                for n in ("s1", "s2", "s3")}
        ids = list(name)
        nodes.wait_for(lambda: all(cluster.job(i)["state"] == "running" for i in ids), 30,
                       "three jobs placed")
        # One job on each node: the later of the two that share a node is cancelled.
        where = {i: cluster.job(i)["node"] for i in ids}
        shared = [i for i in ids if list(where.values()).count(where[i]) == 2]
        assert len(shared) == 2, where
        cluster.cli("cancel", str(shared[1]))
        kept = [i for i in ids if i != shared[1]]
        nodes.wait_for(lambda: training(cluster, [name[i] for i in kept]), 60,
                       "both kept jobs training")
        gang = cluster.submit("/bin/sleep", "2", flags=("--gpus", "2", "--name", "gang"))
        source, run = nodes.wait_for(lambda: migrating(cluster), 30, "the scheduler to move a job")
        cluster.kill(signal.SIGKILL)
        # Killed while the destination's copy warms up (it sleeps first).
        assert run["operation"]["step"] in ("preparing", "warming"), run
        moved = next(i for i in kept if run["name"] == f"{name[i]}.s{i}.a1")
        dest = next(n for n in cluster.nodes if n is not source)

        cluster.start(*flags, policy="gandiva")
        log = cluster.read_log()
        assert f"job {moved}: was moving from {source.name} (job {run['id']}) to {dest.name}" \
            in log, log
        assert f"job {moved}: adopted" not in log, "taken for a job that was not moving"
        jobs = cluster.wait_ended(kept + [gang], timeout=120)
        job = jobs[moved]
        assert job["state"] == "finished", job
        assert job["attempt"] == 1, f"launched again: {job}"
        assert job["node"] == dest.name, job
        assert jobs[gang]["state"] == "finished", jobs[gang]
        assert cluster.cli("wait", str(moved), "--scheduler").returncode == 0
        # Once on each node: its run on the source ended migrated, its copy on
        # the destination ran to the end from the source's state.
        src_runs = [j for j in source.jobs() if j["name"] == run["name"]]
        dest_runs = [j for j in dest.jobs() if j["name"] == run["name"]]
        assert [j["state"] for j in src_runs] == ["migrated"], src_runs
        assert [j["state"] for j in dest_runs] == ["exited"], dest_runs
        assert dest_runs[0]["id"] == job["node_job"], (dest_runs, job)
        assert dest_runs[0]["migrated_from"].endswith(f"/{run['id']}"), dest_runs
        result = json.loads((tmp_path / f"{name[moved]}.json").read_text())
        tm.same_checksum(ref, result)
        assert 0 < result["restored_at_iteration"] < ITERATIONS, result
        # The restarted scheduler resumed nothing (the arriving copy least of all).
        cluster.kill(signal.SIGTERM)
        actions = re.findall(r"actions: (.*)", cluster.read_log())[-1].split()
        counts = dict(zip(actions[::2], map(int, actions[1::2])))
        assert counts["resumes"] == 0, counts
    finally:
        cluster.stop()
