"""Invalid configuration fails closed: the GPU is refused with a message
that names the variable and the value, never silently unlimited."""
import pytest

BAD = [
    ("CUDA_DEVICE_MEMORY_LIMIT", "4GB"),
    ("CUDA_DEVICE_MEMORY_LIMIT", "-1"),
    ("CUDA_DEVICE_MEMORY_LIMIT", "lots"),
    ("CUDA_DEVICE_MEMORY_LIMIT_0", "0"),
    ("GPUSLICE_MEMORY_LIMIT", "1.5.2GiB"),
    ("CUDA_DEVICE_SM_LIMIT", "150"),
    ("GPU_CORE_UTILIZATION_POLICY", "sometimes"),
    ("GPUSLICE_MEMROY_LIMIT", "1GiB"),     # a typo of ours
    ("CUDA_DEVICE_MEMORY_LIMIT_99", "1GiB"),  # no such device index
]


@pytest.mark.parametrize("var,value", BAD)
def test_bad_value_refuses_the_gpu_and_names_it(world, var, value):
    w = world(extra={var: value})
    c = w.client()
    r = c.cmd("init")
    assert r["rc"] == 3  # CUDA_ERROR_NOT_INITIALIZED
    err = c.close()
    assert var in err and value in err, err


def test_good_configuration_is_accepted(world):
    w = world(extra={"CUDA_DEVICE_SM_LIMIT": "30", "GPU_CORE_UTILIZATION_POLICY": "force"})
    c = w.client()
    c.ok("init")
    c.close()
