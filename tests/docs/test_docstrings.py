"""Every public callable documents its parameters, its result and its errors (issue 13).

The API reference (mkdocstrings, ``docstring_style: sphinx``) renders these docstrings, so
each public function and class of ``polyad`` (``pa.*``), ``polyad.ops``, ``polyad.ops.nn``
(``pa.nn``) and ``polyad.schedule`` needs, in Sphinx field style:

* a docstring (``inspect.getdoc``: what ``help()`` and the generated functions show);
* ``:param name:`` for every parameter of its signature (a class: of its constructor);
  ``self`` is skipped, and ``*args``/``**kwargs`` may be described (``:param args:``,
  ``:param kwargs:``) but need not be: they are forwarded, and what they accept is
  written where they go;
* ``:returns:`` (functions; a class documents its constructor's parameters only);
* no ``:param`` for a name the signature does not have (griffe warns about those when
  the site builds: a stale docstring), and ``:raises X:`` only for X an exception
  of :mod:`polyad.errors`.

The namespaces are walked at run time (``__all__``, else the public names), so a new
public function without such a docstring fails here.
"""

import inspect
import re

import pytest

import polyad as pa
from polyad import errors


def _namespaces():
    return {"pa": pa, "pa.ops": pa.ops, "pa.nn": pa.nn, "pa.schedule": pa.schedule}


def public_callables():
    """(qualified name, object) of every public function and class of the four namespaces."""
    out = []
    for mn, m in _namespaces().items():
        names = getattr(m, "__all__", None) or [n for n in dir(m) if not n.startswith("_")]
        for n in names:
            o = getattr(m, n)
            if inspect.ismodule(o) or not callable(o):
                continue
            if inspect.isclass(o) and issubclass(o, BaseException):
                continue  # the error classes: documented on the Errors page, no parameters of their own
            out.append((f"{mn}.{n}", o))
    return out


_PARAM = re.compile(r"^:param (?:[\w\[\], .|]+ )?(\*{0,2}\w+):", re.M)
_RAISES = re.compile(r"^:raises? ([\w.]+):", re.M)


def problems(obj):
    """What the docstring of ``obj`` lacks or gets wrong, as a list of sentences (empty: fine)."""
    doc = inspect.getdoc(obj)
    if not doc or not doc.strip():
        return ["has no docstring"]
    out = []
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):  # no introspectable signature: nothing to match
        sig = None
    documented = {m.lstrip("*") for m in _PARAM.findall(doc)}
    if sig is not None:
        params = {}
        for p in sig.parameters.values():
            if p.name == "self":
                continue
            params[p.name] = p
        for name, p in params.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue  # optional: forwarded arguments are documented where they go
            if name not in documented:
                out.append(f"lacks ':param {name}:'")
        for name in sorted(documented - set(params)):
            out.append(f"documents ':param {name}:', which is not a parameter of {sig}")
    if not inspect.isclass(obj) and not re.search(r"^:returns:", doc, re.M):
        out.append("lacks ':returns:'")
    for exc in _RAISES.findall(doc):
        cls = getattr(errors, exc.rsplit(".", 1)[-1], None)
        if not (inspect.isclass(cls) and issubclass(cls, BaseException)):
            out.append(f"':raises {exc}:' is not an exception of polyad.errors")
    return out


_ALL = public_callables()


def test_the_public_api_is_all_there():
    names = {n for n, _ in _ALL}
    assert len(_ALL) >= 150, len(_ALL)
    for n in ("pa.differentiate", "pa.build", "pa.ops.add", "pa.ops.equal", "pa.ops.exp", "pa.nn.conv2d",
              "pa.schedule.Schedule", "pa.schedule.auto_schedule"):
        assert n in names, n


@pytest.mark.parametrize("name,obj", _ALL, ids=[n for n, _ in _ALL])
def test_docstring_has_params_returns_and_known_errors(name, obj):
    found = problems(obj)
    assert not found, f"{name}: " + "; ".join(found)


def test_the_check_catches_an_undocumented_public_function(monkeypatch):
    """What the parametrised test relies on: a new public name is walked, and a bare docstring fails."""

    def scale(x, factor=2.0):
        """Multiply ``x`` by ``factor``."""
        return x * factor

    def scaled(x, *args, **kwargs):
        """Multiply ``x``.

        :param x: the tensor.
        :param y: no such parameter.
        :returns: the product.
        :raises NoSuchError: never.
        """

    monkeypatch.setattr(pa.ops, "scale", scale, raising=False)  # pa.ops has no __all__: its public names
    monkeypatch.setattr(pa.nn, "scale", scale, raising=False)
    monkeypatch.setattr(pa.nn, "__all__", list(pa.nn.__all__) + ["scale"])  # pa.nn lists them
    assert ("pa.ops.scale", scale) in public_callables()
    assert ("pa.nn.scale", scale) in public_callables()
    assert problems(scale) == ["lacks ':param x:'", "lacks ':param factor:'", "lacks ':returns:'"]
    assert problems(lambda x: x) == ["has no docstring"]
    assert problems(scaled) == [
        f"documents ':param y:', which is not a parameter of {inspect.signature(scaled)}",
        "':raises NoSuchError:' is not an exception of polyad.errors",
    ]
