"""The auto schedules of every benchmark workload (tiny shapes, both recorded device models) stay as recorded;
each stage's choice is the model's argmin over the space's candidates; the rules' table; the lookup hook.

tests/data/auto_golden.json holds each graph's decisions (stages' tiles, vectors, unrolls; inline; rfactor;
pad), written by tests/schedule/auto_golden.py.  A change meant to move auto's choices rewrites it
(``python tests/schedule/auto_golden.py``) and shows the moves in its diff.
"""

import json
import pathlib
import sys

import pytest

import polyad as pa
from polyad.schedule import DeviceModel, StageSchedule, prepare
from polyad.schedule import auto as auto_mod
from polyad.schedule.auto import auto_schedule, candidate_space, stage_cost
from polyad.schedule.graph import scheduled_graph, stage_ops, uniquely_named
from polyad.schedule.space import RULE, RULES, graph_decisions, stage_space

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import auto_golden  # noqa: E402

GOLDEN = json.loads(auto_golden.GOLDEN.read_text())
TINY = auto_golden.TINY
MODELS = {m: DeviceModel.load(auto_golden.DEVICES / f"{m}.json") for m in auto_golden.MODELS}


@pytest.mark.parametrize("model", auto_golden.MODELS)
@pytest.mark.parametrize("name", sorted(TINY))
def test_auto_schedules_are_the_recorded_ones(model, name):
    got = auto_golden.record({name: TINY[name]}, models=(model,))[model][name]
    assert got == GOLDEN[model][name]


@pytest.mark.parametrize("model", auto_golden.MODELS)
@pytest.mark.parametrize("name", sorted(TINY))
def test_each_stage_choice_is_the_models_argmin_over_the_space(model, name, monkeypatch):
    dm = MODELS[model]
    graphs = auto_golden.graphs(name, TINY[name])
    scheds = [auto_schedule(outs, device=dm) for _, outs in graphs]

    def no_auto(*a, **k):
        raise AssertionError("candidate_space must not run auto_schedule")

    monkeypatch.setattr(auto_mod, "auto_schedule", no_auto)
    for (kind, outs), s in zip(graphs, scheds):
        space = candidate_space(outs, device=dm)
        g = graph_decisions(scheduled_graph(outs), dm)
        assert (g.inline, g.rfactor, g.pad) == (s.inline, s.rfactor, s.pad)
        materialised = {op.name for op in stage_ops(g.outputs)[0] if op.name not in s.inline}
        assert set(space.stages) == materialised, kind
        assert set(s.stages) <= materialised
        for n in materialised:
            chosen = s.stages.get(n, StageSchedule())
            ranked = space.ranked(n)
            assert chosen in space.stages[n], (kind, n, chosen)
            info = g.infos[n]
            if n in s.stages:
                assert chosen in ranked, (kind, n, chosen)
                floor = min(stage_cost(info, ss, dm) for ss in ranked)
                assert stage_cost(info, chosen, dm) <= floor * 1.03 + 1e-6, (kind, n)
        for n, spec in s.rfactor.items():
            assert spec in space.rfactor[n], (kind, n, spec)
        assert set(s.inline) <= set(space.inline) and set(s.pad) <= set(space.pad)


def test_the_rules_table():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names)) and set(RULE) == set(names)
    for r in RULES:
        assert r.level in ("graph", "stage", "search"), r.name
        assert isinstance(r.measured, str) and len(r.measured.strip()) > 20, r.name
        assert r.does.strip(), r.name
        if r.level == "graph":
            assert r.target in ("fold", "pad", "space_to_depth", "innermost", "rfactor", "inline"), r.name
        if r.note is not None:
            assert r.limit is not None and r.propose is not None, r.name
    # the constants the code reads are the table's
    assert auto_mod.INLINE_MAX_DEPTH == RULE["inline_caps"].constants["max_depth"] == 512
    assert auto_mod.INLINE_MAX_SIZE == RULE["inline_caps"].constants["max_size"] == 2048
    assert RULE["rfactor_rows"].constants["max_points"] == 4096
    assert RULE["pad_clipped_sums"].constants["max_extra"] == 3.0
    # the former bypasses are rules now
    assert {"padded_rows", "row_partials", "lane_partials", "tuple_reducers"} <= set(names)


def _conv(size, pad=0, dilation=1, c_out=19):
    import polyad as pa

    X = pa.placeholder((2, 5, size, size), name="X")
    W = pa.placeholder((c_out, 5, 3, 3), name="W")
    return pa.nn.conv2d(X, W, padding=pad, dilation=dilation), X, W


