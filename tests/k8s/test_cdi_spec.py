"""`gandiva cdi generate`: the CDI spec of a real gandivad's devices, and of GPU
devices with device nodes made here, validated against the CDI schema
(tests/k8s/cdi_schema.json, written from the CDI specification's text), and
what its edits give a container."""

import json
import os
import stat
import subprocess

import pytest

from conftest import GANDIVA, SCHEMA, daemon_factory  # noqa: F401
from cdi_apply import edits_for, host_path_of

jsonschema = pytest.importorskip("jsonschema", reason="needs python3-jsonschema")


def validate(spec):
    with open(SCHEMA) as f:
        schema = json.load(f)
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(spec, schema, cls=jsonschema.Draft7Validator)


def generate(*args, check=True):
    r = subprocess.run([GANDIVA, "cdi", "generate", *args], capture_output=True, text=True,
                       timeout=30)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_spec_of_a_running_gandivad(daemon_factory, tmp_path):  # noqa: F811
    d = daemon_factory("--devices", "cpu:2")
    out = tmp_path / "cdi" / "gandiva.json"
    out.parent.mkdir()
    generate("--endpoint", d.endpoint, "--output", str(out))
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644
    assert not [p for p in os.listdir(out.parent) if p != "gandiva.json"]  # no temporary left
    spec = json.loads(out.read_text())
    validate(spec)
    assert spec["kind"] == "gandiva.io/gpu"
    assert [dev["name"] for dev in spec["devices"]] == ["cpu0", "cpu1", "all"]

    env, mounts, nodes = edits_for(spec, ["gandiva.io/gpu=cpu1"])
    assert env["GANDIVA_DEVICES"] == "cpu1"
    assert env["GANDIVA_ENDPOINT"] == "ipc:///run/gandiva/gd.sock"
    assert "LD_PRELOAD" not in env and nodes == []  # a CPU device: no shim, no device node
    # Every mount's host side exists, and reaches what the container is told.
    for m in mounts:
        assert os.path.exists(m["hostPath"]), m
        assert m["type"] == "bind"
    assert host_path_of(mounts, "/run/gandiva/gd.sock") == d.endpoint[len("ipc://"):]
    hook, package_root = env["PYTHONPATH"].split(":")
    assert os.path.isfile(host_path_of(mounts, hook + "/sitecustomize.py"))
    assert os.path.isfile(host_path_of(mounts, package_root + "/gandiva/__init__.py"))
    tool = host_path_of(mounts, "/opt/gandiva/bin/gandiva")
    assert os.path.samefile(tool, GANDIVA)
    # gandivad's directory of control blocks for jobs in containers, where it says it has one.
    import gandiva
    blocks = gandiva.Client(d.endpoint).hello().get("blocks_dir")
    if blocks:
        assert host_path_of(mounts, env["GANDIVA_BLOCKS_DIR"]) == blocks
    else:
        assert "GANDIVA_BLOCKS_DIR" not in env
    all_env, _, _ = edits_for(spec, ["gandiva.io/gpu=all"])
    assert all_env["GANDIVA_DEVICES"] == "cpu0,cpu1"


def make_gpu_nodes(dev, gpus):
    dev.mkdir()
    for i in range(gpus):
        os.mknod(dev / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(195, i))
    os.mknod(dev / "nvidiactl", 0o666 | stat.S_IFCHR, os.makedev(195, 255))


def test_gpu_devices_bring_the_shim_and_their_device_nodes(tmp_path):
    make_gpu_nodes(tmp_path / "dev", 2)
    shim = tmp_path / "libgandiva_shim.so"
    shim.write_bytes(b"")
    r = generate("--devices", "gpu0,gpu1", "--dev-dir", str(tmp_path / "dev"), "--shim", str(shim),
                 "--endpoint", f"ipc://{tmp_path}/gd.sock")
    spec = json.loads(r.stdout)
    validate(spec)
    assert [dev["name"] for dev in spec["devices"]] == ["0", "1", "all"]
    env, mounts, nodes = edits_for(spec, ["gandiva.io/gpu=1"])
    assert env["GANDIVA_DEVICES"] == "gpu1"
    assert env["LD_PRELOAD"] == "/opt/gandiva/lib/libgandiva_shim.so"
    assert host_path_of(mounts, env["LD_PRELOAD"]) == str(shim)
    by_path = {n["path"]: n for n in nodes}
    assert set(by_path) == {"/dev/nvidia1", "/dev/nvidiactl"}  # not gpu0's, no uvm here
    assert (by_path["/dev/nvidia1"]["type"], by_path["/dev/nvidia1"]["major"],
            by_path["/dev/nvidia1"]["minor"]) == ("c", 195, 1)
    assert by_path["/dev/nvidia1"]["hostPath"] == str(tmp_path / "dev" / "nvidia1")
    _, _, all_nodes = edits_for(spec, ["gandiva.io/gpu=all"])
    assert {"/dev/nvidia0", "/dev/nvidia1"} <= {n["path"] for n in all_nodes}


def test_a_gpu_without_its_device_node_is_refused(tmp_path):
    make_gpu_nodes(tmp_path / "dev", 1)
    r = generate("--devices", "gpu0,gpu1", "--dev-dir", str(tmp_path / "dev"),
                 "--endpoint", f"ipc://{tmp_path}/gd.sock", check=False)
    assert r.returncode == 1
    assert "gpu1" in r.stderr and "nvidia1" in r.stderr
    r = generate("--devices", "cpu0", "--endpoint", "tcp://127.0.0.1:1", check=False)
    assert r.returncode == 2 and "ipc://" in r.stderr


@pytest.mark.parametrize("mutate", [
    lambda s: s.update(unknown=1),
    lambda s: s.update(kind="gandiva"),
    lambda s: s.update(cdiVersion="0.5"),
    lambda s: s.update(devices=[]),
    lambda s: s["devices"][0].update(name="-cpu0"),
    lambda s: s["containerEdits"]["env"].append("NO_EQUALS_SIGN"),
    lambda s: s["containerEdits"]["mounts"][0].pop("containerPath"),
])
def test_the_schema_refuses_what_the_spec_forbids(tmp_path, mutate):
    spec = json.loads(generate("--devices", "cpu0", "--endpoint",
                               f"ipc://{tmp_path}/gd.sock").stdout)
    validate(spec)
    mutate(spec)
    with pytest.raises(jsonschema.ValidationError):
        validate(spec)
