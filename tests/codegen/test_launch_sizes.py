"""Work-group sizes polyad chooses on CPUs where a schedule leaves them to the implementation.

PoCL's own choice is the largest group dividing the global size, split only to one group per core and not
below 4x its SIMD width: a 10x17 NDRange of heavy work-items ran as one group, on one core (conv2d_3x3's dW
partials 1.69 ms against 0.87 in 34 groups).  :func:`cpu_local_size` keeps groups large but at least
``groups`` of them; GPUs keep the driver's choice.
"""

import math
import types

import pyopencl as cl
from hypothesis import given, settings
from hypothesis import strategies as st

from polyad.runtime.module import GROUPS_PER_CORE, cpu_local_size, fit_work_group, launch_plan


def _device(kind, cores=2, max_group=4096, max_items=(4096, 4096, 4096)):
    return types.SimpleNamespace(type=kind, max_compute_units=cores, max_work_group_size=max_group,
                                 max_work_item_sizes=list(max_items))


def _program(*launches):
    return types.SimpleNamespace(kernels=[types.SimpleNamespace(name=f"k{i}", global_size=g, local_size=l)
                                          for i, (g, l) in enumerate(launches)])


def test_the_heavy_partials_that_ran_on_one_core_get_groups_for_every_core():
    assert cpu_local_size((10, 17), 16, 4096, [4096] * 3) == (10, 1)  # PoCL: (10, 17), one group
    assert cpu_local_size((5, 17, 5), 16, 4096, [4096] * 3) == (5, 1, 1)
    assert cpu_local_size((7,), 16, 4096, [4096] * 3) == (1,)  # fewer work-items than groups: one each


def test_large_launches_keep_large_groups_widest_innermost():
    assert cpu_local_size((2_500_000,), 16, 4096, [4096] * 3) == (4000,)
    assert cpu_local_size((1024, 64, 32), 16, 4096, [4096] * 3) == (1024, 4, 1)
    assert cpu_local_size((64, 64), 16, 256, [256, 16, 4]) == (64, 4)  # the device's limits hold


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=3), st.integers(1, 64),
       st.sampled_from([64, 256, 1024, 4096]))
def test_a_chosen_group_divides_fits_and_is_split_enough(gsize, groups, max_group):
    max_items = [max_group, 64, 16][: len(gsize)]
    lsize = cpu_local_size(tuple(gsize), groups, max_group, max_items)
    assert len(lsize) == len(gsize)
    assert all(g % l == 0 and l <= m for g, l, m in zip(gsize, lsize, max_items))
    assert math.prod(lsize) <= max_group
    count = math.prod(g // l for g, l in zip(gsize, lsize))
    assert count >= groups or all(l == 1 for l in lsize)


def test_launch_plan_chooses_on_a_cpu_and_leaves_a_gpu_and_explicit_sizes_alone():
    prog = _program(((10, 17), None), ((64,), (8,)), ((30,), (4,)))
    cpu = launch_plan(prog, _device(cl.device_type.CPU))
    assert [(g, l) for _, g, l in cpu] == [((10, 17), cpu_local_size((10, 17), GROUPS_PER_CORE * 2, 4096,
                                                                      [4096] * 3)),
                                           ((64,), (8,)), ((32,), (4,))]  # explicit: rounded up, kept
    gpu = launch_plan(prog, _device(cl.device_type.GPU))
    assert [(g, l) for _, g, l in gpu] == [((10, 17), None), ((64,), (8,)), ((32,), (4,))]
    assert [(g, l) for _, g, l in launch_plan(prog)] == [((10, 17), None), ((64,), (8,)), ((32,), (4,))]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 16, 32, 64, 100, 128, 512, 1024]), min_size=1, max_size=3),
       st.sampled_from([None, 1, 7, 64, 256, 512, 1024]))
def test_a_fitted_group_divides_the_scheduled_one_and_fits_the_kernel(lsize, most):
    fitted = fit_work_group(tuple(lsize), most)
    assert len(fitted) == len(lsize) and all(s % f == 0 for s, f in zip(lsize, fitted))
    if most is None or math.prod(lsize) <= most:
        assert fitted == tuple(lsize)  # left alone where it runs
    else:
        assert math.prod(fitted) <= most
        # outermost first: an inner dimension shrinks only once every outer one is 1
        inner = [d for d in range(len(lsize)) if fitted[d] < lsize[d]]
        assert all(f == 1 for f in fitted[max(inner) + 1:])
        assert all(fitted[d] == 1 for d in inner[1:]) or len(inner) <= 1
