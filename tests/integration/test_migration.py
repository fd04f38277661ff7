"""Integration tests of checkpoint and migration between real gandivad nodes,
with real training jobs: results must be bitwise those of a run never moved,
and every failure must leave the job training on its source."""

import contextlib
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import CNN_EXAMPLE, FINETUNE_EXAMPLE, MLP_EXAMPLE, PYTHON, SYNTHETIC_JOB, BUILD, pids_running
from nodes import Node, Proxy, delete_netns, make_netns_pair, netns_available, wait_for

CNN_ITERATIONS = 400


def cnn_cmd(result, iterations=CNN_ITERATIONS):
    return [PYTHON, CNN_EXAMPLE, "--iterations", str(iterations), "--report-every", "0", "--result", str(result)]


def mlp_cmd(result, iterations=1500):
    return [MLP_EXAMPLE, "--iterations", str(iterations), "--report-every", "0", "--result", str(result)]


# Each reference run's result by its command (its result path left out): the
# jobs are seeded and train the same every run, so one run serves every test.
_references = {}


def reference(cmd_factory, tmp_path, name):
    """The same job run once, unmanaged and never moved."""
    key = tuple(cmd_factory("RESULT"))
    if key not in _references:
        out = tmp_path / f"{name}-reference.json"
        env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1")
        env.pop("GANDIVA_CONTROL_BLOCK", None)
        subprocess.run(cmd_factory(out), check=True, env=env, capture_output=True, timeout=300)
        _references[key] = json.loads(out.read_text())
    return _references[key]


def same_training(a, b):
    assert len(a["losses"]) == len(b["losses"])
    assert a["losses"] == b["losses"], "loss history differs"
    assert a["parameters_sha256"] == b["parameters_sha256"], "final parameters differ"


@pytest.fixture
def cluster(tmp_path):
    (tmp_path / "keys").mkdir()
    made = []

    def make(names=("a", "b"), extra=None, authorize=None, peer_ports=None, netns=None):
        nodes = {}
        for i, n in enumerate(names):
            ns, addr = (netns[i] if netns else (None, "127.0.0.1"))
            nodes[n] = Node(tmp_path, n, address=addr, netns=ns, extra=(extra or {}).get(n, ()))
        for n, node in nodes.items():
            keys = [other.public for other in nodes.values()] if authorize is None else authorize(n, nodes)
            peers = [(o.name, f"tcp://{o.address}:{(peer_ports or {}).get(o.name, o.port)}", o.public)
                     for o in nodes.values() if o is not node]
            node.start(keys, peers)
        made.extend(nodes.values())
        return nodes

    yield make
    for n in made:
        n.stop()


def migrate(node, job, to, check=True):
    return node.cli("migrate", str(job), "--to", to, "--json", check=check)


def migrate_mid_run(a, b, cmd_factory, out, name, after_iterations):
    """Runs the job on a, moves it to b once it has trained a while, lets it
    finish there; returns the migration's operation record."""
    run = a.run(*cmd_factory(out), name=name)
    wait_for(lambda: a.first_iterations() > after_iterations, what="training on a")
    op = json.loads(migrate(a, 1, "b").stdout)
    assert op["state"] == "done", op
    assert run.wait(timeout=60) == 0
    assert "migrated to b" in run.stderr.read()
    wait_for(lambda: b.job(op["to_job"]).get("state") in ("exited", "failed"), what="the job to finish on b")
    assert b.job(op["to_job"])["state"] == "exited", b.read_log()
    return op


def test_pytorch_job_migrated_mid_run_trains_bitwise_the_same(cluster, tmp_path):
    ref = reference(cnn_cmd, tmp_path, "cnn")
    nodes = cluster()
    a, b = nodes["a"], nodes["b"]
    out = tmp_path / "cnn.json"
    op = migrate_mid_run(a, b, cnn_cmd, out, "cnn", 100)
    assert op["to_job"] >= 1
    assert 0 < op["downtime_ms"] < 1000, op
    assert op["bytes"] > 0
    assert a.job(1)["state"] == "migrated"
    assert b.job(op["to_job"])["migrated_from"] == "a/1"
    # The job on b started at the iteration it left a, not from scratch.
    assert b.job(op["to_job"])["iterations"] < CNN_ITERATIONS
    same_training(ref, json.loads(out.read_text()))


