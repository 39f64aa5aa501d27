"""The tuner's view of the schedule space: graph variants and per-stage candidate lists.

A **variant** is one set of graph-level decisions (``inline``, ``rfactor``, ``pad``, ...): the auto
schedule's (variant 0) and graphs some :class:`Move` s from it (one stage inlined or not, one rfactor
dropped, added or refactored, one pad dropped, ...), auto's one-move neighbours built first and the rest
as the search probes them.  Each variant has its own stages and, per stage, the
candidates the auto-scheduler chooses from (:mod:`polyad.schedule.space`), with the auto schedule's
choice first.  A **config** is ``(variant, candidate index per stage)``: config ``(0, (0, ..., 0))``
is the auto schedule itself, which the tuner measures first and never reports a slower one than.
"""

import math
from dataclasses import dataclass

from ..errors import ScheduleError
from ..schedule import RFactor, Schedule, StageSchedule


#: a changed stage (another op under the same name) keeps the schedule a variant move carries over where the analytic
#: model prices it within this factor of the model's own pick for it
CARRY_SLACK = 2.0


@dataclass(frozen=True)
class StageChoices:
    """One stage of a variant: its op, the model's features of it, its candidates (auto's first), and ``key``: the
    stage as :func:`~polyad.schedule.space.stage_space_key` knows it, equal in every variant that has this stage
    unchanged (a stage's time under one schedule, measured in one variant, is its time in the others)."""

    name: str
    op: object
    info: object  # schedule.cost.StageInfo
    candidates: tuple  # of StageSchedule
    key: object = None

    def steps(self, i):
        """The candidates one step from candidate ``i``: the same but for one field (one tile dimension, the
        vector width, the unroll or the work-group), by index; computed once per candidate."""
        cache = self.__dict__.setdefault("_steps", {})
        if i not in cache:
            me = _fields(self.candidates[i])
            cache[i] = [j for j, c in enumerate(self.candidates)
                        if j != i and sum(a != b for a, b in zip(me, _fields(c))) == 1]
        return cache[i]

    def position(self, ss):
        """The index of candidate ``ss`` (its first, as ``candidates.index``), or None; by a dict built once: a
        variant move carries every stage's schedule over, and scanning the candidates with dataclass equality was
        2.7 s of lenet_step's 16 s of search in 40 rounds."""
        index = self.__dict__.get("_position")
        if index is None:
            index = self.__dict__["_position"] = _positions(self.candidates)
        return index.get(ss)


def _positions(candidates):
    """Each candidate's index (its first)."""
    index = {}
    for i, c in enumerate(candidates):
        index.setdefault(c, i)
    return index


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

    def schedule(self, picks, name="tuned"):
        """The Schedule of this variant with candidate ``picks[i]`` for stage i."""
        stages = {}
        for st, i in zip(self.stages, picks):
            ss = st.candidates[i]
            if ss != StageSchedule():
                stages[st.name] = ss
        return Schedule(name, stages=stages, inline=self.inline, rfactor=dict(self.rfactor), pad=self.pad,
                        space_to_depth=self.space_to_depth, fold=self.fold, innermost=dict(self.innermost))


def _graph_key(d):
    """Graph decisions (a dict of Schedule fields) as a :class:`Variant` holds them: ``(inline, rfactor, pad,
    space_to_depth, fold, innermost)``, hashable."""
    return (frozenset(d["inline"]), tuple(sorted(d["rfactor"].items())), frozenset(d["pad"]),
            frozenset(d["space_to_depth"]), frozenset(d["fold"]), tuple(sorted(d["innermost"].items())))


