"""The live scheduler over three gandivad nodes, each in its own network
namespace on a bridged LAN (nodes.NetnsLan): the scheduler on the host talks
to every node over CURVE TCP, jobs run inside their node's namespace, and a
restartable job whose node dies restarts on another node, across the LAN,
from its latest checkpoint with the weights of an uninterrupted run.
Skipped where ip netns is not available (needs root)."""

import json
import os
import signal

import pytest

import nodes
from sched_cluster import SchedCluster, reference_digest

pytestmark = pytest.mark.skipif(not nodes.netns_available(), reason="needs root and ip netns")


def net_namespace(pid):
    """The process's network namespace, or None once it has exited."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except FileNotFoundError:
        return None


def test_three_nodes_in_namespaces_run_jobs_and_survive_a_node_death(tmp_path):
    lan = nodes.NetnsLan(("a", "b", "c"))
    cluster = None
    try:
        cluster = SchedCluster(tmp_path, names=("a", "b", "c"), lan=lan)
        cluster.start("--checkpoint-every", "1", "--node-dead-after", "2", policy="fifo")
        long_steps, short_steps = 300, 100
        long_reference = reference_digest(tmp_path, long_steps)
        short_reference = reference_digest(tmp_path, short_steps)
        long_job = cluster.submit_job(long_steps, 20, tmp_path / "long.json",
                                      flags=("--restartable",))
        short = [cluster.submit_job(short_steps, 30, tmp_path / f"s{i}.json") for i in range(3)]

        # Every node runs a job, each inside the node's own namespace.
        def on_three_nodes():
            live = [j for j in cluster.queue()["jobs"] if j["state"] == "running"]
            return len({j["node"] for j in live}) == 3
        nodes.wait_for(on_three_nodes, 60, "a job running on each of the three nodes")
        host = net_namespace(os.getpid())
        for n in cluster.nodes:
            node_ns = net_namespace(n.proc.pid)
            assert node_ns != host, f"node {n.name} runs in its own namespace"
            spaces = {net_namespace(j["pid"]) for j in n.jobs() if j.get("pid")} - {None}
            assert spaces == {node_ns}, (n.name, spaces)

        # The long job's node dies after its second checkpoint.
        earliest = nodes.wait_for(lambda: cluster.job(long_job)["checkpoint_dir"], 60,
                                  "a checkpoint")
        first = nodes.wait_for(
            lambda: (j := cluster.job(long_job))["checkpoint_dir"] not in ("", earliest) and j,
            60, "a second checkpoint")
        doomed = cluster.node(first["node"])
        pid = next(j["pid"] for j in doomed.jobs() if j["id"] == first["node_job"])
        doomed.stop(signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)

        jobs = cluster.wait_ended([long_job, *short], timeout=180)
        assert {jobs[i]["state"] for i in jobs} == {"finished"}, {
            i: (j["state"], j["detail"], j["node"]) for i, j in jobs.items()}
        assert jobs[long_job]["attempt"] == 2 and jobs[long_job]["node"] != first["node"]
        r = json.loads((tmp_path / "long.json").read_text())
        assert r["resumed_at"] > 0, "restarted from its checkpoint, not from step 0"
        assert r["weights_sha256"] == long_reference
        for i in range(3):
            assert json.loads((tmp_path / f"s{i}.json").read_text())["weights_sha256"] == \
                short_reference
        down = next(n for n in cluster.queue()["nodes"] if n["name"] == first["node"])
        assert not down["up"]
    finally:
        if cluster:
            cluster.stop()
        lan.delete()