def test_libtorch_job_migrated_mid_run_trains_bitwise_the_same(cluster, tmp_path):
    if not os.path.exists(MLP_EXAMPLE):
        pytest.skip("libtorch example not built")
    ref = reference(mlp_cmd, tmp_path, "mlp")
    nodes = cluster()
    out = tmp_path / "mlp.json"
    migrate_mid_run(nodes["a"], nodes["b"], mlp_cmd, out, "mlp", 300)
    same_training(ref, json.loads(out.read_text()))


# The job must still train when b's copy is up (it imports torch and builds
# the 64 MiB table): the copy took the time of 1,800 iterations after the first
# 300 on two cores loaded fifteen deep, twice what CI's two lanes load them.
FINETUNE_ITERATIONS = 4000


def test_fine_tuning_on_a_frozen_embedding_sends_only_what_trains(cluster, tmp_path):
    """A PyTorch job with a 64 MiB frozen embedding table and a small trained
    head: b's warm copy builds the same table, so the migration sends the
    head, the optimizer and the loss history, not the table, and training
    continues bitwise as in a run never moved."""
    iterations = FINETUNE_ITERATIONS

    def cmd(result):
        return [PYTHON, FINETUNE_EXAMPLE, "--iterations", str(iterations), "--report-every", "0",
                "--result", str(result)]

    ref = reference(cmd, tmp_path, "finetune")
    nodes = cluster()
    out = tmp_path / "finetune.json"
    op = migrate_mid_run(nodes["a"], nodes["b"], cmd, out, "finetune", 300)
    moved = json.loads(out.read_text())
    same_training(ref, moved)
    assert 0 < moved["restored_at_iteration"] < iterations
    # The table is 64 MiB; the rest of the state is well under 1 MiB, and the
    # 4 MiB chunk the table shares with the head's weights is sent too.
    assert op["bytes"] < 6 << 20, op


def synthetic_cmd(result, iterations, iteration_ms=1.0, mib=4, seed=7, flags=()):
    """The synthetic C++ job: its copy is up in milliseconds, so a migration's
    time is the transfer's, not a framework's start-up. `flags`: more of its own."""
    if not os.path.exists(SYNTHETIC_JOB):
        pytest.skip("synthetic_state_job not built")
    return [SYNTHETIC_JOB, "--mib", str(mib), "--seed", str(seed), "--iterations", str(iterations),
            "--iteration-ms", str(iteration_ms), *flags, "--result", str(result)]


@pytest.mark.native_job
@pytest.mark.parametrize("frozen, layout", [(0.5, "functions"), (0.0, "functions"),
                                            (0.5, "buffer")])
def test_a_frozen_part_of_the_state_is_not_sent(cluster, tmp_path, frozen, layout):
    """b's warm copy holds the part of the state that is as it started (a
    frozen backbone, say): that part is named, not sent, and the job still ends
    bitwise where a run never moved ends. With --layout buffer the bytes are a
    gd_register_buffer section, which b's copy receives in place."""
    mib = 64

    def cmd(result):
        return synthetic_cmd(result, 4000, mib=mib, seed=3,
                             flags=("--frozen-fraction", str(frozen), "--layout", layout))

    ref = reference(cmd, tmp_path, "synthetic")
    nodes = cluster()
    out = tmp_path / "synthetic.json"
    op = migrate_mid_run(nodes["a"], nodes["b"], cmd, out, "synthetic", 300)
    moved = json.loads(out.read_text())
    assert moved["checksum"] == ref["checksum"]
    assert 0 < moved["restored_at_iteration"] < 4000
    # What was trained (300 iterations touch every one of its chunks) crosses,
    # with its frames; the frozen part does not.
    trained = (1 - frozen) * (mib << 20)
    assert trained <= op["bytes"] < trained + (1 << 20), (op, moved["restored_at_iteration"])


# Three hops of the synthetic job (its pacing sleeps, so a busy machine slows
# it little): each hop waits for 200 more iterations, and 3000 leave the last
# hop over a second and a half of training to spare.
BACK_AND_FORTH_ITERATIONS = 3000


