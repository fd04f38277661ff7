"""The live cluster scheduler (`gandiva scheduler`) over real gandivad nodes on
this machine (separate Unix sockets and TCP ports; not network namespaces),
running real PyTorch training jobs: placement on every node, kill -9 of the
scheduler (nothing lost, nothing started twice), a node's death (its job
restarts elsewhere from its latest checkpoint, with the same final weights),
and bad input."""

import json
import os
import re
import signal

import pytest

import nodes
from sched_cluster import SchedCluster, reference_digest

STEPS = 60


@pytest.fixture
def cluster(tmp_path):
    c = SchedCluster(tmp_path)
    yield c
    c.stop()


def summary(jobs):
    return {i: (j["state"], j["exit_code"], j["detail"], j["node"]) for i, j in jobs.items()}


def launches_of(cluster, job_id):
    """The node jobs started for scheduler job `job_id`, on every node."""
    found = []
    for n in cluster.nodes:
        found += [(n.name, j) for j in n.jobs() if f".s{job_id}.a" in j["name"]]
    return found


def test_fifo_runs_real_jobs_on_every_node(cluster, tmp_path):
    cluster.start(policy="fifo")
    reference = reference_digest(tmp_path, STEPS)
    ids = [cluster.submit_job(STEPS, 10, tmp_path / f"r{i}.json") for i in range(3)]
    jobs = cluster.wait_ended(ids)
    assert {jobs[i]["state"] for i in ids} == {"finished"}, summary(jobs)
    assert {jobs[i]["node"] for i in ids} == {"a", "b"}, "FIFO fills both nodes"
    for i in range(3):
        assert json.loads((tmp_path / f"r{i}.json").read_text())["weights_sha256"] == reference
    # Measured by the nodes: every job executed (attained service) about its steps' time.
    for i in ids:
        assert jobs[i]["attained_s"] > STEPS * 0.010 * 0.5, jobs[i]
    out = cluster.cli("logs", str(ids[0]), "--scheduler").stdout
    assert f"done: {STEPS} steps" in out
    assert cluster.cli("wait", str(ids[0]), "--scheduler").returncode == 0
    # On SIGTERM it logs the actions it took (bench/scheduler/live_vs_sim.py reads them).
    cluster.kill(signal.SIGTERM)
    assert "actions: launches 3 resumes 0 suspends 0 migrations 0" in cluster.read_log()


def test_killed_scheduler_restarts_loses_nothing_and_starts_nothing_twice(cluster, tmp_path):
    cluster.start(policy="fifo")
    ids = [cluster.submit_job(150, 20, tmp_path / f"r{i}.json") for i in range(4)]
    nodes.wait_for(lambda: sum(cluster.job(i)["state"] == "running" for i in ids) == 2, 30,
                   "two jobs running")
    cluster.kill(signal.SIGKILL)
    submitted_while_down = None
    cluster.start(policy="fifo")
    submitted_while_down = cluster.submit_job(20, 10, tmp_path / "late.json")
    jobs = cluster.wait_ended(ids + [submitted_while_down], timeout=180)
    for i in ids + [submitted_while_down]:
        assert jobs[i]["state"] == "finished", jobs[i]
        assert jobs[i]["attempt"] == 1, f"job {i} was launched again: {jobs[i]}"
        assert len(launches_of(cluster, i)) == 1, launches_of(cluster, i)
    assert "adopted" in cluster.read_log()


def test_a_dead_node_s_job_restarts_elsewhere_from_its_checkpoint(cluster, tmp_path):
    steps = 300
    reference = reference_digest(tmp_path, steps)
    cluster.start("--checkpoint-every", "1", "--node-dead-after", "2", policy="fifo")
    result = tmp_path / "r.json"
    job = cluster.submit_job(steps, 20, result, flags=("--restartable",))
    # The second checkpoint: the first may hold step 0 (taken at its first boundary).
    earliest = nodes.wait_for(lambda: cluster.job(job)["checkpoint_dir"], 60, "a checkpoint")
    first = nodes.wait_for(
        lambda: (j := cluster.job(job))["checkpoint_dir"] not in ("", earliest) and j, 60,
        "a second checkpoint")
    doomed = cluster.node(first["node"])
    pid = next(j["pid"] for j in doomed.jobs() if j["id"] == first["node_job"])
    doomed.stop(signal.SIGKILL)  # the node dies with its job
    os.kill(pid, signal.SIGKILL)
    moved = nodes.wait_for(lambda: (j := cluster.job(job))["attempt"] == 2 and j["node"] and j, 60,
                           "the job to start again")
    assert moved["node"] != first["node"]
    jobs = cluster.wait_ended([job], timeout=120)
    assert jobs[job]["state"] == "finished", jobs[job]
    r = json.loads(result.read_text())
    assert r["resumed_at"] and r["resumed_at"] > 0, "restarted from its checkpoint, not from 0"
    assert r["weights_sha256"] == reference, "the same weights as a run never interrupted"
    assert "went down" in cluster.read_log()
    queue = cluster.queue()
    assert not next(n for n in queue["nodes"] if n["name"] == first["node"])["up"]


