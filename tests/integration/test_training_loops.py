"""Training loops as people write them, under real gandivad nodes: an ordinary
epoch loop (examples/pytorch/resumable_training.py: a shuffling DataLoader with
2 worker processes, StepLR, GradScaler, dropout, EMA) checkpointed mid-epoch by
the node and restored in a new process, or migrated to another node, trains
bitwise the same as a run never interrupted; a job that registered no state
cannot be checkpointed or migrated, and is told what to register."""

import json
import os
import subprocess

import pytest

from conftest import BUILD, HERE, INTERVAL_JOB, PYTHON, pids_running
from nodes import Node, wait_for

EXAMPLE = os.path.join(HERE, "..", "..", "examples", "pytorch", "resumable_training.py")
EPOCHS = 6
BATCHES_PER_EPOCH = 38  # 600 samples in batches of 16
WHAT_TO_REGISTER = "registered no state: call gandiva.torch.register(model, optimizer, ...)"


def example(result, epochs=EPOCHS):
    return [PYTHON, EXAMPLE, "--epochs", str(epochs), "--result", str(result)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The example run once, unmanaged: seeded, so every test's run must match it."""
    out = tmp_path_factory.mktemp("reference") / "reference.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), OMP_NUM_THREADS="1")
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    subprocess.run(example(out), check=True, env=env, capture_output=True, timeout=300)
    return json.loads(out.read_text())


def same_training(ref, got):
    assert len(got["losses"]) == len(ref["losses"]) == EPOCHS * BATCHES_PER_EPOCH
    assert got["losses"] == ref["losses"], "loss history differs"
    assert got["weights_sha256"] == ref["weights_sha256"], "final weights differ"
    assert got["lr"] == ref["lr"]


@pytest.fixture
def nodes(tmp_path):
    (tmp_path / "keys").mkdir()
    made = {n: Node(tmp_path, n) for n in ("a", "b")}
    for n, node in made.items():
        node.start([o.public for o in made.values()],
                   [(o.name, o.tcp, o.public) for o in made.values() if o is not node])
    yield made
    for node in made.values():
        node.stop()


def kill_job_processes(marker):
    for pid in pids_running(marker):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def test_checkpoint_mid_epoch_then_restore_trains_bitwise_the_same(nodes, tmp_path, reference):
    ref = reference
    a = nodes["a"]
    first = tmp_path / "first.json"
    run = a.run(*example(first), name="loop")
    # Held mid-run (a slice ends the same way), so that the checkpoint lands in epoch 2.
    wait_for(lambda: a.job(1).get("iterations", 0) > BATCHES_PER_EPOCH + 5, what="training")
    a.cli("suspend", "1")
    ckpt = tmp_path / "ckpt"
    r = a.cli("checkpoint", "1", "--to", str(ckpt))
    assert "checkpointed" in r.stdout
    run.kill()
    kill_job_processes(str(first))
    run.wait(timeout=30)

    out = tmp_path / "restored.json"
    restored = subprocess.run([os.path.join(BUILD, "cli", "gandiva"), "run", "--name", "again",
                               "--restore", str(ckpt), "--", *example(out)],
                              env=a.env, capture_output=True, text=True, timeout=300)
    assert restored.returncode == 0, restored.stderr
    got = json.loads(out.read_text())
    epoch, position = got["resumed_at"]
    assert epoch >= 1 and 0 < position <= BATCHES_PER_EPOCH, got["resumed_at"]
    same_training(ref, got)


def test_migrated_mid_epoch_trains_bitwise_the_same(nodes, tmp_path, reference):
    ref = reference
    a, b = nodes["a"], nodes["b"]
    out = tmp_path / "moved.json"
    run = a.run(*example(out), name="loop")
    wait_for(lambda: a.job(1).get("iterations", 0) > BATCHES_PER_EPOCH + 5, what="training")
    # Held while b warms up its copy (imports, worker start-up), so the move is mid-run.
    a.cli("suspend", "1")
    op = json.loads(a.cli("migrate", "1", "--to", "b", "--json").stdout)
    assert op["state"] == "done", op
    assert run.wait(timeout=60) == 0
    wait_for(lambda: b.job(op["to_job"]).get("state") in ("exited", "failed"),
             timeout=300, what="the job to finish on b")
    assert b.job(op["to_job"])["state"] == "exited", b.read_log()
    got = json.loads(out.read_text())
    epoch, position = got["resumed_at"]
    assert epoch >= 1 and 0 < position <= BATCHES_PER_EPOCH, got["resumed_at"]
    same_training(ref, got)


def test_a_job_that_registered_no_state_is_not_checkpointed_or_moved(nodes, tmp_path):
    a = nodes["a"]
    out = tmp_path / "interval.json"
    run = a.run(PYTHON, INTERVAL_JOB, "--iterations", "300", "--work-ms", "10", "--out", str(out),
                name="stateless")
    wait_for(lambda: a.job(1).get("iterations", 0) > 5, what="training")

    ckpt = tmp_path / "ckpt"
    r = a.cli("checkpoint", "1", "--to", str(ckpt), check=False)
    assert r.returncode != 0
    assert f"job 1 {WHAT_TO_REGISTER}" in r.stderr, r.stderr
    op = a.job(1)["operation"]
    assert op["kind"] == "checkpoint" and op["state"] == "failed", op
    assert WHAT_TO_REGISTER in op["error"], op
    assert not (ckpt / "state.gdck").exists()

    r = a.cli("migrate", "1", "--to", "b", check=False)
    assert r.returncode != 0
    assert f"job 1 {WHAT_TO_REGISTER}" in r.stderr, r.stderr
    assert not [j for j in nodes["b"].jobs()], "nothing was started on b"

    # Neither left it held: it trains on to its end.
    assert run.wait(timeout=120) == 0, run.stderr.read()
    result = json.loads(out.read_text())
    assert result["done"] and len(result["intervals"]) == 300
    assert a.job(1)["state"] == "exited"