@pytest.mark.native_job
def test_migrate_back_and_forth_several_times(cluster, tmp_path):
    """One job moved a -> b -> a -> b: each node is source and destination in
    turn, and the job ends bitwise where a run never moved ends."""
    ref = reference(lambda o: synthetic_cmd(o, BACK_AND_FORTH_ITERATIONS, iteration_ms=0), tmp_path, "synthetic")
    nodes = cluster()
    out = tmp_path / "synthetic.json"
    run = nodes["a"].run(*synthetic_cmd(out, BACK_AND_FORTH_ITERATIONS), name="synthetic")
    where, job = nodes["a"], 1
    downtimes = []
    for hop, to in enumerate(["b", "a", "b"]):
        wait_for(lambda: where.job(job).get("iterations", 0) > 200, what=f"training before hop {hop}")
        op = json.loads(migrate(where, job, to).stdout)
        assert op["state"] == "done", op
        downtimes.append(op["downtime_ms"])
        where, job = nodes[to], op["to_job"]
        assert where.job(job)["migrated_from"], where.job(job)
    assert run.wait(timeout=60) == 0
    wait_for(lambda: where.job(job).get("state") == "exited", timeout=120, what="the end on the last node")
    moved = json.loads(out.read_text())
    same_checksum(ref, moved)
    assert 0 < moved["restored_at_iteration"] < BACK_AND_FORTH_ITERATIONS
    assert all(d < 1000 for d in downtimes), downtimes


def assert_job_continues_on_source(a, run, out, ref, same=same_training):
    """After a failed migration the job trains on at the source and loses nothing."""
    job = a.job(1)
    assert job["state"] != "migrated", job
    assert job["operation"]["state"] == "failed"
    assert run.wait(timeout=120) == 0
    assert a.job(1)["state"] == "exited"
    same(ref, json.loads(out.read_text()))


def same_checksum(a, b):
    assert a["checksum"] == b["checksum"], "the synthetic state differs"


def migrate_with_fault(cluster, cmd, out, name, fault, after_iterations):
    """Runs the job on a, whose gandivad damages the stream (--fault), asks to
    move it to b once it has trained a while, and waits for b to drop its
    copy. Returns a, the run, the failed `gandiva migrate` and the seconds it took."""
    nodes = cluster(extra={"a": ["--fault", fault]})
    a, b = nodes["a"], nodes["b"]
    run = a.run(*cmd(out), name=name)
    wait_for(lambda: a.first_iterations() > after_iterations, what="training on a")
    asked = time.monotonic()
    r = migrate(a, 1, "b", check=False)
    took = time.monotonic() - asked
    assert r.returncode == 1, r.stdout
    # The destination's copy is gone; the source never stopped for good.
    wait_for(lambda: all(j["state"] in ("exited", "failed") for j in b.jobs()), what="b to drop its copy")
    return a, run, r, took


def damaged_stream_job(layout, mib):
    """A job for the damaged-stream tests: the synthetic state, paced at 1 ms
    an iteration, whose copy on b is up in milliseconds, so the stream always
    starts while the job still trains on a (a PyTorch job's copy spends
    seconds importing torch, and on a busy machine the job could end before
    its stream began)."""
    def cmd(result):
        return synthetic_cmd(result, 3000, mib=mib, seed=5, flags=("--layout", layout))
    return cmd


# What the failed migration says of each damage, as the destination found it.
DAMAGE_SAYS = {
    # A bit flipped before sealing: the frames open, the destination job's
    # CRC32C check of the checkpoint stream catches it.
    "corrupt-chunk": ("checksum", "corrupt"),
    # A bit flipped after sealing, as a device on the path could: the frame
    # fails authentication and the destination job loads nothing.
    "flip-wire-bit": ("failed authentication",),
}


@pytest.mark.native_job
@pytest.mark.parametrize("fault, says", [
    *DAMAGE_SAYS.items(),
    # The bulk connection cut after the first frame, as a network could: the
    # destination job sees the stream end before its last frame.
    ("cut-bulk", ("bulk connection",)),
])
def test_a_corrupted_stream_aborts_and_the_job_continues_on_the_source(cluster, tmp_path, fault, says):
    """gandivad --fault makes the source job damage its first data frame, or cut
    the connection after it. The state is 1 MiB, a whole stream in the
    sockets' buffers, as a small PyTorch model's is. (A PyTorch job on its
    source after a failed migration: test_killed_destination_... and
    test_cut_connection_...)"""
    cmd = damaged_stream_job("functions", 1)
    ref = reference(cmd, tmp_path, "synthetic")
    out = tmp_path / "synthetic.json"
    a, run, r, _ = migrate_with_fault(cluster, cmd, out, "synthetic", fault, 300)
    assert any(word in r.stderr for word in says), r.stderr
    assert_job_continues_on_source(a, run, out, ref, same=same_checksum)


