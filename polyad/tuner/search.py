"""Search policies over a :class:`~polyad.tuner.configs.ConfigSpace`.

:class:`Evolutionary` is Ansor's loop, at the scale of a gradient graph: each round breeds a few
hundred configs, most from the fastest measured ones (mutation: another candidate for one or two stages,
or another graph variant; crossover: per stage, one parent's candidate), some drawn at random, adds the
best-of-each-stage combination of every variant (stages are measured jointly, so their times are known
separately) and one config on a graph variant a move away from the fastest ones'
(:meth:`~polyad.tuner.configs.ConfigSpace.probe`: a local search over the graph decisions), ranks the bred ones
with a cost model and measures the top of the ranking plus a few of the rest, the random draws among them
(exploration).

The cost model predicts a stage's log time from :func:`polyad.schedule.cost.stage_features` (isl counts,
the schedule, the analytic model's own terms) with gradient-boosted trees (scikit-learn's
``GradientBoostingRegressor``), retrained on every measured stage once they have grown by a quarter since the
last training; a config's
prediction is the sum over its stages.  Until enough stages are measured it ranks by the analytic
model (:func:`~polyad.schedule.cost.stage_cost`).  :class:`RandomSearch` is the baseline it must beat.
"""

import math

import numpy as np

_MIN_SAMPLES = 12  # measured stages before the learned model ranks
# the model is trained again once the measured stages have grown by this fraction since its last training: a round
# of four candidates adds a hundred stages to lenet_step's thousands, and retraining after every round was a fifth
# of the tuner's own process in a 90 s tuning (4.4 s of 20), growing with the samples
_REFIT_GROWTH = 0.25
_POOL = 384  # configs bred per round


class CostModel:
    """Gradient-boosted trees on (stage features -> log seconds), with the analytic model as prior."""

    def __init__(self, model, seed=0):
        self.dm = model
        self.seed = seed
        self.X, self.y = [], []
        self.keys = None
        self.reg = None
        self._fitted_on = 0  # samples of the last training
        self._feat = {}
        # (id(candidates), index) -> predicted seconds, by the trees trained last.  A stage's candidates tuple is
        # shared by the variants that have the stage unchanged (ConfigSpace), and its features are a function of
        # the stage's info and the candidate alone; integers hash where a StageSchedule hashes its fields
        self._pred = {}

    def features(self, choice, ss):
        key = (id(choice), ss)
        f = self._feat.get(key)
        if f is None:
            from ..schedule.cost import stage_features

            d = stage_features(choice.info, ss, self.dm)
            if self.keys is None:
                self.keys = sorted(d)
            f = np.array([float(d[k]) for k in self.keys], dtype=np.float64)
            self._feat[key] = f
        return f

    def add(self, space, config, trial):
        for choice, ss in space.stage_pairs(config):
            t = trial.stages.get(choice.name)
            if t is not None and t > 0:
                self.X.append(self.features(choice, ss))
                self.y.append(math.log(t))

    def fit(self):
        """Train on the measured stages, when there are enough (``_MIN_SAMPLES``) and they have grown by
        ``_REFIT_GROWTH`` since the last training (else the trees trained then go on ranking)."""
        if len(self.y) < _MIN_SAMPLES:
            self.reg = None
            return
        if self.reg is not None and len(self.y) < (1 + _REFIT_GROWTH) * self._fitted_on:
            return
        self._fitted_on = len(self.y)
        self._pred = {}
        from sklearn.ensemble import GradientBoostingRegressor

        # exact (not histogram) trees: a search has tens to a few thousand samples, where the histogram
        # learner's per-iteration threading costs seconds a fit and these take milliseconds
        self.reg = GradientBoostingRegressor(n_estimators=80, max_depth=3, learning_rate=0.15, min_samples_leaf=2,
                                             random_state=self.seed)
        self.reg.fit(np.array(self.X), np.array(self.y))

    def predict(self, space, configs):
        """Predicted seconds of each config."""
        from ..schedule.cost import stage_cost

        if not configs:
            return []
        if self.reg is None:
            return [sum(stage_cost(ch.info, ss, self.dm) for ch, ss in space.stage_pairs(c)) for c in configs]
        # each stage schedule once, until the trees are trained again: a round's 384 configs share most stages
        # with each other and with earlier rounds' (lenet_step: 11000 rows a round, a few hundred new)
        pred, new, keys = self._pred, {}, []
        for v, picks in configs:
            mine = []
            for ch, i in zip(space.variants[v].stages, picks):
                k = (id(ch.candidates), i)
                if k not in pred and k not in new:
                    new[k] = ch
                mine.append(k)
            keys.append(mine)
        if new:
            rows = np.array([self.features(ch, ch.candidates[k[1]]) for k, ch in new.items()])
            pred.update(zip(new, np.exp(self.reg.predict(rows)).tolist()))
        return [float(np.array([pred[k] for k in mine], dtype=np.float64).sum()) for mine in keys]


