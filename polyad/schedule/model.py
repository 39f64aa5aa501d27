"""The device model: what the auto-scheduler's cost model knows about a device.

Every figure is measured on the device (:mod:`polyad.runtime.calibrate`) or
read from a recorded calibration (a JSON file of :meth:`DeviceModel.to_dict`);
none is a constant of this module.  :meth:`DeviceModel.from_calibration`
derives the model from a calibration and the probe's capability set:

- ``widths``: the float32 vector widths the device compiles and computes
  right (the probe); the cost model never proposes another;
- ``gflops``: the register-only multiply-add rate at each of those widths;
  ``vector_width``: the best (the narrowest within 5% of the fastest: less
  code, fewer registers for the same speed);
- ``fma_slots``: the most independent accumulators that still run at 95% of
  the best rate (the blocks the rules size by it gain from every accumulator
  up to there: conv2d_3x3's dW with 9 lane accumulators ran 2.1 ms, with 3
  3.9 ms); ``registers``: the most that still reach 75% (beyond, spills
  dominate);
- ``cache_gbs``, ``dram_gbs``: cache-resident reads and a streaming copy;
- ``load_rate``: vector loads issued per second by the whole device, taken
  as its multiply-add instruction rate (two load ports beside two FMA pipes
  on the x86 cores measured so far);
- ``launch_s``: one kernel launch; ``local_sizes``: on GPUs, the work-group
  sizes the copy kernel ran fastest with;
- ``nontemporal``: the probe's nontemporal stores compile and compute right
  (CPUs); ``cache_bytes``: the last-level cache the device reports
  (``CL_DEVICE_GLOBAL_MEM_CACHE_SIZE``; 0: unknown), against which the
  ``nontemporal_stores`` rule sizes a stage's outputs;
- ``l1_bytes``, ``fill_gbs`` (CPUs): the working set a work-item re-reads at
  cache speed, and the rate at which short scattered rows beyond it are
  refilled from the next level: the model's refill term
  (:func:`polyad.schedule.cost.block_footprint`).
"""

from dataclasses import asdict, dataclass, fields

from ..errors import DeviceError

MODEL_FORMAT = "polyad-device-model-1"