@pytest.mark.native_job
@pytest.mark.parametrize("fault", DAMAGE_SAYS)
def test_a_damaged_stream_into_a_buffer_section_fails_at_once_and_leaves_the_job_on_its_source(
        cluster, tmp_path, fault):
    """b's copy receives a gd_register_buffer section straight into the job's
    buffer: a damaged stream fails there after some chunks landed, b's copy
    is discarded, never released to train, and the job trains on at a.
    32 MiB is more than the sockets hold, so a's job is still writing when b
    rejects the frame: b closes the bulk connection at once, and the migration
    fails with b's reason within seconds, not after a's 30 s write deadline."""
    cmd = damaged_stream_job("buffer", 32)
    ref = reference(cmd, tmp_path, "synthetic")
    out = tmp_path / "synthetic.json"
    a, run, r, took = migrate_with_fault(cluster, cmd, out, "synthetic", fault, 300)
    assert any(word in r.stderr for word in DAMAGE_SAYS[fault]), r.stderr
    # The whole `gandiva migrate`: the copy's start, the park, the stream and
    # the abort. 10 s leaves room for a loaded machine and a sanitized build.
    assert took < 10, f"the damage was reported after {took:.1f} s: {r.stderr}"
    assert_job_continues_on_source(a, run, out, ref, same=same_checksum)


def test_killed_destination_aborts_and_the_job_continues(cluster, tmp_path):
    ref = reference(cnn_cmd, tmp_path, "cnn")
    nodes = cluster()
    a, b = nodes["a"], nodes["b"]
    out = tmp_path / "cnn.json"
    run = a.run(*cnn_cmd(out), name="cnn")
    wait_for(lambda: a.first_iterations() > 50, what="training on a")
    a.cli("migrate", "1", "--to", "b", "--no-wait")
    wait_for(lambda: (a.job(1)["operation"] or {}).get("step") == "warming", what="the destination warming")
    b.stop(sig=9)
    wait_for(lambda: a.job(1)["operation"]["state"] != "running", timeout=30, what="the migration to give up")
    assert "b" in a.job(1)["operation"]["error"] or "peer" in a.job(1)["operation"]["error"]
    assert_job_continues_on_source(a, run, out, ref)
    # b's warm copy lost its controller before the state came: past its lease it
    # must exit, not train from scratch (and overwrite the result).
    deadline = time.monotonic() + 20
    while pids_running(str(out)):
        assert time.monotonic() < deadline, "the destination's orphaned copy is still running"
        time.sleep(0.2)
    same_training(ref, json.loads(out.read_text()))


def test_cut_connection_aborts_and_the_job_continues(tmp_path):
    ref = reference(cnn_cmd, tmp_path, "cnn")
    # a reaches b only through a TCP forwarder that the test cuts mid-migration.
    a = Node(tmp_path, "a")
    b = Node(tmp_path, "b")
    b.start([a.public, b.public], [("a", a.tcp, a.public)])
    proxy = Proxy(b.port)
    a.start([a.public, b.public], [("b", f"tcp://127.0.0.1:{proxy.port}", b.public)])
    try:
        out = tmp_path / "cnn.json"
        run = a.run(*cnn_cmd(out), name="cnn")
        wait_for(lambda: a.first_iterations() > 50, what="training on a")
        a.cli("migrate", "1", "--to", "b", "--no-wait")
        wait_for(lambda: (a.job(1)["operation"] or {}).get("step") == "warming", what="the destination warming")
        proxy.cut()
        wait_for(lambda: a.job(1)["operation"]["state"] != "running", timeout=30, what="the migration to give up")
        assert_job_continues_on_source(a, run, out, ref)
    finally:
        a.stop()
        b.stop()