class StageTimes:
    """Each measured stage schedule's times over every trial that ran it, keyed as the cost model keys stages (the
    space's stage choice and the schedule: variants that share a stage's space share its times).  A stage
    schedule is run by the dozens of configs the search breeds around it, so its median pools their moments
    where a config's own reading, or a stage's fastest time, is one moment (the luckiest, for the fastest).

    :param space: the :class:`~polyad.tuner.configs.ConfigSpace`.
    """

    def __init__(self, space):
        self.space = space
        self._times = {}  # (id(choice), schedule) -> seconds
        self._medians = {}  # the same keys -> the median, until a time is added
        self._measured = {}  # id(choice) -> {schedule: None}, in the order measured
        # id(choice) -> its best candidate, until a time of it is added: every round asks it of every stage of every
        # variant (lenet_step: 150 variants of 30 stages, 2.2 s of a 150 s tuning when worked out each time)
        self._best = {}

    def add(self, config, trial):
        """The stage times of one trial of ``config`` (those it has)."""
        for ch, ss in self.space.stage_pairs(config):
            v = trial.stages.get(ch.name)
            if v is not None:
                self._times.setdefault((id(ch), ss), []).append(v)
                self._medians.pop((id(ch), ss), None)
                self._best.pop(id(ch), None)
                self._measured.setdefault(id(ch), {})[ss] = None

    def median(self, choice, ss):
        """The median time of stage ``choice`` under schedule ``ss``, or None where no trial ran it."""
        key = (id(choice), ss)
        m = self._medians.get(key)
        if m is None and key in self._times:
            m = self._medians[key] = float(np.median(self._times[key]))
        return m

    def estimate(self, config):
        """The sum of ``config``'s stages' medians, or None where a stage of it has no time."""
        total = 0.0
        for ch, ss in self.space.stage_pairs(config):
            m = self.median(ch, ss)
            if m is None:
                return None
            total += m
        return total

    def best_candidate(self, choice):
        """The index (in ``choice.candidates``) of the measured candidate with the lowest median, or None."""
        best = self._best.get(id(choice))
        if best is not None:
            return best
        measured = self._measured.get(id(choice))
        if not measured:
            return None
        best = self._best[id(choice)] = choice.position(min(measured, key=lambda ss: self.median(choice, ss)))
        return best


class RandomSearch:
    """Uniformly random configs (the baseline)."""

    name = "random"

    def __init__(self, space, rng, model=None, stage_times=None):
        self.space, self.rng = space, rng

    def tell(self, config, trial):
        pass

    def propose(self, n, seen):
        out, tries = [], 0
        while len(out) < n and tries < 50 * n:
            tries += 1
            c = self.space.random(self.rng)
            if c not in seen and c not in out:
                out.append(c)
        return out