def test_bad_requests_get_clear_errors(cluster, tmp_path):
    cluster.start(policy="fifo")
    r = cluster.cli("submit", "--gpus", "3", "--", "/bin/true", check=False)
    assert r.returncode == 1 and "largest node has 1" in r.stderr
    r = cluster.cli("submit", "--gpus", "0", "--", "/bin/true", check=False)
    assert r.returncode == 1 and "at least 1" in r.stderr
    r = cluster.cli("cancel", "99", check=False)
    assert r.returncode == 1 and "no job 99" in r.stderr
    r = cluster.cli("logs", "99", "--scheduler", check=False)
    assert r.returncode == 1 and "no job 99" in r.stderr
    # A job that cannot start fails with its reason, and the scheduler goes on.
    bad = cluster.submit("/no/such/program")
    ok = cluster.submit("/bin/true")
    jobs = cluster.wait_ended([bad, ok])
    assert jobs[bad]["state"] == "failed" and jobs[ok]["state"] == "finished", jobs
    # Cancelling a queued job (the only device is busy) and a running one.
    long_jobs = [cluster.submit("/bin/sleep", "60") for _ in range(3)]
    nodes.wait_for(lambda: sum(cluster.job(i)["state"] == "running" for i in long_jobs) == 2, 30,
                   "two running")
    queued = next(i for i in long_jobs if cluster.job(i)["state"] == "queued")
    assert json.loads(cluster.cli("cancel", str(queued), "--json").stdout)["state"] == "cancelled"
    for i in long_jobs:
        if i != queued:
            cluster.cli("cancel", str(i))
    jobs = cluster.wait_ended(long_jobs, timeout=30)
    assert {jobs[i]["state"] for i in long_jobs} == {"cancelled"}
    assert cluster.cli("wait", str(queued), "--scheduler", check=False).returncode == 130
    assert cluster.proc.poll() is None


def test_the_scheduler_refuses_to_start_on_bad_state_or_nodes(cluster, tmp_path):
    run = lambda *a: cluster.cli("scheduler", *a, check=False, timeout=30)
    r = run("--nodes", str(cluster.nodes_file), "--state-dir", str(tmp_path / "s1"), "--policy", "srtf",
            "--endpoint", f"ipc://{tmp_path}/x.sock")
    assert r.returncode == 1 and "only a simulator knows" in r.stderr
    empty = tmp_path / "empty_nodes"
    empty.write_text("# no nodes\n")
    r = run("--nodes", str(empty), "--state-dir", str(tmp_path / "s2"), "--endpoint", f"ipc://{tmp_path}/x.sock")
    assert r.returncode == 1 and "lists no nodes" in r.stderr
    dead = tmp_path / "dead_nodes"
    dead.write_text(f"z ipc://{tmp_path}/nobody.sock\n")
    r = run("--nodes", str(dead), "--state-dir", str(tmp_path / "s3"), "--endpoint", f"ipc://{tmp_path}/x.sock")
    assert r.returncode == 1 and "no node answered" in r.stderr
    # A TCP node that does not know the scheduler's key does not answer it.
    key, _ = nodes.keygen(tmp_path / "keys", "sched")
    node = cluster.nodes[0]
    tcp_nodes = tmp_path / "tcp_nodes"
    tcp_nodes.write_text(f"{node.name} {node.tcp} {node.public}\n")
    r = run("--nodes", str(tcp_nodes), "--state-dir", str(tmp_path / "s5"), "--key", str(key),
            "--endpoint", f"ipc://{tmp_path}/x.sock")
    assert r.returncode == 1 and "does not accept this client's key" in r.stderr, r.stderr
    tcp_nodes.write_text(f"{node.name} {node.tcp}\n")
    r = run("--nodes", str(tcp_nodes), "--state-dir", str(tmp_path / "s6"), "--endpoint",
            f"ipc://{tmp_path}/x.sock")
    assert r.returncode == 1 and "needs its public key" in r.stderr, r.stderr
    corrupt = tmp_path / "s4"
    corrupt.mkdir()
    (corrupt / "scheduler.db").write_bytes(b"this is not a database" * 100)
    r = run("--nodes", str(cluster.nodes_file), "--state-dir", str(corrupt), "--endpoint", f"ipc://{tmp_path}/x.sock")
    assert r.returncode == 1 and "scheduler.db" in r.stderr, r.stderr
    assert (corrupt / "scheduler.db").read_bytes().startswith(b"this is not"), "left as it was"
    r = run("--nodes", str(cluster.nodes_file))
    assert r.returncode == 2 and "--state-dir" in r.stderr
    for bad in ("x", "-1", "0,5"):
        r = run("--nodes", str(cluster.nodes_file), "--state-dir", str(tmp_path / "s5"),
                "--las-thresholds", bad)
        assert r.returncode == 2 and "bad --las-thresholds" in r.stderr, (bad, r.stderr)
    # One scheduler per state directory: two would both start its jobs.
    cluster.start(policy="fifo")
    r = run("--nodes", str(cluster.nodes_file), "--state-dir", str(cluster.state), "--endpoint",
            f"ipc://{tmp_path}/x.sock")
    assert r.returncode == 1 and "another scheduler is running" in r.stderr