@dataclass(frozen=True)
class DeviceModel:
    """What the cost model knows about a device (float32 figures, whole device).

    Made from a calibration (:meth:`from_calibration`), a recorded model (:meth:`from_dict`, :meth:`load`), or
    for a device (:meth:`of`) rather than by hand.

    :param kind: ``"cpu"`` or ``"gpu"``.
    :param cores: compute units.
    :param widths: float32 vector widths that compile and compute correctly (must include 1).
    :param gflops: ``((width, GFLOP/s of independent multiply-adds), ...)`` (or a dict width -> GFLOP/s).
    :param vector_width: the best width.
    :param fma_slots: independent (vector) accumulators that keep the multiply-add pipes busy.
    :param registers: vector accumulators a work-item holds before spilling.
    :param cache_gbs: cache-resident read bandwidth, GB/s.
    :param dram_gbs: streaming bandwidth, GB/s.
    :param load_rate: G vector loads issued per second.
    :param launch_s: seconds per kernel launch.
    :param min_parallel: work-items (CPU) or threads (GPU) below which the device idles.
    :param local_sizes: work-group sizes to choose from (empty: the implementation picks).
    :param source: where the figures come from.
    :param nontemporal: nontemporal vector stores compile and compute right (the probe's family).
    :param cache_bytes: the device's last-level cache in bytes (0: unknown).
    :param l1_bytes: the working set a work-item re-reads at ``cache_gbs`` (the calibration's largest slice that
        reads within 70% of its smallest's rate; 0: unknown, and the model's refill term is off).
    :param fill_gbs: GB/s of cache lines brought into that cache from the next level when a block's reads
        outgrow it: short rows scattered over a slice beyond ``l1_bytes`` (0: unknown, the refill term off).
    :raises DeviceError: when ``widths`` lacks 1 (scalar code does not work on the device).
    """

    kind: str  # "cpu" or "gpu"
    cores: int  # compute units
    widths: tuple  # float32 vector widths that compile and compute correctly
    gflops: tuple  # ((width, GFLOP/s of independent multiply-adds), ...)
    vector_width: int  # the best width
    fma_slots: int  # independent (vector) accumulators that keep the multiply-add pipes busy
    registers: int  # vector accumulators a work-item holds before spilling
    cache_gbs: float  # cache-resident read bandwidth
    dram_gbs: float  # streaming bandwidth
    load_rate: float  # G vector loads issued per second
    launch_s: float  # seconds per kernel launch
    min_parallel: int  # work-items (CPU) or threads (GPU) below which the device idles
    local_sizes: tuple = ()  # work-group sizes to choose from (empty: the implementation picks)
    source: str = ""  # where the figures come from
    nontemporal: bool = False  # nontemporal vector stores compile and compute right (the probe)
    cache_bytes: int = 0  # the last-level cache (0: unknown)
    l1_bytes: int = 0  # the working set a work-item re-reads at cache_gbs (0: unknown)
    fill_gbs: float = 0.0  # cache lines refilled from the next level, GB/s (0: unknown)

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(sorted(int(w) for w in self.widths)))
        object.__setattr__(self, "gflops", tuple(sorted((int(w), float(g)) for w, g in dict(self.gflops).items())))
        object.__setattr__(self, "local_sizes", tuple(int(s) for s in self.local_sizes))
        if 1 not in self.widths:
            raise DeviceError(f"device model {self.source!r}: scalar code does not work on this device")

    @property
    def peak_gflops(self):
        return max(g for _, g in self.gflops)

    def gflops_at(self, width):
        """GFLOP/s of independent multiply-adds at ``width`` lanes (a width the device lacks: scalar)."""
        table = dict(self.gflops)
        return table.get(width) or table.get(1) or self.peak_gflops

    # -- data -----------------------------------------------------------------------------------
    def to_dict(self):
        d = asdict(self)
        d["gflops"] = {str(w): g for w, g in self.gflops}
        d["widths"] = list(self.widths)
        d["local_sizes"] = list(self.local_sizes)
        return {"format": MODEL_FORMAT, **d}

    @classmethod
    def from_dict(cls, data, where="device model"):
        if not isinstance(data, dict) or data.get("format") != MODEL_FORMAT:
            raise DeviceError(f"{where}: not a polyad device model (format {MODEL_FORMAT!r})")
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except (TypeError, ValueError) as e:
            raise DeviceError(f"{where}: {e}") from None

    @classmethod
    def load(cls, path):
        """A recorded model (a JSON file of :meth:`to_dict`)."""
        import json

        try:
            with open(path, encoding="utf-8") as f:
                return cls.from_dict(json.load(f), where=str(path))
        except (OSError, ValueError) as e:
            raise DeviceError(f"cannot read the device model {path}: {e}") from None

    @classmethod
    def from_calibration(cls, cal, widths=None, source="", nontemporal=False, cache_bytes=0):
        """The model of a calibration (``polyad.runtime.calibrate.measure``'s dict), the probe's widths and
        nontemporal stores, and the cache size the device reports."""
        gpu = cal["kind"] == "gpu"
        cores = int(cal["compute_units"])
        measured = {int(w): float(g) for w, g in cal["gflops"].items()}
        usable = sorted(set(measured) & set(widths if widths is not None else measured)) or [1]
        table = {w: measured[w] for w in usable if w in measured}
        best = max(table.values())
        vector_width = min(w for w in usable if table[w] >= 0.95 * best)
        accs = {int(a): float(g) for a, g in cal["accumulators"].items()}
        top = max(accs.values())
        fma_slots = max(a for a, g in accs.items() if g >= 0.95 * top)
        registers = max(a for a, g in accs.items() if g >= 0.75 * top)
        acc_width = int(cal.get("accumulator_width", vector_width))
        load_rate = accs[max(accs, key=accs.get)] / (2 * acc_width)  # multiply-add instructions per ns
        return cls(
            kind="gpu" if gpu else "cpu", cores=cores, widths=tuple(usable), gflops=tuple(table.items()),
            vector_width=vector_width, fma_slots=fma_slots, registers=registers,
            cache_gbs=float(cal["cache_gbs"]), dram_gbs=float(cal["stream_gbs"]), load_rate=load_rate,
            launch_s=float(cal["launch_s"]),
            min_parallel=cores * 256 if gpu else max(4, 4 * cores),
            local_sizes=tuple(cal.get("local_sizes", ())) if gpu else (), source=source,
            nontemporal=bool(nontemporal) and not gpu, cache_bytes=int(cache_bytes),
            l1_bytes=0 if gpu else int(cal.get("l1_bytes", 0)),  # refills: a CPU's (a GPU's work-items share caches)
            fill_gbs=0.0 if gpu else float(cal.get("fill_gbs", 0.0)))

    @classmethod
    def of(cls, device=None):
        """The model of ``device``: a DeviceModel as is, a recorded model (dict or JSON path), else the
        calibrated model of a ``pyopencl.Device`` (None: the default device), measured once and cached.

        The calibration runs kernels: it lives with the runtime, and the build driver
        (:func:`polyad.pipeline.device_model`) owns it; this is the scheduler's door to it.
        """
        if isinstance(device, DeviceModel):
            return device
        if isinstance(device, dict):
            return cls.from_dict(device)
        if isinstance(device, str) and device.endswith(".json"):
            return cls.load(device)
        from ..pipeline import device_model  # noqa: PLC0415 - see the docstring

        return device_model(device)

    def describe(self):
        rates = ", ".join(f"float{w} {g:.0f}" for w, g in self.gflops)
        lines = [
            f"{self.kind}, {self.cores} compute units ({self.source})" if self.source else
            f"{self.kind}, {self.cores} compute units",
            f"  multiply-add GFLOP/s: {rates}; best width {self.vector_width}",
            f"  accumulators: {self.fma_slots} keep the pipes busy, {self.registers} before spills",
            f"  bandwidth: stream {self.dram_gbs:.1f} GB/s, cache {self.cache_gbs:.0f} GB/s; "
            f"loads {self.load_rate:.1f} G/s; launch {self.launch_s * 1e6:.0f} us",
        ]
        if self.l1_bytes and self.fill_gbs:
            lines.append(f"  a work-item's cache: {self.l1_bytes >> 10} KiB, refilled at {self.fill_gbs:.0f} GB/s")
        if self.local_sizes:
            lines.append("  work-group sizes: " + ", ".join(map(str, self.local_sizes)))
        if self.cache_bytes or self.nontemporal:
            lines.append(f"  last-level cache {self.cache_bytes / 2**20:.0f} MiB; nontemporal stores: "
                         + ("yes" if self.nontemporal else "no"))
        return "\n".join(lines)