def test_unauthorized_key_is_refused_and_nothing_is_sent(cluster, tmp_path):
    # b accepts only its own key: a may not migrate to it.
    nodes = cluster(authorize=lambda n, ns: [ns[n].public])
    a, b = nodes["a"], nodes["b"]
    out = tmp_path / "cnn.json"
    run = a.run(*cnn_cmd(out, 200), name="cnn")
    wait_for(lambda: a.first_iterations() > 20, what="training on a")
    r = migrate(a, 1, "b", check=False)
    assert r.returncode == 1
    assert "key" in r.stderr, r.stderr
    assert b.jobs() == [], "an unauthenticated peer made the destination start a job"
    assert "refused" in b.read_log()
    assert run.wait(timeout=60) == 0


def test_tcp_endpoint_serves_only_authorized_clients(cluster, tmp_path):
    nodes = cluster()
    b = nodes["b"]
    # No key at all: the CURVE handshake never completes.
    r = b.cli("ps", "--endpoint", b.tcp, check=False)
    assert r.returncode == 1 and "no reply" in r.stderr
    # A key b was never given.
    stranger = tmp_path / "stranger"
    subprocess.run([os.path.join(BUILD, "cli", "gandiva"), "keygen", "--out", str(stranger), "--name", "x"],
                   check=True, capture_output=True)
    r = b.cli("ps", "--endpoint", b.tcp, "--key", str(stranger / "x.key"), "--server-key", b.public,
              check=False)
    assert r.returncode == 1
    r = b.cli("suspend", "1", "--endpoint", b.tcp, "--key", str(stranger / "x.key"), "--server-key", b.public,
              check=False)
    assert r.returncode == 1 and "no job" not in r.stderr  # never reached the daemon
    # An authorized key works.
    r = b.cli("ps", "--endpoint", b.tcp, "--key", str(nodes["a"].key), "--server-key", b.public)
    assert r.returncode == 0


def test_checkpoint_then_restore_in_a_new_process_continues_exactly(cluster, tmp_path):
    ref = reference(cnn_cmd, tmp_path, "cnn")
    a = cluster(names=("a",))["a"]
    out = tmp_path / "cnn.json"
    run = a.run(*cnn_cmd(out), name="cnn")
    wait_for(lambda: a.first_iterations() > 150, what="training")
    ckpt = tmp_path / "ckpt"
    r = a.cli("checkpoint", "1", "--to", str(ckpt))
    assert "checkpointed" in r.stdout
    assert (ckpt / "state.gdck").exists()
    run.kill()  # the original dies after the checkpoint (and gandiva run with it)
    for pid in pids_running(str(out)):
        with contextlib.suppress(ProcessLookupError):  # gone meanwhile
            os.kill(pid, signal.SIGKILL)
    run.wait(timeout=30)
    restored = subprocess.Popen(
        [os.path.join(BUILD, "cli", "gandiva"), "run", "--name", "again", "--restore", str(ckpt), "--",
         *cnn_cmd(out)], env=a.env, stderr=subprocess.PIPE, text=True)
    assert restored.wait(timeout=120) == 0, restored.stderr.read()
    same_training(ref, json.loads(out.read_text()))


@pytest.mark.skipif(not netns_available(), reason="needs root and ip netns")
@pytest.mark.native_job
def test_migration_between_network_namespaces(cluster, tmp_path):
    def cmd(result, iteration_ms=1.0):
        return synthetic_cmd(result, 2000, iteration_ms=iteration_ms, mib=16)

    ref = reference(lambda o: cmd(o, iteration_ms=0), tmp_path, "synthetic")
    (ns_a, addr_a), (ns_b, addr_b) = make_netns_pair(str(os.getpid() % 1000))
    try:
        nodes = cluster(netns=[(ns_a, addr_a), (ns_b, addr_b)])
        a, b = nodes["a"], nodes["b"]
        out = tmp_path / "synthetic.json"
        migrate_mid_run(a, b, cmd, out, "synthetic", 200)
        same_checksum(ref, json.loads(out.read_text()))
        # b's address exists only inside the namespaces: the host cannot reach it.
        import socket
        with pytest.raises(OSError):
            socket.create_connection((addr_b, b.port), timeout=1)
    finally:
        delete_netns(ns_a, ns_b)