def test_remote_users_submit_over_curve_tcp_and_strangers_are_refused(cluster, tmp_path):
    keys = tmp_path / "keys"
    sched_key, sched_public = nodes.keygen(keys, "sched")
    user_key, user_public = nodes.keygen(keys, "user")
    stranger_key, _ = nodes.keygen(keys, "stranger")
    authorized = tmp_path / "authorized"
    authorized.write_text(user_public + "\n")
    tcp = f"tcp://127.0.0.1:{nodes.free_port()}"
    cluster.start("--tcp", tcp, "--key", str(sched_key), "--authorized-keys", str(authorized),
                  policy="fifo")
    remote = ("--endpoint", tcp, "--key", str(user_key), "--server-key", sched_public)
    job = cluster.submit_job(20, 5, tmp_path / "r.json", flags=remote)
    assert cluster.cli("wait", str(job), "--scheduler", *remote).returncode == 0
    queue = json.loads(cluster.cli("queue", "--all", "--json", *remote).stdout)
    assert [(j["id"], j["state"]) for j in queue["jobs"]] == [(job, "finished")]
    r = cluster.cli("queue", "--endpoint", tcp, "--key", str(stranger_key), "--server-key",
                    sched_public, check=False)
    assert r.returncode != 0 and "does not accept this client's key" in r.stderr, r.stderr
    assert cluster.proc.poll() is None
    # The same from Python.
    import gandiva
    s = gandiva.SchedulerClient(tcp, key=user_key, server_key=sched_public)
    assert [j["id"] for j in s.queue(all=True)] == [job]
    stranger = gandiva.SchedulerClient(tcp, timeout_ms=2000, key=stranger_key,
                                       server_key=sched_public)
    with pytest.raises(gandiva.GandivaError):
        stranger.queue()
    # A TCP endpoint never serves unauthenticated clients.
    r = cluster.cli("scheduler", "--nodes", str(cluster.nodes_file), "--state-dir",
                    str(tmp_path / "s2"), "--endpoint", f"ipc://{tmp_path}/x.sock", "--tcp",
                    f"tcp://127.0.0.1:{nodes.free_port()}", check=False)
    assert r.returncode == 2 and "--tcp needs --key and --authorized-keys" in r.stderr, r.stderr


def test_python_scheduler_client(cluster, tmp_path):
    import gandiva
    cluster.start(policy="fifo")
    s = gandiva.SchedulerClient(cluster.endpoint)
    job = s.submit(["/bin/sh", "-c", "echo from python; exit 3"], cwd=str(tmp_path), name="py",
                   user="ana", vc="research")
    record = s.wait(job, timeout_s=30)
    assert (record["state"], record["exit_code"], record["user"], record["vc"]) == \
        ("failed", 3, "ana", "research")
    assert "from python" in s.read_log(job)["data"]
    assert [j["id"] for j in s.queue(all=True)] == [job] and s.queue() == []
    with pytest.raises(gandiva.GandivaError) as e:
        s.cancel(job)
    assert e.value.code == "failed_precondition"


