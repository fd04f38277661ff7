"""Memory caps end to end: `gandiva run --gpu-memory SIZE` (attached and --detach)
hands the cap to the job, and the shim (preloaded, with the stand-in libcuda.so.1, a
CPU test double) enforces it: memcap_app --role hog exits 0 only if it was told its
cap as the device's memory and refused every allocation beyond it on a device with
room. Malformed sizes and --no-shim are usage errors."""

import subprocess

import pytest

from conftest import GANDIVA
from standin_gpu import MEMCAP_APP as APP, SHIM, STANDIN_DIR, STANDIN_DRIVER, built

pytestmark = built(SHIM, STANDIN_DRIVER, APP)


@pytest.fixture
def daemon(daemon_factory):
    d = daemon_factory()
    d.env["LD_LIBRARY_PATH"] = STANDIN_DIR
    d.env["GD_STANDIN_DEVICE_MEM"] = str(1 << 30)  # room for far more than the caps
    d.env["GANDIVA_SHIM"] = SHIM
    return d


def test_run_hands_the_cap_to_the_job_and_the_shim_enforces_it(daemon):
    r = daemon.cli("run", "--shim", "--gpu-memory", "384MiB", "--", APP, "--role", "hog",
                   check=False, timeout=60)
    assert r.returncode == 0, r.stderr


def test_a_job_launched_with_a_cap_is_capped_too(daemon):
    r = daemon.cli("run", "--detach", "--shim", "--gpu-memory", "256MiB", "--", APP, "--role",
                   "hog")
    job = r.stdout.strip()
    waited = daemon.cli("wait", job, "--timeout-s", "60", check=False, timeout=90)
    assert waited.returncode == 0, daemon.cli("logs", job, "--stderr").stdout
    record = next(j for j in daemon.cli_json("ps", "--all") if str(j["id"]) == job)
    assert record["gpu_memory_bytes"] == 256 << 20  # what gandivad packs by
    assert "/256" in daemon.cli("ps", "--all").stdout  # DEV_MEM: held/cap


def test_an_uncapped_job_has_no_cap_on_record(daemon):
    daemon.cli("run", "--", "true")
    assert [j["gpu_memory_bytes"] for j in daemon.cli_json("ps", "--all")] == [0]


def test_the_shim_reads_a_cap_set_by_hand_and_only_the_shim_enforces_it(daemon):
    env = dict(daemon.env, GANDIVA_GPU_MEMORY_BYTES=str(384 << 20))
    r = subprocess.run([GANDIVA, "run", "--shim", "--", APP, "--role", "hog"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr  # set by hand, the shim reads it just the same
    # Without the shim nothing caps it: the hog's checks fail.
    r = subprocess.run([GANDIVA, "run", "--no-shim", "--", APP, "--role", "hog"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0


@pytest.mark.parametrize("size", ["4GB", "0", "1.5GiB", "lots"])
def test_a_size_that_is_not_one_is_a_usage_error(daemon, size):
    r = daemon.cli("run", "--gpu-memory", size, "--", "true", check=False)
    assert r.returncode == 2
    assert "--gpu-memory" in r.stderr and "512MiB" in r.stderr


def test_a_cap_without_the_shim_is_a_usage_error(daemon):
    r = daemon.cli("run", "--no-shim", "--gpu-memory", "1GiB", "--", "true", check=False)
    assert r.returncode == 2
    assert "needs the CUDA shim" in r.stderr
