"""Fixtures for tests/k8s: the integration suites' real gandivad (tests/integration's
Daemon and daemon_factory, loaded under another name), and the paths of the
tools built here."""

import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "integration_conftest", os.path.join(HERE, "..", "integration", "conftest.py"))
integration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(integration)

BUILD = integration.BUILD
GANDIVA = integration.GANDIVA
PLUGIN = os.path.join(BUILD, "k8s", "gandiva-k8s-device-plugin")
PROTO = os.path.join(HERE, "..", "..", "k8s", "device_plugin", "deviceplugin.proto")
SCHEMA = os.path.join(HERE, "cdi_schema.json")
daemon_factory = integration.daemon_factory
wait_for = integration.wait_for
