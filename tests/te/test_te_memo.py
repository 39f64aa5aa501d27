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


def test_graph_memo_keys_tensors_by_identity_and_values_by_value():
    """graph_memo: whole graphs by their tensors' identities (graphs are immutable), other args by value; an
    exception is not remembered, and the least recently used entry goes when the memo is full."""
    from polyad.te.memo import graph_memo

    calls = []

    @graph_memo(2)
    def names(outs, single):
        calls.append(1)
        if not outs:
            raise ValueError("no outputs")
        return tuple(t.name for t in outs), single

    X = pa.placeholder((3,), name="X")
    A = pa.compute((3,), lambda i: X[i] + 1, name="A")
    B = pa.compute((3,), lambda i: X[i] + 1, name="A")  # equal to A, another object
    assert names([A], True) == names((A,), True) == (("A",), True) and len(calls) == 1  # the same tensors
    assert names([A], True) is names([A], True) and len(calls) == 1
    assert names([B], True) == (("A",), True) and len(calls) == 2  # another object: computed
    assert names([A], False) == (("A",), False) and len(calls) == 3  # another value: computed
    for _ in range(2):
        try:
            names([], True)
        except ValueError:
            pass
    assert len(calls) == 5  # raised twice: nothing remembered
    names([A], True)  # pushed out by the two since (a memo of 2)
    assert len(calls) == 6
    names.cache_clear()
    names([B], True)
    assert len(calls) == 7


def test_graph_memo_keeps_its_args_alive_while_an_entry_lives():
    """No id in a key is reused while its entry lives: the entry holds the args (a list as a tuple, so that the
    caller's list may change)."""
    from polyad.te.memo import graph_memo

    @graph_memo(4)
    def first_name(outs):
        return outs[0].name

    X = pa.placeholder((3,), name="X")
    outs = [pa.compute((3,), lambda i: X[i] * 2.0, name="twice")]
    kept = weakref.ref(outs[0])
    assert first_name(outs) == "twice"
    outs.clear()
    gc.collect()
    assert kept() is not None
    first_name.cache_clear()
    gc.collect()
    assert kept() is None