class ConfigSpace:
    """Every variant of a graph on one device model, and random/mutated configs in it.

    The variants are auto's graph decisions (variant 0) and graphs some moves away from them (:func:`graph_moves`:
    one decision changed each).  The first ``max_variants`` (auto and its first one-move neighbours) are built at
    once; the others when the search asks for them (:meth:`probe`): lenet_step's graph has 49 one-move neighbours,
    chain's 598, and a new variant still costs its graph transformation and its new stages' spaces (a stage the
    variants share is computed once, by :func:`~polyad.schedule.space.stage_space_key`).

    :param outputs: the graph's outputs, uniquely named (as ``pa.build`` renames them).
    :param model: the :class:`~polyad.schedule.DeviceModel`.
    :param auto: the auto :class:`~polyad.schedule.Schedule` of ``outputs`` (config 0).
    :param max_variants: how many variants to build at once (auto's first).
    """

    def __init__(self, outputs, model, auto, max_variants=12):
        self.outputs, self.model, self.auto = outputs, model, auto
        self.base = _decisions(auto)
        self.moves = list(graph_moves(outputs, auto, model))  # (Move, why)
        self._why = {m: why for m, why in self.moves}
        self.variants = []
        self._moves_of = []  # per variant: its moves from auto's decisions, {Move.key: Move} (None: unknown)
        self._known = {}  # graph key -> variant index, or None where the decisions do not fit
        self._tried = set()  # (variant, move index) a probe has taken
        self.built_later = 0  # variants built for probes
        # schedule.space.stage_space_key -> (candidates, the model's pick): a variant shares all but a stage or
        # three with the others (lenet_step's 40 first variants: 1092 stages, 98 distinct)
        self._stages = {}
        self._add({}, auto)
        if not self.variants:
            raise ScheduleError("the auto schedule's graph decisions do not apply to the graph")
        for i, (m, _) in enumerate(self.moves):
            if len(self.variants) >= max_variants:
                break
            self._tried.add((0, i))
            self._add({m.key: m})

    def _add(self, moves, auto=None, decisions=None):
        """The index of the variant of ``moves`` (or of ``decisions``, moves unknown), built if new; None where the
        decisions do not fit the graph."""
        if decisions is None:
            decisions = apply_moves(self.base, moves.values())
        key = _graph_key(decisions)
        if key not in self._known:
            why = "given" if moves is None else " + ".join(self._why[m] for m in moves.values()) or "auto"
            v = _variant(self.outputs, self.model, decisions, why, auto, self._stages)
            if v is not None:
                self.variants.append(v)
                self._moves_of.append(moves)
            self._known[key] = len(self.variants) - 1 if v is not None else None
        return self._known[key]

    def index_of(self, schedule):
        """The index of the variant with ``schedule``'s graph decisions (built if new), or None where they do not
        fit the graph."""
        return self._add(None, decisions=_decisions(schedule))

    def probe(self, parents, rng, exclude, builds=1):
        """A config on a variant one move from a parent's, the parent's candidates carried over: the graph
        decisions' local search.  A move of :attr:`moves` is made there (or undone, where the parent's variant
        made it); parents are tried in order, moves in a random order, each (variant, move) once, and at most
        ``builds`` variants are built.  None when nothing is left that fits and is not in ``exclude``."""
        for p in parents:
            moved = self._moves_of[p[0]]
            if moved is None:
                continue
            untried = [i for i in range(len(self.moves)) if (p[0], i) not in self._tried]
            rng.shuffle(untried)
            for i in untried:
                m = self.moves[i][0]
                moves = {k: x for k, x in moved.items() if k != m.key}
                if moved.get(m.key) != m:
                    moves[m.key] = m
                known = _graph_key(apply_moves(self.base, moves.values())) in self._known
                if not known and builds <= 0:
                    continue  # left for a later round
                self._tried.add((p[0], i))
                if not known:
                    builds -= 1
                    self.built_later += 1
                w = self._add(moves)
                c = None if w is None else (w, self.carry(p, w))
                if c is not None and c not in exclude:
                    return c
        return None

    # -- configs ------------------------------------------------------------------------------
    def auto_config(self):
        return (0, (0,) * len(self.variants[0].stages))

    def model_config(self):
        """Auto's graph decisions with every stage's candidate the analytic model ranks cheapest: the model's
        own pick where a measured rule overrode it (a copy's whole rows), for the search to try early."""
        return (0, tuple(min(range(len(s.candidates)), key=lambda i: self._stage_cost(s, i))
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
        """``config``'s candidates moved onto variant ``w``: a stage keeps its schedule where ``w`` has the stage and
        the candidate, else takes ``w``'s first.  A stage of the same name that a move changed (its key differs: an
        rfactor dropped turns an 8-term sum into the whole reduction) keeps the schedule only where the model
        prices it within :data:`CARRY_SLACK` of the first, the model's pick for the changed stage."""
        v, picks = config
        had = {s.name: (s.key, s.candidates[i]) for s, i in zip(self.variants[v].stages, picks)}
        out = []
        for s in self.variants[w].stages:
            key, ss = had.get(s.name, (None, None))
            i = None if ss is None else s.position(ss)
            if i is not None and key != s.key and self._stage_cost(s, i) > CARRY_SLACK * self._stage_cost(s, 0):
                i = None
            out.append(0 if i is None else i)
        return tuple(out)

    def _stage_cost(self, choice, i):
        """The analytic model's seconds of candidate ``i`` of a stage, remembered."""
        from ..schedule.cost import stage_cost

        cache = choice.__dict__.setdefault("_cost", {})
        if i not in cache:
            cache[i] = stage_cost(choice.info, choice.candidates[i], self.model)
        return cache[i]

    def stage_pairs(self, config):
        """``(StageChoices, StageSchedule)`` per stage of ``config``."""
        v, picks = config
        return [(s, s.candidates[i]) for s, i in zip(self.variants[v].stages, picks)]


def _variant(outputs, model, decisions, why, auto, memo=None):
    """The :class:`Variant` of graph ``decisions`` (Schedule fields by name), or None where they do not fit.
    ``memo``: a dict of each stage's (candidates, model's pick, its arrangements by first candidate) by
    :func:`~polyad.schedule.space.stage_space_key`, shared by the variants of one graph on one model."""
    from ..schedule.graph import stage_ops
    from ..schedule.space import given_graph, stage_space_key

    inline = decisions["inline"]
    try:
        graph = given_graph(outputs, Schedule("graph", **decisions), model)
    except ScheduleError:
        return None
    memo = {} if memo is None else memo
    stages = []
    # the stages as the auto-scheduler sees them (padded and rfactored, before inlining): the tuning
    # database's lookup is asked about these ops, so the records carry their keys
    for op in stage_ops(graph.outputs)[0]:
        if op.name in inline:
            continue
        info = graph.infos[op.name]
        key = stage_space_key(op, info, graph)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = _stage_candidates(op, info, model, graph) + ({},)
        cands, pick, by_first = hit
        first = auto.for_stage(op.name) if auto is not None else pick
        # a stage the variants share arranges its candidates once, and shares what StageChoices works out about
        # them (their positions, steps and model costs: functions of the candidates and the info, which the key
        # holds): arranging and indexing them again for each of 30 stages of each variant a probe built was 3 s
        # of a 120 s lenet_step tuning (121 variants)
        arranged = by_first.get(first)
        if arranged is None:
            ordered = (first,) + tuple(c for c in cands if c != first)
            arranged = by_first[first] = (ordered, {"_position": _positions(ordered), "_steps": {}, "_cost": {}})
        choices = StageChoices(op.name, op, info, arranged[0], key)
        choices.__dict__.update(arranged[1])
        stages.append(choices)
    inline, rf, pad, s2d, fold, innermost = _graph_key(decisions)
    return Variant(inline, rf, pad, tuple(stages), why, s2d, fold, innermost)


def _stage_candidates(op, info, model, graph):
    """A stage's candidates, in the space's order with the naive schedule among them, and the one the model ranks
    cheapest."""
    from ..schedule.cost import stage_cost
    from ..schedule.space import stage_space

    cands = list(dict.fromkeys(c.schedule for c in stage_space(op, model, graph, info).candidates))
    if StageSchedule() not in cands:
        cands.append(StageSchedule())
    return tuple(cands), min(cands, key=lambda ss: stage_cost(info, ss, model))


@dataclass(frozen=True)
class Move:
    """One graph decision set to a value: ``field`` is a Schedule field (``fold``, ``innermost``, ``rfactor``,
    ``pad``, ``space_to_depth``, ``inline``), ``name`` a stage; ``value`` is True/False for the set fields
    (the stage in the set or not) and the factor or dimension, or None (no decision), for the dict fields."""

    field: str
    name: str
    value: object

    @property
    def key(self):
        return self.field, self.name


_SETS = ("fold", "pad", "space_to_depth", "inline")


def _decisions(schedule):
    """A schedule's graph decisions, a dict of its fields."""
    return dict(inline=frozenset(schedule.inline), rfactor=dict(schedule.rfactor), pad=frozenset(schedule.pad),
                space_to_depth=frozenset(schedule.space_to_depth), fold=frozenset(schedule.fold),
                innermost=dict(schedule.innermost))


def apply_moves(base, moves):
    """The graph decisions ``base`` (a dict of Schedule fields) with every move applied."""
    out = dict(base)
    for m in moves:
        if m.field in _SETS:
            out[m.field] = out[m.field] | {m.name} if m.value else out[m.field] - {m.name}
        else:
            d = {k: v for k, v in out[m.field].items() if k != m.name}
            if m.value is not None:
                d[m.name] = m.value
            out[m.field] = d
    return out


def graph_moves(outputs, auto, model):
    """One-decision changes of the auto schedule's graph decisions: ``(Move, why)``."""
    from ..schedule.space import candidate_space

    base = _decisions(auto)
    inline, rf, pad, s2d = base["inline"], base["rfactor"], base["pad"], base["space_to_depth"]
    space = candidate_space(outputs, model, schedule=auto)
    for n in sorted(base["fold"]):  # the decisions that name the folded stage no longer fit: left out
        yield Move("fold", n, False), f"no fold of {n}"
    for n in sorted(base["innermost"]):
        yield Move("innermost", n, None), f"no innermost of {n}"
    for n in sorted(rf):
        yield Move("rfactor", n, None), f"no rfactor of {n}"
    for n in sorted(pad):
        yield Move("pad", n, False), f"no pad_reads of {n}"
    for n in sorted(set(space.pad) - pad):
        yield Move("pad", n, True), f"pad_reads {n}"
    for n in sorted(s2d):
        yield Move("space_to_depth", n, False), f"no space_to_depth of {n}"
    for n in sorted(set(space.space_to_depth) - s2d):
        yield Move("space_to_depth", n, True), f"space_to_depth {n}"
    for n, options in sorted(space.rfactor.items()):
        factors = sorted({o if isinstance(o, int) else o.factor for o in options
                          if not (isinstance(o, RFactor) and o.axis_last)})
        now = RFactor.of(rf[n]) if n in rf else None
        for f in _spread(factors, now and now.factor):
            yield Move("rfactor", n, f), f"rfactor {n} by {f}"
        # lanes along an axis moved last in the operands (per axis, one vector of the device's, or the fewest
        # lanes): another kernel form, not a factor near auto's
        lanes = {}
        for o in options:
            if isinstance(o, RFactor) and o.axis_last:
                lanes.setdefault(o.axis, []).append(o)
        for ax, os_ in sorted(lanes.items()):
            fit = [o for o in os_ if o.factor <= max(model.vector_width, 1)]
            o = max(fit, key=lambda o: o.factor) if fit else min(os_, key=lambda o: o.factor)
            if o != now:
                yield Move("rfactor", n, o), f"rfactor {n} by {o.describe()}"
        if now is not None and now.axis_last:  # and back: the lanes along the rows that auto passed over
            rows = _lanes_along_rows(outputs, auto, n, model)
            if rows is not None:
                yield Move("rfactor", n, rows), f"rfactor {n} by {rows.describe()}"
    for n in sorted(space.inline):
        yield Move("inline", n, n not in inline), ("materialise " if n in inline else "inline ") + n


def _lanes_along_rows(outputs, auto, name, model):
    """What rule rfactor_lanes proposes for stage ``name`` (on auto's folded and padded graph), where
    rfactor_batch_lanes took the stage first: the tuner's way back to it; None where it proposes nothing."""
    from ..schedule import Schedule
    from ..schedule.cost import stage_info
    from ..schedule.graph import apply_graph_schedule, stage_ops
    from ..schedule.space import RULE

    # folded first: a stride-phased data gradient is a sum to pad only once its crop computes it (conv2d_5x5_s3)
    g, _ = apply_graph_schedule(outputs, Schedule("graph", pad=auto.pad, fold=auto.fold))
    op = stage_ops(g)[1].get(name)
    props = RULE["rfactor_lanes"].propose(op, stage_info(op), model) if op is not None else []
    return props[0][0] if props else None


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