def test_a_convolution_whose_rows_no_vector_divides_runs_vector_blocks_along_them():
    """conv2d_3x3's forward (26-wide rows) ran whole scalar rows by channels (the retired rule box_rows: 1x4x1x26
    0.64 ms against vector blocks' 2.0-27 ms, whose remainders then ran naive loops).  With the remainder in
    narrower groups, or the cut last tile moved back (codegen), the model's vector blocks run faster: 0.62 -> 0.44
    ms (conv2d_dilated's forward 0.40 -> 0.21, conv2d_5x5_s3's 0.85x; alternating pairs, 21 rounds)."""
    dm = MODELS["zen5-former-constants"]
    for Y, block in ((_conv(28)[0], StageSchedule(tile=(1, 1, 8, 16), vectorize=8)),  # 26 wide: 16 + 8 + 2
                     (_conv(28, c_out=8)[0], StageSchedule(tile=(1, 1, 4, 16), vectorize=4)),
                     (_conv(34)[0], StageSchedule(tile=(1, 1, 8, 32), vectorize=16))):  # 32 wide
        s = auto_schedule([Y], device=dm)
        assert s.stages[Y.name] == block, s.stages[Y.name]
        assert not any("whole rows" in n for n in s.notes), s.notes


def test_materialise_padding_keeps_a_padded_convolutions_zero_padding_apart_on_a_cpu():
    """Inlined, the padding guards each of the convolution's reads: 9.3-15 ms against 0.77-1.28 without padding
    (3x3, 32x19x26x26); materialised, the convolution is an unpadded box reduction, in vector blocks."""
    dm = MODELS["zen5-former-constants"]
    Y, _, _ = _conv(24, pad=1, dilation=2)  # 22 wide
    pad = next(t for t in Y.op.input_tensors if t.name.endswith("_pad"))
    s = auto_schedule([Y], device=dm)
    assert pad.name not in s.inline and pad.name in s.stages
    assert any(n.startswith(f"materialise {pad.name}: a zero-padded copy read by a reduction") for n in s.notes)
    assert s.stages[Y.name] == StageSchedule(tile=(1, 1, 4, 16), vectorize=4, unroll=2)  # the model's, 22 wide
    assert pad.name in auto_schedule([Y], device=MODELS["gpu-former-constants"]).inline  # not measured there


def _conv_grads(size=18):
    return dict(auto_golden.graphs("conv2d_3x3", dict(TINY["conv2d_3x3"], batch=1, size=size)))["bwd"]


def test_a_lookup_record_replaces_the_stage_choice_and_none_changes_nothing():
    dm = MODELS["zen5-former-constants"]
    grads = _conv_grads()
    plain = auto_schedule(grads, device=dm)
    asked = []

    def nothing(op):
        asked.append(op.name)

    none = auto_schedule(grads, device=dm, lookup=nothing)
    assert none is not plain and none == plain and none.to_json() == plain.to_json()
    assert set(asked) >= set(plain.stages) and not set(asked) & set(plain.inline)
    target = sorted(n for n, ss in plain.stages.items() if ss.tile)[0]
    record = StageSchedule(tile=(1,) * (len(plain.stages[target].tile) - 1) + (2,), unroll=4)
    assert record != plain.stages[target]

    def log(op):
        return (record, "log.jsonl, trial 7, 0.5 ms") if op.name == target else None

    s = auto_schedule(grads, device=dm, lookup=log)
    assert s.stages[target] == record
    assert f"{target}: {record.describe()} (from the tuning log: log.jsonl, trial 7, 0.5 ms)" in s.notes
    assert {n: ss for n, ss in s.stages.items() if n != target} == {
        n: ss for n, ss in plain.stages.items() if n != target}
    assert (s.inline, s.rfactor, s.pad) == (plain.inline, plain.rfactor, plain.pad)
    assert auto_schedule(grads, device=dm, lookup=log) is s  # the memo holds per lookup
    assert auto_schedule(grads, device=dm) is plain
    prepare(grads, s)  # fits the graph
    with pytest.raises(Exception, match="expected None or"):
        auto_schedule(grads, device=dm, lookup=lambda op: "8x8")
    # a record that does not fit its stage (a log edited by hand) is not used: it broke every build with the stage
    wrong = StageSchedule(tile=(1,) * (len(plain.stages[target].tile) - 1) + (3,), vectorize=8)

    def edited(op):
        return (wrong, "log.jsonl, trial 8") if op.name == target else None

    s = auto_schedule(grads, device=dm, lookup=edited)
    assert s.stages[target] == plain.stages[target]
    assert any(n.startswith(f"{target}: the tuning log's record does not fit it") and "not used" in n for n in s.notes)
    prepare(grads, s)


