"""The OpenCL gate of these tests: fail (or skip with POLYAD_ALLOW_NO_OPENCL=1) when no device is usable."""

import os

import pytest


@pytest.fixture
def opencl():
    from polyad.errors import DeviceError
    from polyad.pipeline import select_device

    try:
        select_device()
    except DeviceError as e:
        if os.environ.get("POLYAD_ALLOW_NO_OPENCL"):
            pytest.skip(str(e))
        pytest.fail(f"no usable OpenCL device: {e} (set POLYAD_ALLOW_NO_OPENCL=1 to skip the OpenCL tests instead)")
