"""Device memory of a CUDA driver-API program (under the real shim and the stand-in
libcuda.so.1, a CPU test double) carried by a checkpoint + restore in a new process
and by a migration between two gandivad nodes: the final digest of every device
buffer must equal that of a run never interrupted."""

import json
import os
import subprocess

import pytest

from conftest import GANDIVA, wait_for
from nodes import Node
from standin_gpu import CKPT_APP as APP, CUBIN, SHIM, STANDIN_DIR, STANDIN_DRIVER, built

ITERATIONS = 150
SLEEP_MS = 15

pytestmark = built(SHIM, STANDIN_DRIVER, APP, CUBIN)


def app_cmd(result, sleep_ms=SLEEP_MS, first_bytes=None):
    cmd = [APP, "--image", CUBIN, "--iterations", str(ITERATIONS), "--sleep-ms", str(sleep_ms),
           "--result", str(result)]
    if first_bytes:
        cmd += ["--first-bytes", str(first_bytes)]
    return cmd


def job_env(node):
    """The job's environment: the stand-in driver first on the library path and the
    shim preloaded, both carried to a migration's destination with the rest."""
    env = dict(node.env)
    env["LD_LIBRARY_PATH"] = STANDIN_DIR + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["LD_PRELOAD"] = SHIM
    return env


@pytest.fixture
def reference(tmp_path):
    """The same program run once under the shim, unmanaged and never interrupted."""
    out = tmp_path / "reference.json"
    env = dict(os.environ, LD_LIBRARY_PATH=STANDIN_DIR, LD_PRELOAD=SHIM)
    env.pop("GANDIVA_CONTROL_BLOCK", None)
    subprocess.run(app_cmd(out, sleep_ms=0), check=True, env=env, capture_output=True, timeout=60)
    ref = json.loads(out.read_text())
    assert ref["iterations"] == ITERATIONS and ref["start_iteration"] == 0
    return ref


@pytest.fixture
def nodes(tmp_path):
    (tmp_path / "keys").mkdir()
    made = []

    def make(*names):
        ns = {n: Node(tmp_path, n) for n in names}
        for n in ns.values():
            n.start([o.public for o in ns.values()],
                    [(o.name, o.tcp, o.public) for o in ns.values() if o is not n])
        made.extend(ns.values())
        return ns

    yield make
    for n in made:
        n.stop()


def start(node, cmd, *flags, name="cuda"):
    return subprocess.Popen([GANDIVA, "run", "--name", name, *flags, "--", *cmd], env=job_env(node),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_job(node, run, job_id):
    """Ends the job process (by its pid) and its `gandiva run`."""
    pid = node.job(job_id)["pid"]
    run.kill()
    run.wait(timeout=10)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    wait_for(lambda: node.job(job_id)["state"] in ("exited", "failed"), what="the killed job to end")


def test_checkpoint_kill_restore_keeps_every_device_byte(nodes, reference, tmp_path):
    a = nodes("a")["a"]
    out = tmp_path / "result.json"
    run = start(a, app_cmd(out), "--shim")
    wait_for(lambda: a.first_iterations() > 40, what="iterations on a")
    source = a.job(1)
    assert source["device_allocations"] == 5 and source["device_bytes"] > 4 << 20, source
    ckpt = tmp_path / "ckpt"
    r = a.cli("checkpoint", "1", "--to", str(ckpt))
    assert "checkpointed" in r.stdout
    kill_job(a, run, 1)
    assert not out.exists(), "the original finished before it was killed"

    restored = start(a, app_cmd(out), "--restore", str(ckpt), "--shim", name="again")
    assert restored.wait(timeout=60) == 0, restored.stderr.read()
    result = json.loads(out.read_text())
    assert 0 < result["start_iteration"] < ITERATIONS, result
    assert result["iterations"] == ITERATIONS
    assert result["buffers"] == reference["buffers"]
    assert result["digest"] == reference["digest"]


def test_restore_into_different_allocations_fails_clearly(nodes, tmp_path):
    a = nodes("a")["a"]
    out = tmp_path / "result.json"
    run = start(a, app_cmd(out), "--shim")
    wait_for(lambda: a.first_iterations() > 5, what="iterations on a")
    ckpt = tmp_path / "ckpt"
    a.cli("checkpoint", "1", "--to", str(ckpt))
    kill_job(a, run, 1)
    # The new process allocates 2 MiB where the saved one had 1 MiB: nothing is loaded.
    restored = start(a, app_cmd(out, first_bytes=2 << 20), "--restore", str(ckpt), "--shim", name="other")
    assert restored.wait(timeout=60) == 75
    err = restored.stderr.read()
    job_log = (a.dir / "gandivad.log").read_text()
    text = err + job_log
    assert "device allocation 0 differs" in text and "1048576" in text and "2097152" in text, text
    assert not out.exists()


def test_migrated_cuda_job_keeps_every_device_byte(nodes, reference, tmp_path):
    ns = nodes("a", "b")
    a, b = ns["a"], ns["b"]
    out = tmp_path / "result.json"
    run = start(a, app_cmd(out))  # LD_PRELOAD is in the job's environment: b preloads the shim too
    wait_for(lambda: a.first_iterations() > 30, what="iterations on a")
    source = a.job(1)
    op = json.loads(a.cli("migrate", "1", "--to", "b", "--json").stdout)
    assert op["state"] == "done", op
    dest = b.job(op["to_job"])
    assert dest["device_bytes"] == source["device_bytes"], (source, dest)
    assert dest["device_allocations"] == source["device_allocations"] == 5
    assert run.wait(timeout=30) == 0
    wait_for(lambda: b.job(op["to_job"])["state"] in ("exited", "failed"), what="the job to finish on b")
    assert b.job(op["to_job"])["state"] == "exited", b.read_log()
    result = json.loads(out.read_text())
    assert 0 < result["start_iteration"] < ITERATIONS, result
    assert result["iterations"] == ITERATIONS
    assert result["buffers"] == reference["buffers"]
    assert result["digest"] == reference["digest"]
