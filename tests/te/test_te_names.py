"""The one fresh-name rule (te/names.py) that the printer, the polyhedral stages and the schedule's graph
transformations share."""

from polyad.poly.stage import safe_name
from polyad.schedule.graph import uniquely_named
from polyad.te.names import fresh_name
from polyad.te.printer import unique_names

import polyad as pa


def test_fresh_name_appends_the_first_free_counter_and_leaves_used_alone():
    used = {"T", "T_1", "T_3"}
    assert fresh_name("T", used) == "T_2" and fresh_name("U", used) == "U"
    assert used == {"T", "T_1", "T_3"}


def test_every_layer_names_repeats_the_same_way():
    X = pa.placeholder((3,), name="X")
    A = pa.compute((3,), lambda i: X[i] + 1.0, name="A")
    B = pa.compute((3,), lambda i: A[i] * 2.0, name="A")
    C = pa.compute((3,), lambda i: B[i] - 1.0, name="A")
    names = unique_names([A.op, B.op, C.op])
    assert [names[id(o)] for o in (A.op, B.op, C.op)] == ["A", "A_1", "A_2"]
    assert [t.name for t in uniquely_named([C])] == ["A_2"]
    used = {"A"}
    assert [safe_name("A", used), safe_name("A", used), safe_name("min", used)] == ["A_1", "A_2", "min_"]
