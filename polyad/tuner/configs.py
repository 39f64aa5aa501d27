"""The tuner's view of the schedule space: graph variants and per-stage candidate lists.

A **variant** is one set of graph-level decisions (``inline``, ``rfactor``, ``pad``): the auto
schedule's (variant 0) and its single-decision neighbours (one stage inlined or not, one rfactor
dropped, added or refactored, one pad dropped).  Each variant has its own stages and, per stage, the
candidates the auto-scheduler chooses from (:mod:`polyad.schedule.space`), with the auto schedule's
choice first.  A **config** is ``(variant, candidate index per stage)``: config ``(0, (0, ..., 0))``
is the auto schedule itself, which the tuner measures first and never reports a slower one than.
"""

import math
from dataclasses import dataclass

from ..errors import ScheduleError
from ..schedule import RFactor, Schedule, StageSchedule


@dataclass(frozen=True)
class StageChoices:
    """One stage of a variant: its op, the model's features of it, and its candidates (auto's first)."""

    name: str
    op: object
    info: object  # schedule.cost.StageInfo
    candidates: tuple  # of StageSchedule

    def steps(self, i):
        """The candidates one step from candidate ``i``: the same but for one field (one tile dimension, the
        vector width, the unroll or the work-group), by index; computed once per candidate."""
        cache = self.__dict__.setdefault("_steps", {})
        if i not in cache:
            me = _fields(self.candidates[i])
            cache[i] = [j for j, c in enumerate(self.candidates)
                        if j != i and sum(a != b for a, b in zip(me, _fields(c))) == 1]
        return cache[i]


def _fields(ss):
    """A stage schedule as the fields a step changes one of (each tile dimension its own)."""
    return tuple(ss.tile or ()) + (len(ss.tile or ()), ss.vectorize, ss.unroll, ss.local_size, ss.phase, ss.grid_dims)


@dataclass(frozen=True)
class Variant:
    """Graph-level decisions and the stages they leave."""

    inline: frozenset
    rfactor: tuple  # sorted (stage name, RFactor or factor)
    pad: frozenset
    stages: tuple  # of StageChoices, by name
    why: str = "auto"
    space_to_depth: frozenset = frozenset()
    fold: frozenset = frozenset()
    innermost: tuple = ()  # sorted (stage name, dimension)

    def graph_key(self):
        return self.inline, self.rfactor, self.pad, self.space_to_depth, self.fold, self.innermost

    def schedule(self, picks, name="tuned"):
        """The Schedule of this variant with candidate ``picks[i]`` for stage i."""
        stages = {}
        for st, i in zip(self.stages, picks):
            ss = st.candidates[i]
            if ss != StageSchedule():
                stages[st.name] = ss
        return Schedule(name, stages=stages, inline=self.inline, rfactor=dict(self.rfactor), pad=self.pad,
                        space_to_depth=self.space_to_depth, fold=self.fold, innermost=dict(self.innermost))


class ConfigSpace:
    """Every variant of a graph on one device model, and random/mutated configs in it.

    :param outputs: the graph's outputs, uniquely named (as ``pa.build`` renames them).
    :param model: the :class:`~polyad.schedule.DeviceModel`.
    :param auto: the auto :class:`~polyad.schedule.Schedule` of ``outputs`` (config 0).
    :param max_variants: how many graph variants at most (auto's first).
    """

    def __init__(self, outputs, model, auto, max_variants=12):
        self.model = model
        self.auto = auto
        self.variants = []
        for decisions, why in _graph_neighbours(outputs, auto, model):
            if len(self.variants) >= max_variants:
                break
            v = _variant(outputs, model, decisions, why, auto if not self.variants else None)
            if v is not None and all(v.graph_key() != w.graph_key() for w in self.variants):
                self.variants.append(v)
        if not self.variants:
            raise ScheduleError("the auto schedule's graph decisions do not apply to the graph")

    # -- configs ------------------------------------------------------------------------------
    def auto_config(self):
        return (0, (0,) * len(self.variants[0].stages))

    def model_config(self):
        """Auto's graph decisions with every stage's candidate the analytic model ranks cheapest: the model's
        own pick where a measured rule overrode it (a copy's whole rows), for the search to try early."""
        from ..schedule.cost import stage_cost

        return (0, tuple(min(range(len(s.candidates)), key=lambda i: stage_cost(s.info, s.candidates[i], self.model))
                         for s in self.variants[0].stages))

    def schedule(self, config, name="tuned"):
        v, picks = config
        return self.variants[v].schedule(picks, name)

    def size(self):
        return sum(math.prod(len(s.candidates) for s in v.stages) for v in self.variants)

    def random(self, rng):
        v = rng.randrange(len(self.variants))
        return (v, tuple(rng.randrange(len(s.candidates)) for s in self.variants[v].stages))

    def mutate(self, config, rng, p_variant=0.1, p_step=0.5):
        """A neighbour: another graph variant (stages that stay keep their candidates), or one or two
        stages with another candidate: with probability ``p_step`` one a step from its own (the same but for one
        tile dimension, the vector width, the unroll or the work-group: Ansor's tile-size mutation), else any.  A stage
        has hundreds to thousands of candidates; a good block's neighbours are where the next one usually is."""
        v, picks = config
        if len(self.variants) > 1 and rng.random() < p_variant:
            w = rng.choice([i for i in range(len(self.variants)) if i != v])
            return (w, self.carry(config, w))
        stages = self.variants[v].stages
        if not stages:
            return config
        picks = list(picks)
        for _ in range(1 if rng.random() < 0.7 else 2):
            i = rng.randrange(len(stages))
            near = stages[i].steps(picks[i]) if rng.random() < p_step else None
            picks[i] = rng.choice(near) if near else rng.randrange(len(stages[i].candidates))
        return (v, tuple(picks))

    def crossover(self, a, b, rng):
        """Per stage, the candidate of ``a`` or ``b`` (same variant; else ``a``)."""
        if a[0] != b[0]:
            return a
        return (a[0], tuple(x if rng.random() < 0.5 else y for x, y in zip(a[1], b[1])))

    def carry(self, config, w):
        """``config``'s candidates moved onto variant ``w``: a stage keeps its schedule where ``w`` has
        the stage and the candidate, else takes ``w``'s first."""
        v, picks = config
        had = {s.name: s.candidates[i] for s, i in zip(self.variants[v].stages, picks)}
        out = []
        for s in self.variants[w].stages:
            ss = had.get(s.name)
            out.append(s.candidates.index(ss) if ss in s.candidates else 0)
        return tuple(out)

    def stage_pairs(self, config):
        """``(StageChoices, StageSchedule)`` per stage of ``config``."""
        v, picks = config
        return [(s, s.candidates[i]) for s, i in zip(self.variants[v].stages, picks)]


