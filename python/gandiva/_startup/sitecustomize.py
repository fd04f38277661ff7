"""gandiva's start-up hook for the jobs it starts (docs/python.md, "Unmodified
PyTorch scripts").

gandiva puts this folder first on a job's PYTHONPATH, so Python's `site`
imports this file as `sitecustomize`. It does two things, and nothing else:

1. Once the job imports `torch` (whenever it does; torch is not imported
   here), it makes each optimizer step an iteration boundary
   (gandiva._autotorch.install). Only in a job gandiva started
   (GANDIVA_CONTROL_BLOCK set) and unless GANDIVA_AUTO_TORCH=0.
2. It runs the `sitecustomize` this file hides: the next one on sys.path
   (Debian's /usr/lib/python3.X/sitecustomize.py, a virtualenv's, the
   user's), as that module. A `usercustomize` is not touched (gandiva ships
   none), so Python runs the user's as always.

Whatever goes wrong here is said on stderr and the job runs on unhooked.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# .../gandiva/_startup -> the folder that holds the gandiva package.
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(_HERE))


def _say(what, error):
    print(f"gandiva: {what}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)


def _on_torch_imported(torch_module):
    try:
        if _PACKAGE_PARENT not in sys.path:
            sys.path.append(_PACKAGE_PARENT)  # last: the script's own modules come first
        from gandiva import _autotorch
        _autotorch.install(torch_module)
    except Exception as e:  # never break the job over its boundaries
        _say("optimizer steps will not mark iteration boundaries", e)


class _LoaderThenHook:
    """torch's own loader, then the hook once torch's module has run."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _on_torch_imported(module)

    def __getattr__(self, name):  # get_code, get_resource_reader, ...: torch's loader's
        return getattr(self._loader, name)


class _TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: on the import of `torch` it asks the finders after
    it, and hands back their spec with the loader wrapped. Once."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _LoaderThenHook(spec.loader)
        return spec


def _enabled():
    switch = os.environ.get("GANDIVA_AUTO_TORCH", "1").strip().lower()
    return switch not in ("0", "off", "false", "no") and bool(
        os.environ.get("GANDIVA_CONTROL_BLOCK"))


def _watch_for_torch():
    if "torch" in sys.modules:
        _on_torch_imported(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportWatcher())


def _run_hidden_sitecustomize():
    """Runs the next `sitecustomize` on sys.path as `sitecustomize`."""
    here = os.path.normcase(_HERE)
    rest = [p for p in sys.path if os.path.normcase(os.path.abspath(p or os.curdir)) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # Python's site says so and goes on too
        _say(f"error in {spec.origin}", e)


if _enabled():
    try:
        _watch_for_torch()
    except Exception as e:
        _say("optimizer steps will not mark iteration boundaries", e)
_run_hidden_sitecustomize()
