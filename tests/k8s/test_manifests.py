"""packaging/kubernetes: the manifests parse, hang together (volumes, the
service account, the resource the Job asks for is the plugin's), and name only
flags that the tools built here take. No Kubernetes runs here: nothing is
applied to a cluster."""

import os
import re
import subprocess

import pytest

from conftest import BUILD, GANDIVA, PLUGIN

yaml = pytest.importorskip("yaml", reason="needs python3-yaml")

MANIFESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "packaging",
                         "kubernetes")


def load(name):
    with open(os.path.join(MANIFESTS, name)) as f:
        return list(yaml.safe_load_all(f))


def objects():
    out = {}
    for name in sorted(os.listdir(MANIFESTS)):
        if name.endswith(".yaml"):
            for doc in load(name):
                assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"], name
                out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def daemonset():
    return objects()[("DaemonSet", "gandiva-node")]


def containers(ds):
    spec = ds["spec"]["template"]["spec"]
    return {c["name"]: c for c in spec["containers"] + spec.get("initContainers", [])}


def test_every_manifest_parses_and_the_daemonset_is_whole():
    objs = objects()
    ds = daemonset()
    spec = ds["spec"]["template"]["spec"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= \
        ds["spec"]["template"]["metadata"]["labels"].items()
    sa = spec["serviceAccountName"]
    assert ("ServiceAccount", sa) in objs
    assert objs[("ServiceAccount", sa)]["metadata"]["namespace"] == ds["metadata"]["namespace"]
    assert ("Namespace", ds["metadata"]["namespace"]) in objs
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert {"/var/lib/kubelet/device-plugins", "/var/run/cdi", "/var/lib/gandiva",
            "/run/gandiva"} <= set(host_paths.values())
    for c in containers(ds).values():
        for m in c.get("volumeMounts", []):
            assert m["name"] in {v["name"] for v in spec["volumes"]}, (c["name"], m)
            # Same path in and out (the CDI spec names host paths found from inside),
            # but for the init container's copy target.
            if c["name"] != "install-on-host":
                assert m["mountPath"] == host_paths[m["name"]], (c["name"], m)


def test_the_job_asks_for_the_plugins_resource():
    job = objects()[("Job", "gandiva-example-train")]
    [c] = job["spec"]["template"]["spec"]["containers"]
    assert c["resources"]["limits"] == {"gandiva.io/gpu": 1}
    plugin = " ".join(containers(daemonset())["device-plugin"]["command"])
    # The plugin's default resource, or the one it is given.
    m = re.search(r"--resource\s+(\S+)", plugin)
    assert (m.group(1) if m else "gandiva.io/gpu") == "gandiva.io/gpu"


def flags_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", text))


def help_of(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    return r.stdout + r.stderr


def test_the_manifests_name_only_flags_the_tools_take():
    cs = containers(daemonset())
    gandivad = os.path.join(BUILD, "node", "gandivad")
    if not os.path.exists(gandivad) or not os.path.exists(GANDIVA):
        pytest.skip("gandivad and gandiva are not built")
    assert flags_in(" ".join(cs["gandivad"]["command"])) <= flags_in(help_of([gandivad, "--help"]))
    script = cs["device-plugin"]["command"][-1]
    cdi_part, plugin_part = script.split("gandiva-k8s-device-plugin")
    assert flags_in(cdi_part) <= flags_in(help_of([GANDIVA, "cdi", "--help"]))
    if os.path.exists(PLUGIN):
        assert flags_in(plugin_part) <= flags_in(help_of([PLUGIN, "--help"]))
    job = objects()[("Job", "gandiva-example-train")]
    run = job["spec"]["template"]["spec"]["containers"][0]["command"][-1].split(" -- ")[0]
    # `gandiva --help` lists run's flags (`gandiva run` has no --help of its own).
    assert flags_in(run) <= flags_in(help_of([GANDIVA, "--help"]))