def _variant(outputs, model, decisions, why, auto):
    """The :class:`Variant` of graph ``decisions`` (Schedule fields by name), or None where they do not fit."""
    from ..schedule.cost import stage_cost
    from ..schedule.graph import stage_ops
    from ..schedule.space import given_graph, stage_space

    inline = decisions["inline"]
    try:
        graph = given_graph(outputs, Schedule("graph", **decisions), model)
    except ScheduleError:
        return None
    stages = []
    # the stages as the auto-scheduler sees them (padded and rfactored, before inlining): the tuning
    # database's lookup is asked about these ops, so the records carry their keys
    for op in stage_ops(graph.outputs)[0]:
        if op.name in inline:
            continue
        info = graph.infos[op.name]
        cands = list(dict.fromkeys(c.schedule for c in stage_space(op, model, graph, info).candidates))
        if StageSchedule() not in cands:
            cands.append(StageSchedule())
        first = auto.for_stage(op.name) if auto is not None else min(cands, key=lambda ss: stage_cost(info, ss, model))
        if first in cands:
            cands.remove(first)
        stages.append(StageChoices(op.name, op, info, (first,) + tuple(cands)))
    d = decisions
    return Variant(frozenset(inline), tuple(sorted(d["rfactor"].items())), frozenset(d["pad"]), tuple(stages), why,
                   frozenset(d["space_to_depth"]), frozenset(d["fold"]), tuple(sorted(d["innermost"].items())))


def _graph_neighbours(outputs, auto, model):
    """The auto schedule's graph decisions, then one-decision changes of them: ``(decisions, why)``, the
    decisions a dict of Schedule fields (inline, rfactor, pad, space_to_depth, fold, innermost)."""
    from ..schedule.space import candidate_space

    base = dict(inline=frozenset(auto.inline), rfactor=dict(auto.rfactor), pad=frozenset(auto.pad),
                space_to_depth=frozenset(auto.space_to_depth), fold=frozenset(auto.fold),
                innermost=dict(auto.innermost))
    inline, rf, pad, s2d = base["inline"], base["rfactor"], base["pad"], base["space_to_depth"]

    def but(**changes):
        return dict(base, **changes)

    yield base, "auto"
    space = candidate_space(outputs, model, schedule=auto)
    for n in sorted(base["fold"]):  # the decisions that name the folded stage no longer fit: left out
        yield but(fold=base["fold"] - {n}), f"no fold of {n}"
    for n in sorted(base["innermost"]):
        yield but(innermost={k: v for k, v in base["innermost"].items() if k != n}), f"no innermost of {n}"
    for n in sorted(rf):
        yield but(rfactor={k: v for k, v in rf.items() if k != n}), f"no rfactor of {n}"
    for n in sorted(pad):
        yield but(pad=pad - {n}), f"no pad_reads of {n}"
    for n in sorted(set(space.pad) - pad):
        yield but(pad=pad | {n}), f"pad_reads {n}"
    for n in sorted(s2d):
        yield but(space_to_depth=s2d - {n}), f"no space_to_depth of {n}"
    for n in sorted(set(space.space_to_depth) - s2d):
        yield but(space_to_depth=s2d | {n}), f"space_to_depth {n}"
    for n, options in sorted(space.rfactor.items()):
        factors = sorted({o if isinstance(o, int) else o.factor for o in options})
        now = RFactor.of(rf[n]).factor if n in rf else None
        for f in _spread(factors, now):
            yield but(rfactor=dict(rf, **{n: f})), f"rfactor {n} by {f}"
    for n in sorted(space.inline):
        yield but(inline=inline ^ {n}), ("materialise " if n in inline else "inline ") + n


def _spread(factors, now):
    """Two factors on either side of ``now`` (or the middle one), not ``now``."""
    fs = [f for f in factors if f != now]
    if not fs:
        return []
    if now is None:
        return [fs[len(fs) // 2]]
    lo = [f for f in fs if f < now]
    hi = [f for f in fs if f > now]
    return ([lo[-1]] if lo else []) + ([hi[0]] if hi else [])
