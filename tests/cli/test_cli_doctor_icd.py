"""The doctor finds a GPU driver's OpenCL library that no ICD file registers (the lent H200's container had
/usr/lib/libnvidia-opencl.so and no nvidia.icd: every program saw PoCL alone), says how to register it, and
--fix does."""

import os

from polyad.runtime import doctor


def _tree(tmp_path, icds=()):
    lib, vendors = tmp_path / "lib", tmp_path / "vendors"
    lib.mkdir()
    vendors.mkdir()
    (lib / "libnvidia-opencl.so.1").write_text("")
    (lib / "libOpenCL.so.1").write_text("")  # the loader itself is no vendor
    (vendors / "pocl.icd").write_text("libpocl.so.2\n")
    for name, text in icds:
        (vendors / name).write_text(text)
    return lib, vendors


def test_an_unregistered_vendor_library_is_found_and_a_registered_one_is_not(tmp_path):
    lib, vendors = _tree(tmp_path)
    assert doctor.unregistered_vendor_libraries([str(lib)], [str(vendors)]) == [
        ("NVIDIA", str(lib / "libnvidia-opencl.so.1"), "nvidia.icd")]
    for text in ("libnvidia-opencl.so.1\n", f"{lib}/libnvidia-opencl.so.1", "/elsewhere/libnvidia-opencl.so"):
        (vendors / "nvidia.icd").write_text(text)
        assert doctor.unregistered_vendor_libraries([str(lib)], [str(vendors)]) == [], text
    # OCL_ICD_VENDORS may name one .icd file: the loader reads that alone
    assert doctor.unregistered_vendor_libraries([str(lib)], [str(vendors / "pocl.icd")])[0][0] == "NVIDIA"
    assert doctor.unregistered_vendor_libraries([str(tmp_path / "none")], [str(vendors)]) == []


def test_the_doctor_says_how_to_register_it_and_fix_registers_it(tmp_path, monkeypatch, capsys):
    lib, vendors = _tree(tmp_path)
    monkeypatch.setattr(doctor, "LIBRARY_DIRS", (str(lib),))
    monkeypatch.setenv("OCL_ICD_VENDORS", str(vendors))  # the loader's folder, and the one --fix writes
    monkeypatch.setenv("LD_LIBRARY_PATH", "")
    monkeypatch.setattr(doctor, "report", lambda: (["ok   a device"], True, True))
    assert doctor.main([]) == 0
    out = capsys.readouterr().out
    assert f"NVIDIA's OpenCL library {lib}/libnvidia-opencl.so.1 is installed but no ICD file names it" in out
    assert f"`echo {lib}/libnvidia-opencl.so.1 > {vendors}/nvidia.icd`" in out and "--fix" in out
    assert not (vendors / "nvidia.icd").exists()  # without --fix nothing is written
    reruns = []
    monkeypatch.setattr(doctor.subprocess, "run", lambda cmd, **kw: reruns.append(cmd) or
                        type("Done", (), {"returncode": 0})())
    assert doctor.main(["--fix"]) == 0
    assert (vendors / "nvidia.icd").read_text().strip() == f"{lib}/libnvidia-opencl.so.1"
    assert reruns and reruns[0][-1] == "polyad.runtime.doctor"  # checked again in a fresh process
    assert doctor.unregistered_vendor_libraries() == []


def test_a_folder_it_cannot_write_is_said_not_raised(tmp_path, monkeypatch, capsys):
    lib, vendors = _tree(tmp_path)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder should be")
    assert doctor._register([("NVIDIA", str(lib / "libnvidia-opencl.so.1"), "nvidia.icd")], str(blocked)) is False
    assert "could not write into" in capsys.readouterr().out
    assert os.path.isfile(blocked)


def test_an_icd_variable_naming_one_file_is_said_and_left_alone(tmp_path, monkeypatch, capsys):
    lib, vendors = _tree(tmp_path)
    monkeypatch.setattr(doctor, "LIBRARY_DIRS", (str(lib),))
    monkeypatch.setenv("OCL_ICD_VENDORS", str(vendors / "pocl.icd"))
    monkeypatch.setenv("LD_LIBRARY_PATH", "")
    monkeypatch.setattr(doctor, "report", lambda: (["ok   a device"], True, True))
    assert doctor.main(["--fix"]) == 0
    assert f"OCL_ICD_VENDORS names the one file {vendors / 'pocl.icd'}; point it at a folder" in capsys.readouterr().out
    assert sorted(os.listdir(vendors)) == ["pocl.icd"]