class Evolutionary:
    """Model-guided evolutionary search (see the module docstring).

    :param space: the :class:`~polyad.tuner.configs.ConfigSpace`.
    :param rng: a ``random.Random`` (the whole search is deterministic given it and the trials).
    :param model: the :class:`~polyad.schedule.DeviceModel` (the prior and the features).
    :param eps: the share of each batch measured at random from the bred pool (exploration).
    :param stage_times: a :class:`StageTimes` its caller fills with every trial (``pa.tune``'s, which also holds the
        end's readings), or None: its own, filled by :meth:`tell`.
    """

    name = "evolutionary"

    def __init__(self, space, rng, model, eps=0.25, stage_times=None):
        self.space, self.rng, self.eps = space, rng, eps
        self.cost = CostModel(model, seed=rng.randrange(1 << 30))
        self.results = {}  # config -> Trial
        self._own_stage_times = stage_times is None
        self.stage_times = StageTimes(space) if stage_times is None else stage_times
        self._fresh = False
        self._model_tried = False

    def tell(self, config, trial):
        self.results[config] = trial
        if trial.ok:
            self.cost.add(self.space, config, trial)
            self._fresh = True
            if self._own_stage_times:
                self.stage_times.add(config, trial)

    def _parents(self, k=8):
        ok = sorted((t.time, c) for c, t in self.results.items() if t.ok)
        return [c for _, c in ok[:k]] or [self.space.auto_config()]

    def _variant_bests(self, parents):
        """The fastest measured config of each variant that none of ``parents`` is on, fastest first: where the
        probes go on once the parents' variants have had every move.  The fastest configs crowd onto one or two
        variants, and a decision that helps only beside another is reached from a variant slower than theirs."""
        taken, best = {c[0] for c in parents}, {}
        for c, t in self.results.items():
            if t.ok and c[0] not in taken and (c[0] not in best or t.time < best[c[0]][0]):
                best[c[0]] = (t.time, c)
        return [c for _, c in sorted(best.values())]

    def _variant_bias(self):
        """Per graph variant, the median over its measured configs of their time over the model's prediction, and
        that median over all of them (for a variant not measured yet).  A config's prediction is the sum of its
        stages', which misses what a graph decision does beyond its own stages: the launches and overlap of its
        kernels on the device, or the caches they share.  The trees learn a stage's time from its features, which
        are the same in every variant that has the stage, so two variants' times for it average out.  Scaled by its
        variant's bias, a config bred from a fast variant ranks as fast as that variant measured.  On the tests'
        fake device, where two graph decisions halve every stage's time together, the search ranked the pair's
        mutations by their stages alone and spent 289 of 300 trials on other variants (seed 2: d_X's blocks left
        at 1.59x their best)."""
        ok = [(c, t.time) for c, t in self.results.items() if t.ok and t.time > 0]
        if not ok:
            return {}, 1.0
        ratios = {}
        for (c, t), p in zip(ok, self.cost.predict(self.space, [c for c, _ in ok])):
            if p > 0:
                ratios.setdefault(c[0], []).append(t / p)
        if not ratios:
            return {}, 1.0
        bias = {v: float(np.median(r)) for v, r in ratios.items()}
        return bias, float(np.median([x for r in ratios.values() for x in r]))

    def _best_of_each_stage(self):
        """Per variant, every stage's fastest measured candidate, by the median of its times over the configs that
        ran it: its fastest single time was the luckiest moment of any of them (on a fake device with 10% noise a
        run, the search's best-visited config came 0.8-1.8 points nearer the optimum by the median)."""
        out = []
        for v, var in enumerate(self.space.variants):
            picks = tuple(self.stage_times.best_candidate(ch) for ch in var.stages)
            if None not in picks:
                out.append((v, picks))
        return out

    def propose(self, n, seen):
        if self._fresh:
            self.cost.fit()
            self._fresh = False
        rng, space = self.rng, self.space
        parents = self._parents()
        pool, drawn = [], set()
        for _ in range(_POOL):
            r = rng.random()
            if r < 0.6:
                c = space.mutate(rng.choice(parents), rng)
            elif r < 0.85 and len(parents) > 1:
                c = space.mutate(space.crossover(rng.choice(parents), rng.choice(parents), rng), rng, 0.0)
            else:
                c = space.random(rng)
                drawn.add(c)
            pool.append(c)
        pool = [c for c in dict.fromkeys(pool) if c not in seen]
        out = [c for c in self._best_of_each_stage() if c not in seen][:max(1, n // 2)]
        if not self._model_tried:  # the analytic model's own argmin, once, early
            self._model_tried = True
            c = space.model_config()
            if c not in seen and c not in out:
                out.insert(0, c)
        # one graph variant a move from the fastest configs', built this round if new: the search's way to
        # variants past the ones built at the start, and to combinations of decisions (lenet_step: no pad_reads
        # of one stage 0.78x auto, materialising another 0.83x, each alone)
        probe = space.probe(parents + self._variant_bests(parents), rng, seen | set(out)) if len(out) < n else None
        if probe is not None:
            out.append(probe)
        pool = [c for c in pool if c not in out]
        if not pool:
            return out[:n]
        n_rand = min(len(pool), int(round(self.eps * (n - len(out)))) if n - len(out) > 1 else 0)
        # the random draws are the exploration's, not the model's to rank: every stage of one is a schedule the
        # model has not seen, and they were 89% of the rows it computed features for (lenet_step, 60 s: 89000
        # of 102000) while it ranked none of them into a round (0 of 286 picks)
        bred = [c for c in pool if c not in drawn]
        bias, typical = self._variant_bias()
        scores = [p * bias.get(c[0], typical) for c, p in zip(bred, self.cost.predict(space, bred))]
        ranked = [c for _, _, c in sorted(zip(scores, range(len(bred)), bred))]
        out += ranked[:max(0, n - len(out) - n_rand)]
        rest = [c for c in pool if c not in out]
        rng.shuffle(rest)
        out += rest[:n - len(out)]
        return out[:n]


POLICIES = {"evolutionary": Evolutionary, "random": RandomSearch}