def test_las_preempts_a_long_job_and_resumes_it_where_it_parked(tmp_path):
    # One device: a job that has had a second of service drops to LAS's second
    # queue, so a new job preempts it (suspend: parked in memory) and, once that
    # one ends, it resumes where it parked: the same process, not a new launch.
    cluster = SchedCluster(tmp_path, names=("a",))
    try:
        cluster.start("--las-thresholds", "1,1000", policy="las")
        reference = reference_digest(tmp_path, 200)
        long_job = cluster.submit_job(200, 20, tmp_path / "long.json")
        nodes.wait_for(lambda: cluster.job(long_job)["attained_s"] > 1.5, 60, "a second of service")
        short_job = cluster.submit_job(STEPS, 10, tmp_path / "short.json")
        nodes.wait_for(lambda: cluster.job(long_job)["state"] == "suspended", 30, "the preemption")
        jobs = cluster.wait_ended([long_job, short_job], timeout=120)
        assert jobs[long_job]["state"] == jobs[short_job]["state"] == "finished", summary(jobs)
        assert jobs[long_job]["attempt"] == 1, "resumed, not launched again"
        assert jobs[short_job]["end_time"] < jobs[long_job]["end_time"]
        assert json.loads((tmp_path / "long.json").read_text())["weights_sha256"] == reference
        node_job = cluster.node("a").job(jobs[long_job]["node_job"])
        assert node_job["parks"] >= 1
    finally:
        cluster.stop()


def test_a_job_parked_too_long_is_checkpointed_stopped_and_restarted_from_it(tmp_path):
    # As above, but with --stop-parked-after 1: the preempted restartable job,
    # parked for a second, is checkpointed and stopped (its node gets its
    # memory back); it later starts again from that checkpoint, a new launch,
    # and ends with the weights of an uninterrupted run.
    cluster = SchedCluster(tmp_path, names=("a",))
    try:
        cluster.start("--las-thresholds", "1,1000", "--stop-parked-after", "1", policy="las")
        reference = reference_digest(tmp_path, 200)
        long_job = cluster.submit_job(200, 20, tmp_path / "long.json", flags=("--restartable",))
        nodes.wait_for(lambda: cluster.job(long_job)["attained_s"] > 1.5, 60, "a second of service")
        short_job = cluster.submit_job(150, 20, tmp_path / "short.json")
        stopped = nodes.wait_for(
            lambda: (j := cluster.job(long_job))["state"] == "queued" and j["checkpoint_dir"] and j,
            30, "the parked job to be stopped")
        assert stopped["node"] == "" and stopped["attained_s"] > 1.5, stopped
        first_run = [j for j in cluster.node("a").jobs() if j["name"].endswith(f".s{long_job}.a1")]
        nodes.wait_for(lambda: cluster.node("a").job(first_run[0]["id"])["state"] in ("exited", "failed"),
                       30, "the parked run to end")
        jobs = cluster.wait_ended([long_job, short_job], timeout=120)
        assert jobs[long_job]["state"] == jobs[short_job]["state"] == "finished", summary(jobs)
        assert jobs[long_job]["attempt"] == 2, "launched again, from its checkpoint"
        r = json.loads((tmp_path / "long.json").read_text())
        assert r["resumed_at"] > 0, "restarted from its checkpoint, not from step 0"
        assert r["weights_sha256"] == reference
        cluster.kill(signal.SIGTERM)
        assert "stops 1" in cluster.read_log()
    finally:
        cluster.stop()


def test_gandiva_times_a_guest_of_a_new_kind_alone_before_judging_its_pack(tmp_path):
    # One device, a job running and timed; a job of a kind never seen arrives
    # and is packed beside it as a trial. Packed from its start it is never
    # alone, and no job of its kind ever was: its node cannot measure it. The
    # pair takes turns (slice mode) until the node has timed it alone, packs
    # again, and the trial is decided on two measured rates.
    cluster = SchedCluster(tmp_path, names=("a",))
    try:
        cluster.start("--interval", "2", policy="gandiva")
        reference = reference_digest(tmp_path, 500)
        resident = cluster.submit_job(500, 25, tmp_path / "resident.json",
                                      flags=("--kind", "resident"))
        nodes.wait_for(lambda: cluster.job(resident)["rate"] is not None, 60, "the resident timed")
        guest = cluster.submit_job(400, 25, tmp_path / "guest.json", flags=("--kind", "newcomer"))
        nodes.wait_for(lambda: "pack trial: newcomer" in cluster.read_log(), 90,
                       "the trial to be decided")
        node_log = cluster.node("a").read_log()
        modes = re.findall(r"cpu0: share mode (pack|slice)", node_log)
        assert modes[:3] == ["pack", "slice", "pack"], (modes, cluster.read_log()[-3000:])
        trial = re.search(r"pack trial: newcomer ([0-9.]+) beside resident ([0-9.]+)",
                          cluster.read_log())
        assert 0 < float(trial.group(1)) and 0 < float(trial.group(2)), trial.group(0)
        jobs = cluster.wait_ended([resident, guest], timeout=120)
        assert jobs[resident]["state"] == jobs[guest]["state"] == "finished", summary(jobs)
        assert json.loads((tmp_path / "resident.json").read_text())["weights_sha256"] == reference
    finally:
        cluster.stop()
