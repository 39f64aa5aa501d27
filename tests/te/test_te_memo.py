"""op_memo: a pure function of a stage, computed once per stage while the stage lives; Recent: a bounded memo."""

import gc
import weakref

import polyad as pa
from polyad.te.memo import op_memo


def test_computed_once_per_op_and_forgotten_with_it():
    calls = []

    @op_memo
    def name_twice(op):
        calls.append(op.name)
        return op.name * 2

    X = pa.placeholder((3,), name="X")
    A = pa.compute((3,), lambda i: X[i] + 1, name="A")
    assert name_twice(A.op) == name_twice(A.op) == "AA"
    assert calls == ["A"]
    B = pa.compute((3,), lambda i: X[i] + 1, name="A")  # equal, another op: computed again
    assert name_twice(B.op) == "AA" and calls == ["A", "A"]
    gone = weakref.ref(A.op)
    del A, B
    gc.collect()
    assert gone() is None  # the memo keeps no stage alive


def test_an_argument_without_weak_references_is_not_memoised():
    calls = []

    @op_memo
    def length(op):
        calls.append(1)
        return len(op)

    assert length((1, 2)) == length((1, 2)) == 2
    assert len(calls) == 2


def test_recent_keeps_the_most_recently_used_entries():
    """The memo of isl ASTs, tile splits, legality checks and auto schedules: a hit makes an entry recent again,
    and the least recently used goes when it is full."""
    from polyad.te.memo import Recent

    m = Recent(2)
    assert m.put("a", 1) == 1 and m.put("b", 2) == 2 and len(m) == 2
    assert m.get("a") == 1  # "b" is now the least recently used
    m.put("c", 3)
    assert m.get("b") is None and m.get("a") == 1 and m.get("c") == 3 and len(m) == 2
    assert m.get("missing") is None
