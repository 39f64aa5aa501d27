"""Guarded point bands (a padded copy's vector groups, a strided or dilated data gradient's ragged groups): isl
unrolls only the members its guards are about, the printer the leading and trailing ones that range over one interval
(``tree.SPLIT_GUARDED``).  The programs must be the ones isl's whole unrolling gave: source for source, or the same
statements in the same order where isl, seeing the whole band, guards a block's edge by other conditions of the grid.
The split must happen on the workloads it was made for.  No OpenCL here: codegen alone (the built programs are
checked against numpy by the conv tests of tests/pipeline)."""

import islpy as isl
import pytest

from polyad.codegen import tree
from polyad.codegen.tree import free
from polyad.schedule import DeviceModel

from codegen_switches import both_ways, unguarded

_DEVICES = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "devices"
ZEN5 = DeviceModel.load(_DEVICES / "zen5-former-constants.json")
GPU = DeviceModel.load(_DEVICES / "gpu-former-constants.json")


@pytest.mark.parametrize("text, d, expected", [
    ("{ [b, l] : 0 <= b < 9 and 0 <= l < 8 }", 1, True),
    ("{ S[b, l] : 0 <= b < 9 and 0 <= l < 8 }", 0, True),
    ("{ [b, l] : 0 <= b <= 9 and 0 <= l < 4 and l <= 32 - 4b }", 1, False),  # a block's points depend on b
    ("{ [b, l, r] : 0 <= b < 9 and 0 <= l < 8 and 0 <= r < 3 and 2r <= l }", 1, False),  # and on r
    ("{ [b, l] : 0 <= b < 9 and (l = 0 or l = 2) }", 1, False),  # two intervals
    ("{ [b, l] : 0 <= b < 9 and l = 0; [b, l] : 9 <= b < 12 and l = 0 }", 1, True),  # pieces, one interval
])
def test_a_dimension_is_free_where_the_set_is_one_interval_of_it_times_the_rest(text, d, expected):
    assert free(isl.Set(text), d) is expected


@pytest.mark.parametrize("name, model", [("conv2d_dilated", ZEN5), ("conv2d_5x5_s3", ZEN5), ("conv2d_dilated", GPU)],
                         ids=["conv2d_dilated-cpu", "conv2d_5x5_s3-cpu", "conv2d_dilated-gpu"])
def test_isl_unrolls_only_the_guarded_members_and_the_program_is_the_same(name, model, monkeypatch):
    """Over auto and its neighbours: every kernel the one isl's whole unrolling gave (at these shapes a padded
    copy's edge blocks may be guarded otherwise; at the benchmark's, 399 of 400 logged conv2d_dilated candidates and
    all of 60 conv2d_5x5_s3 ones printed the same sources); and some guarded band was split (a leading or trailing
    member went to the printer), else the comparison says nothing."""
    split, real = [], tree._free_ends
    monkeypatch.setattr(tree, "_free_ends", lambda *a: split.append(k := real(*a)) or k)
    built = both_ways(name, model, monkeypatch, "SPLIT_GUARDED", seed=3, mutants=6, p_variant=0.0, max_variants=2)
    for why, mine, whole in built:
        assert [k.name for k in mine.kernels] == [k.name for k in whole.kernels]
        for k in mine.kernels:
            a, b = mine.kernel_source(k.name), whole.kernel_source(k.name)
            assert a == b or unguarded(a) == unguarded(b), (k.name, why)
    assert len(built) >= 4
    assert any(h for h, _ in split), "no guarded band had a free leading member: nothing was compared"
    assert any(t for _, t in split), "no guarded band had a free trailing member"
