"""The CUDA shim and the stand-in driver (tests/shim/standin: a test double for
NVIDIA's libcuda.so.1, built from the driver's documentation) as the GPU suites
here use them: where the build tree puts them, and a skip for a build without
them (no CUDA toolkit at configure time)."""

import os

import pytest

from conftest import BUILD

SHIM = os.path.join(BUILD, "shim", "libgandiva_shim.so")
STANDIN_DIR = os.path.join(BUILD, "tests", "shim", "standin")  # on LD_LIBRARY_PATH: libcuda.so.1
STANDIN_DRIVER = os.path.join(STANDIN_DIR, "libcuda.so.1")
_PROGRAMS = os.path.join(BUILD, "tests", "shim")
PROCADDR_APP = os.path.join(_PROGRAMS, "gd_shim_procaddr_app")  # cudart's way in: cuGetProcAddress
CKPT_APP = os.path.join(_PROGRAMS, "gd_shim_ckpt_app")  # registered state and device buffers
MEMCAP_APP = os.path.join(_PROGRAMS, "gd_shim_memcap_app")  # allocations against a cap
FATBIN = os.path.join(_PROGRAMS, "kernels.fatbin")
CUBIN = os.path.join(_PROGRAMS, "kernels.cubin")


def built(*paths):
    """A pytest mark: skip unless every one of `paths` was built."""
    missing = [os.path.basename(p) for p in paths if not os.path.exists(p)]
    return pytest.mark.skipif(bool(missing), reason="not built (CUDA toolkit absent at configure "
                              "time?): " + ", ".join(missing))