def test_stage_space_names_the_rule_of_each_candidate():
    dm = MODELS["zen5-former-constants"]
    grads = _conv_grads(size=32)  # the padded data gradient's rows (32) split into float16: padded_rows decides
    g = graph_decisions(uniquely_named(grads), dm)
    seen, decided = set(), {}
    for op in stage_ops(g.outputs)[0]:
        if op.name in g.inline:
            continue
        sp = stage_space(op, dm, g, g.infos[op.name])
        assert sp.candidates and all(c.rule in RULE or "+" in c.rule for c in sp.candidates)
        assert len({c.schedule for c in sp.candidates}) == len(sp.candidates)  # no schedule twice
        seen |= {c.rule for c in sp.candidates}
        decided[op.name] = sp.decided
        fast = stage_space(op, dm, g, g.infos[op.name], ranked_only=True)
        assert [c.schedule for c in fast.candidates] == sp.ranked() and fast.decided == sp.decided
        if sp.decided:
            assert len(sp.ranked()) == 1 and sp.ranked()[0].tile  # the rule's measured block, ranked alone
    assert {"grid", "lane_partials", "padded_rows", "channel_tiles", "more_unrolls", "block_steps"} <= seen
    assert decided == {"d_W_from_conv2d_rf": "lane_partials", "d_X_from_conv2d": "padded_rows",
                       "d_W_from_conv2d": None, "H_pad": "copy_rows"}


def test_the_tuner_gets_the_blocks_one_step_from_a_deciding_rules():
    """block_steps: a deciding rule's block with one tile dimension doubled or halved, another vector width or
    unroll, for the tuner (the model never ranks them, so auto is what it was); proposals another rule makes
    stay that rule's."""
    from polyad.schedule.space import _step_variants

    dm = MODELS["zen5-former-constants"]
    g = graph_decisions(uniquely_named(_conv_grads(size=28)), dm)
    added = 0
    for op in stage_ops(g.outputs)[0]:
        if op.name in g.inline:
            continue
        sp = stage_space(op, dm, g, g.infos[op.name])
        if not sp.decided:
            continue
        (own,) = [c.schedule for c in sp.candidates if c.rule == sp.decided]
        want = set(_step_variants(own, op.shape, dm, bool(g.infos[op.name].reduction)))
        assert want and own not in want
        for ss in want:
            changed = [d for d, (a, b) in enumerate(zip(ss.tile, own.tile)) if a != b]
            if changed:
                (d,) = changed
                assert ss.tile[d] in (2 * own.tile[d], own.tile[d] // 2) and (ss.vectorize, ss.unroll) == (
                    own.vectorize, own.unroll)
            else:
                assert (ss.vectorize != own.vectorize) + (ss.unroll != own.unroll) == 1
            assert ss.tile[-1] % ss.vectorize == 0 and all(1 <= t <= n for t, n in zip(ss.tile, op.shape))
        # every step is in the space once: under block_steps, never ranked, or under the rule that proposed it
        steps = [c for c in sp.candidates if c.rule == "block_steps"]
        assert want <= {c.schedule for c in sp.candidates} and not any(c.ranked for c in steps)
        assert {c.schedule for c in steps} == want - {c.schedule for c in sp.candidates if c.rule != "block_steps"}
        added += len(steps)
    assert added  # some step is new to the space


