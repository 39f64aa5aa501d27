"""Checksummed JSON records on disk: what polyad learns about a device once and keeps.

The probe's capability set, the calibration and the program cache are small
JSON documents keyed by a hash.  A record is written atomically (a temporary
file, then ``os.replace``) with the SHA-256 of its whole content beside the
payload; a record whose checksum fails, or that does not parse, is reported
with a warning and treated as missing (then measured or generated again), never
trusted.  ``locked`` serialises the processes that would measure the same
thing at once (pytest-xdist workers, a tuner's pool): the second waits and
reads what the first wrote.
"""

import contextlib
import hashlib
import json
import os
import tempfile
import warnings

_MAGIC = "polyad-record-1"


def cache_dir():
    """The root of polyad's on-disk caches ($POLYAD_CACHE_DIR, else under the user cache dir)."""
    d = os.environ.get("POLYAD_CACHE_DIR")
    if d:
        return d
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("polyad"), "kernels")


def record_path(kind, key):
    """Where the record ``key`` of ``kind`` (``devices``, ``programs``, ...) lives.

    Device records (probe, calibration) go to ``$POLYAD_DEVICE_CACHE_DIR`` when it is set: what a
    machine is does not change with a project's kernel cache (tests point the kernel cache at a
    fresh directory and keep measuring the device once).
    """
    root = os.environ.get("POLYAD_DEVICE_CACHE_DIR") if kind == "devices" else None
    if root:
        return os.path.join(root, key[:2], key + ".json")
    return os.path.join(cache_dir(), kind, key[:2], key + ".json")


def digest(*parts):
    """A hex SHA-256 of the parts (strings), unambiguous about where one ends."""
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()


def _checksum(payload_text):
    return hashlib.sha256(payload_text.encode()).hexdigest()


def read(path, what="record"):
    """The payload stored at ``path`` (a JSON value), or None when missing or unusable (warned)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        return _unusable(path, what, f"unreadable ({e})")
    except ValueError as e:  # a byte that is not UTF-8 (a UnicodeDecodeError) raised out of every build
        return _unusable(path, what, f"malformed ({type(e).__name__}: {e})")
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("format") != _MAGIC:
            return _unusable(path, what, "not a polyad record")
        payload = doc["payload"]
        if _checksum(json.dumps(payload, sort_keys=True)) != doc.get("sha256"):
            return _unusable(path, what, "checksum mismatch (edited, truncated or corrupt)")
        if doc.get("key", _key_of(path)) != _key_of(path):  # records written before the key was kept have none
            return _unusable(path, what, f"the record of key {doc['key']!r}, copied under another")
        return payload
    except (ValueError, KeyError, TypeError) as e:
        return _unusable(path, what, f"malformed ({type(e).__name__}: {e})")


def _key_of(path):
    """The key a record is stored under: its file name (a record copied under another name, as a cache synced by
    path may, ran the other graph's program)."""
    return os.path.basename(path).removesuffix(".json")


def _unusable(path, what, why):
    warnings.warn(f"polyad: the cached {what} {path} is {why}; ignoring it", RuntimeWarning, stacklevel=3)
    return None


def write(path, payload, what="record"):
    """Store ``payload`` (JSON-ready) at ``path`` atomically; an unwritable cache costs a warning only."""
    text = json.dumps({"format": _MAGIC, "sha256": _checksum(json.dumps(payload, sort_keys=True)),
                       "key": _key_of(path), "payload": payload}, sort_keys=True)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)  # readers never see a partial record
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        warnings.warn(f"polyad: cannot write the {what} {path} ({e}); continuing without it", RuntimeWarning,
                      stacklevel=3)


@contextlib.contextmanager
def locked(path):
    """An exclusive lock on ``path + '.lock'`` across processes (a no-op where locking is unavailable)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    f = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        f = open(path + ".lock", "a+")  # noqa: SIM115 - held for the block
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
    except OSError:
        if f is not None:
            f.close()
        f = None
    try:
        yield
    finally:
        if f is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
            f.close()
