"""Which GPUs a job may see: gandivad sets CUDA_VISIBLE_DEVICES to the GPUs it
placed the job on (without it, a job on gpu1 runs on the first GPU CUDA
shows it), in the job's device order; on CPU devices it sets nothing. The
GPUs are configured (`--devices gpu:2`), and the last test runs a real
driver-API program against the CPU stand-in for libcuda (a test double:
there is no GPU here), which reads CUDA_VISIBLE_DEVICES as the driver does."""

import json
import os
import shutil
import subprocess

from conftest import BUILD
from standin_gpu import FATBIN as IMAGE, PROCADDR_APP as APP, STANDIN_DIR, STANDIN_DRIVER, built

SHOW = ["/bin/sh", "-c", 'echo "visible=${CUDA_VISIBLE_DEVICES-unset}"']


def shown(d, *flags):
    """What a job started with `gandiva run FLAGS` (in the foreground) sees."""
    r = d.cli("run", "--no-shim", *flags, "--", *SHOW)
    return r.stdout.strip().splitlines()[-1]


def test_a_job_sees_the_gpus_it_was_placed_on(daemon_factory):
    d = daemon_factory("--devices", "gpu:2,cpu:1")
    assert shown(d, "--device", "gpu1") == "visible=1"
    assert shown(d, "--device", "gpu0") == "visible=0"
    assert shown(d, "--devices", "gpu1,gpu0") == "visible=1,0"  # rank k uses the k-th
    assert shown(d, "--device", "cpu0") == "visible=unset"


def test_a_launched_job_sees_its_gpu_too(daemon_factory):
    d = daemon_factory("--devices", "gpu:2")
    r = d.cli("run", "--detach", "--json", "--no-shim", "--device", "gpu1", "--", *SHOW)
    job = json.loads(r.stdout)["job"]
    out = d.cli("logs", str(job), "--follow", timeout=30).stdout
    assert "visible=1" in out, out


def test_gpus_are_numbered_within_what_gandivad_itself_may_see(daemon_factory, tmp_path):
    # Under Slurm, say, gandivad runs with CUDA_VISIBLE_DEVICES=4,6: its gpu1 is GPU 6.
    os.environ["CUDA_VISIBLE_DEVICES"] = "4,6"
    try:
        d = daemon_factory("--devices", "gpu:2")
    finally:
        del os.environ["CUDA_VISIBLE_DEVICES"]
    d.env.pop("CUDA_VISIBLE_DEVICES", None)
    assert shown(d, "--device", "gpu1") == "visible=6"
    if not shutil.which("nvidia-smi"):  # no GPU here: gandivad says so at start
        assert "--devices names 2 GPU(s) but NVML finds 0 on this node" in d.read_log(), d.read_log()
    # More GPUs than it may see is a configuration error, said at start.
    r = subprocess.run([os.path.join(BUILD, "node", "gandivad"), "--devices", "gpu:3",
                        "--endpoint", f"ipc://{tmp_path}/other.sock"],
                       env=dict(os.environ, CUDA_VISIBLE_DEVICES="4,6"),
                       capture_output=True, text=True, timeout=10)
    assert r.returncode != 0
    assert "gpu2 is not in this process's CUDA_VISIBLE_DEVICES (4,6)" in r.stdout + r.stderr


@built(STANDIN_DRIVER, APP, IMAGE)
def test_the_stand_in_driver_hides_a_gpu_not_listed(tmp_path):
    # The stand-in has one GPU, as a one-GPU machine: a process told to use
    # GPU 1 finds no device at cuInit, as with NVIDIA's driver.
    def run(visible):
        env = dict(os.environ, LD_LIBRARY_PATH=STANDIN_DIR)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        return subprocess.run([APP, "--image", IMAGE, "--iterations", "3"], env=env,
                              capture_output=True, text=True, timeout=60)

    for visible in (None, "0", "0,1", "GPU-5374616e"):
        r = run(visible)
        assert r.returncode == 0, (visible, r.stderr)
    for visible in ("1", "1,0", "", "GPU-0000"):
        r = run(visible)
        assert r.returncode != 0, visible
        assert "cuInit" in r.stderr and "100" in r.stderr, (visible, r.stderr)  # NO_DEVICE