@pytest.mark.opencl
@pytest.mark.parametrize("size, pad, dilation", [(28, 0, 1), (24, 1, 2)])
def test_rows_no_vector_divides_and_a_materialised_padding_build_and_equal_evaluate(opencl, size, pad, dilation):
    import numpy as np

    import polyad as pa

    Y, X, W = _conv(size, pad=pad, dilation=dilation)
    s = auto_schedule([Y], device=MODELS["zen5-former-constants"])
    assert s.stages[Y.name].vectorize > 1 and Y.shape[-1] % s.stages[Y.name].vectorize  # a remainder a row
    rng = np.random.default_rng(3)
    x = rng.standard_normal(X.shape).astype("float32")
    w = rng.standard_normal(W.shape).astype("float32")
    (got,) = pa.build([Y], [X, W], schedule=s)(x, w)
    (ref,) = pa.evaluate([Y], {X: x, W: w})
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def _dense(batch, n_in, n_out, flat=False):
    import polyad as pa

    if flat:  # a dense layer over a flattened NCHW tensor (lenet_step's first)
        X0 = pa.placeholder((batch, n_in // 16, 4, 4), name="X0")
        X = pa.nn.flatten(X0)
    else:
        X = X0 = pa.placeholder((batch, n_in), name="X")
    W = pa.placeholder((n_out, n_in), name="W")
    return pa.nn.dense(X, W), X0, W


def test_rfactor_gathered_splits_a_dense_forward_over_k_into_lane_partials_grouped_by_rows():
    """dense_big's forward 26.4 -> 10.0 ms (kernels), dense's 1.40 -> 0.65: W[j, k] read a row apart along j."""
    import polyad as pa
    from polyad.schedule import RFactor

    dm = MODELS["zen5-former-constants"]
    Y, X, W = _dense(32, 1000, 1000)
    s = auto_schedule([Y], device=dm)
    (mm,) = s.rfactor
    assert RFactor.of(s.rfactor[mm]) == RFactor(16, "k", True), s.rfactor
    assert s.stages[f"{mm}_rf"] == StageSchedule(tile=(4, 4, 16), vectorize=16, local_size=(1, 1, 8))
    assert any(n.startswith(f"rfactor {mm} by 16 over k, interleaved: every read along its innermost output")
               for n in s.notes)
    # its gradients read W along their outputs (dX[i, k] = sum_j H[i, j] W[j, k]): left alone
    grads = list(pa.differentiate(Y, [X, W], pa.placeholder(Y.shape, name="H")))
    assert not any("gathers" in n for n in auto_schedule(grads, device=dm).notes)
    # over a flattened tensor the lanes' rows would read through flatten's divisions: not split
    Yf, _, _ = _dense(64, 256, 120, flat=True)
    assert not any("gathers" in n for n in auto_schedule([Yf], device=dm).notes)
    assert not auto_schedule([Y], device=MODELS["gpu-former-constants"]).rfactor  # measured on a CPU


@pytest.mark.opencl
def test_a_dense_forward_in_gathered_lane_partials_builds_and_equals_evaluate(opencl):
    import numpy as np

    import polyad as pa

    Y, X, W = _dense(12, 200, 40)  # 200 = 12 lanes of 16 and 8 ragged; 12 rows: 3 row blocks of 4 a group
    s = auto_schedule([Y], device=MODELS["zen5-former-constants"])
    assert any("every read along its innermost output gathers" in n for n in s.notes), s.notes
    rng = np.random.default_rng(5)
    x = rng.standard_normal(X.shape).astype("float32")
    w = rng.standard_normal(W.shape).astype("float32")
    (got,) = pa.build([Y], [X, W], schedule=s)(x, w)
    np.testing.assert_allclose(got, x @ w.T, rtol=1e-4, atol=1e-4)


def test_an_elementwise_stage_calling_math_functions_takes_wide_vectors():
    # the smallest-block tie-break took 2 lanes, which PoCL runs as slowly as lane-by-lane calls: the rule
    # math_lanes (a+sqrt|b|/(exp(a)+1)'s backward 3.0 -> 0.66 ms; tanh(exp(x*x)*sigmoid(x)) 6.6 -> 1.2 ms), then
    # scalar code (erf over a million floats 7.3 ms, 0.8-1.5 in 8 or 16 lanes)
    import dataclasses

    # this VM's calibrated figures (the former constants rank the naive loops first here anyway)
    dm = dataclasses.replace(MODELS["zen5-former-constants"], launch_s=1.6e-5, dram_gbs=87.2, fma_slots=32,
                             gflops=((1, 35.2), (2, 70.1), (4, 140.8), (8, 281.9), (16, 564.5)))
    X = pa.placeholder((1000000,), name="X")
    T = pa.compute((1000000,), lambda i: pa.tanh(pa.exp(X[i] * X[i]) * pa.sigmoid(X[i])), name="T")
    got = auto_schedule([T], device=dm).stages.get("T")
    assert got is not None and got.vectorize == 16, got
    E = pa.compute((1000000,), lambda i: pa.erf(X[i]), name="E")
    assert auto_schedule([E], device=dm).stages["E"].vectorize == 16
    A = pa.placeholder((1000000,), name="A")
    B = pa.placeholder((1000000,), name="B")
    Y = pa.ops.divide(pa.ops.add(A, pa.ops.sqrt(pa.ops.abs(B))), pa.ops.add(pa.ops.exp(A), 1.0))
    grads = pa.differentiate(Y, [A, B], pa.placeholder(Y.shape, name="H"))
    s = auto_schedule(list(grads), device=dm)
    assert s.inline and s.stages and all(ss.vectorize == 16 for ss in s.stages.values()), s.describe()
    plain = pa.compute((1000000,), lambda i: X[i] * 2.0 + 1.0, name="P")  # no math: the tie-break as before
    ss = auto_schedule([plain], device=dm).stages.get("P")
    assert ss is None or ss.vectorize < 8  # no math: the tie-break's smallest block, as before
