"""polyad's checksummed JSON records (programs, device records): anything unusable is warned about and ignored."""

import pytest

from polyad.errors import PolyadError
from polyad.runtime import builder, records


def _stored(tmp_path, name="ab12.json", payload=None):
    path = str(tmp_path / name)
    records.write(path, {"source": "kernel", "n": 3} if payload is None else payload)
    return path


def test_a_record_reads_back_as_written(tmp_path):
    assert records.read(_stored(tmp_path)) == {"source": "kernel", "n": 3}


def test_a_byte_that_is_not_utf8_is_a_warning_not_a_crash(tmp_path):
    """A UnicodeDecodeError (a ValueError) went past ``except OSError`` out of every build, ``polyad devices`` and
    the doctor, until the file was deleted by hand."""
    path = _stored(tmp_path)
    with open(path, "r+b") as f:
        f.seek(10)
        f.write(b"\xff")
    with pytest.warns(RuntimeWarning, match=r"is malformed \(UnicodeDecodeError"):
        assert records.read(path) is None


def test_a_record_copied_under_another_key_is_not_served(tmp_path):
    """The checksum covers the payload, not where it lies: a program record copied over another graph's name (a
    cache synced by path) ran the other graph's program."""
    a = _stored(tmp_path, "aa11.json", {"source": "times 2"})
    b = str(tmp_path / "bb22.json")
    with open(a, "rb") as src, open(b, "wb") as dst:
        dst.write(src.read())
    with pytest.warns(RuntimeWarning, match="the record of key 'aa11', copied under another"):
        assert records.read(b) is None
    assert records.read(a) == {"source": "times 2"}


def test_a_record_written_before_keys_were_kept_still_reads(tmp_path):
    import json

    path = str(tmp_path / "cc33.json")
    payload = {"source": "old"}
    with open(path, "w") as f:
        json.dump({"format": records._MAGIC, "sha256": records._checksum(json.dumps(payload, sort_keys=True)),
                   "payload": payload}, f)
    assert records.read(path) == payload


@pytest.mark.parametrize("text", ["abc", "0", "-5", "nan", "inf"])
def test_a_timeout_variable_that_is_not_a_positive_number_names_itself(monkeypatch, text):
    """``float()`` of it raised a bare ValueError when polyad was imported; 0 or less failed every build; inf
    overflowed the wait's system call (a raw OverflowError from selectors)."""
    monkeypatch.setenv("POLYAD_BUILD_TIMEOUT", text)
    with pytest.raises(PolyadError, match=f"POLYAD_BUILD_TIMEOUT='{text}': expected a positive, finite number"):
        builder.build_timeout()
    monkeypatch.setenv("POLYAD_BUILD_TIMEOUT", "12.5")
    assert builder.build_timeout() == 12.5
    monkeypatch.setenv("POLYAD_BUILD_TIMEOUT", "1e308")
    assert builder.build_timeout() == 1e6  # as long as a wait can be
    monkeypatch.delenv("POLYAD_BUILD_TIMEOUT")
    assert builder.build_timeout() == 600.0
