"""Restorable training: a checkpoint written at iteration 30 and restored by a
new process (GANDIVA_RESTORE) continues bitwise identically to an uninterrupted
run, for the PyTorch and the libtorch example; a damaged checkpoint makes the
restoring process exit 75 with a clear message instead of starting over."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
BUILD = os.environ.get("GANDIVA_BUILD_DIR", os.path.join(ROOT, "build"))
PYDIR = os.path.join(BUILD, "python")
CNN = os.path.join(ROOT, "examples", "pytorch", "train_cnn.py")
MLP = os.path.join(BUILD, "examples", "train_mlp")
sys.path.insert(0, PYDIR)

EXIT_RESTORE_FAILED = 75


def run(cmd, restore=None, timeout=180):
    env = dict(os.environ, PYTHONPATH=PYDIR)
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    env.pop("GANDIVA_RESTORE", None)
    if restore:
        env["GANDIVA_RESTORE"] = str(restore)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def cnn(*args):
    return ["/usr/bin/python3", CNN, "--report-every", "20", *map(str, args)]


def mlp(*args):
    if not os.path.exists(MLP):
        pytest.skip("train_mlp not built (libtorch missing)")
    return [MLP, "--report-every", "20", *map(str, args)]


def load(path):
    with open(path) as f:
        return json.load(f)


@pytest.mark.parametrize("example", [cnn, mlp], ids=["pytorch_cnn", "libtorch_mlp"])
def test_restored_run_continues_bitwise(tmp_path, example):
    ckpt = tmp_path / "ckpt"
    # One run that checkpoints at 30 and goes on to 60: it is also the
    # uninterrupted reference, so the checkpoint must not perturb it...
    a = run(example("--iterations", 60, "--seed", 3, "--checkpoint-at", 30,
                    "--checkpoint-dir", ckpt, "--result", tmp_path / "a.json"))
    assert a.returncode == 0, a.stderr
    assert (ckpt / "state.gdck").exists()
    assert "checkpoint at iteration 30" in a.stdout
    # ...which a run without any checkpoint confirms.
    c = run(example("--iterations", 60, "--seed", 3, "--result", tmp_path / "c.json"))
    assert c.returncode == 0, c.stderr
    # A new process restores the state at its first boundary and continues.
    b = run(example("--iterations", 60, "--seed", 3, "--result", tmp_path / "b.json"),
            restore=ckpt)
    assert b.returncode == 0, b.stderr
    assert "restored" in b.stderr
    assert "iter    40" in b.stdout and "iter    20" not in b.stdout  # it did not start over

    ra, rb, rc = load(tmp_path / "a.json"), load(tmp_path / "b.json"), load(tmp_path / "c.json")
    assert rb["restored_at_iteration"] == 30
    assert len(rb["losses"]) == 60
    assert rb["losses"] == ra["losses"] == rc["losses"]
    assert rb["parameters_sha256"] == ra["parameters_sha256"] == rc["parameters_sha256"]


@pytest.mark.parametrize("example", [cnn, mlp], ids=["pytorch_cnn", "libtorch_mlp"])
def test_damaged_checkpoint_exits_75_before_training(tmp_path, example):
    ckpt = tmp_path / "ckpt"
    a = run(example("--iterations", 5, "--checkpoint-at", 5, "--checkpoint-dir", ckpt))
    assert a.returncode == 0, a.stderr
    path = ckpt / "state.gdck"
    data = bytearray(path.read_bytes())

    data[len(data) // 2] ^= 0x04  # one bit, in the middle of the state
    path.write_bytes(bytes(data))
    r = run(example("--iterations", 10), restore=ckpt)
    assert r.returncode == EXIT_RESTORE_FAILED, r.stdout + r.stderr
    assert "cannot restore from file:" in r.stderr
    assert "corrupt chunk 1 " in r.stderr and "section 'torch'" in r.stderr or \
        "corrupt chunk 1 " in r.stderr and "section 'mlp'" in r.stderr, r.stderr
    assert "[cnn] iter" not in r.stdout and "[mlp] iter" not in r.stdout

    data[len(data) // 2] ^= 0x04
    path.write_bytes(bytes(data[: len(data) - 20]))  # cut inside the end frame
    r = run(example("--iterations", 10), restore=ckpt)
    assert r.returncode == EXIT_RESTORE_FAILED
    assert "truncated checkpoint" in r.stderr, r.stderr

    path.unlink()
    r = run(example("--iterations", 10), restore=ckpt)
    assert r.returncode == EXIT_RESTORE_FAILED
    assert "no checkpoint at" in r.stderr, r.stderr


def python(code, restore=None):
    return run(["/usr/bin/python3", "-c", textwrap.dedent(code)], restore=restore, timeout=60)


def test_register_state_round_trip_and_errors(tmp_path):
    save = python(f"""
        import gandiva
        gandiva.register_state("blob", lambda: bytes(range(256)) * 40000, lambda b: None)
        gandiva.register_state("small", lambda: bytearray(b"abc"), lambda b: None)
        n = gandiva.checkpoint({str(tmp_path)!r})
        assert n > 256 * 40000, n
        gandiva.register_state("broken", lambda: 1 / 0, lambda b: None)
        try:
            gandiva.checkpoint({str(tmp_path)!r})
            raise SystemExit("no error")
        except gandiva.GandivaError as e:
            assert "saving section 'broken'" in str(e) and "ZeroDivisionError" in str(e), e
        try:
            gandiva.register_state("blob", bytes, print)
            raise SystemExit("duplicate accepted")
        except KeyError:
            pass
        print("ok")
    """)
    assert save.returncode == 0 and save.stdout == "ok\n", save.stderr

    load = python("""
        import gandiva
        got = {}
        gandiva.register_state("blob", bytes, lambda b: got.__setitem__("blob", b))
        gandiva.register_state("small", bytes, lambda b: got.__setitem__("small", b))
        gandiva.step()   # the first boundary: GANDIVA_RESTORE loads here
        assert got["blob"] == bytes(range(256)) * 40000
        assert got["small"] == b"abc"
        print("ok")
    """, restore=tmp_path)
    assert load.returncode == 0 and load.stdout == "ok\n", load.stderr

    # A section nobody registered is an error, not silently skipped.
    unknown = python("""
        import gandiva
        gandiva.register_state("blob", bytes, lambda b: None)
        gandiva.step()
        print("continued")
    """, restore=tmp_path)
    assert unknown.returncode == EXIT_RESTORE_FAILED
    assert "section 'small'" in unknown.stderr and "no registered loader" in unknown.stderr
    assert "continued" not in unknown.stdout

    # A load function that raises fails the restore with its message.
    raising = python("""
        import gandiva
        def bad(b): raise ValueError("wrong shape")
        gandiva.register_state("blob", bytes, bad)
        gandiva.register_state("small", bytes, lambda b: None)
        gandiva.step()
    """, restore=tmp_path)
    assert raising.returncode == EXIT_RESTORE_FAILED
    assert "loading section 'blob': load function raised ValueError: wrong shape" in raising.stderr


def test_torch_register_must_precede_attach_and_counts_iterations():
    r = python("""
        import torch, gandiva, gandiva.torch
        m = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        state = gandiva.torch.register(m, opt, extra={"n": 1})
        gandiva.torch.attach(opt)
        for _ in range(3):
            m(torch.ones(1, 2)).sum().backward(); opt.step()
        assert state.iteration == 3, state.iteration
        state.unregister()
        opt2 = torch.optim.SGD(m.parameters(), lr=0.1)
        gandiva.torch.attach(opt2)
        try:
            gandiva.torch.register(m, opt2)
            raise SystemExit("register after attach accepted")
        except RuntimeError as e:
            assert "before attach" in str(e)
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
