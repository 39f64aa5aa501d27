"""Fresh names: the one rule every layer uses to keep names unique (``name``, then ``name_1``, ``name_2``, ...)."""


def fresh_name(base, used):
    """``base`` if it is not in ``used``, else the first of ``base_1``, ``base_2``, ... that is not (``used`` is
    left as it is: the caller adds the name where it keeps it)."""
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}_{k}"
    return name
