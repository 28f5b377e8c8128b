"""`make setup`'s installer choice, run for real on the Makefile with a stand-in .venv.

The stand-in `python` and `uv` only log their arguments (no network, no packages), so each branch
of the recipe is seen: uv installed by pip and used; uv missing or failing, and pip installing
instead with a note; a venv that borrows the system's packages (Colab's torch) never handing the
install to uv; pip's mirror passed on to uv; the stamp re-running the install only when
pyproject.toml changes.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("bash", "sh", "grep", "sed", "tail", "touch", "id", "dirname", "chmod", "cat")

# Logs one line per call (arguments joined by "|"); answers what the recipe asks of it.
FAKE_PYTHON = r"""#!/bin/bash
args=$(printf '%s|' "$@")
echo "python|$args" >> "$LOG"
case "$args" in
  "-c|import torch|") [ -z "$NO_TORCH" ] || [ -e "$LOG.torch" ]; exit ;;
  "-c|import sys; sys.dont_write_bytecode = False; import torch|") exit 0 ;;
  "-m|pip|install|-q|--no-compile|torch==2.13.0|") touch "$LOG.torch"; exit ;;
  "-c|import libcachesim"*) exit 1 ;;
  "-m|pip|install|-q|-e|"*) exit ${PIP_FAILS:-0} ;;
  "-m|pip|config|list|") [ -z "$PIP_MIRROR" ] || echo "global.index-url='$PIP_MIRROR'"; exit 0 ;;
  "-m|pip|install|-q|uv>=0.5|")
    [ -z "$NO_UV" ] || exit 1
    printf '#!/bin/bash\necho "uv|$(printf "%%s|" "$@")" >> "$LOG"\nexit ${UV_FAILS:-0}\n' > "$(dirname "$0")/uv"
    chmod +x "$(dirname "$0")/uv"; exit 0 ;;
esac
exit 0
"""


@pytest.fixture
def project(tmp_path):
    """A folder with the repository's Makefile, a pyproject.toml and a stand-in .venv; PATH holds
    only the tools the recipe calls (so no uv installed on this machine is found)."""
    if shutil.which("make") is None:
        pytest.skip("make not installed")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(FAKE_PYTHON)
    (bin_dir / "python").chmod(0o755)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("include-system-site-packages = false\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in TOOLS + ("make",):
        (tools / name).symlink_to(shutil.which(name))
    return tmp_path


def make(project, *targets, **env):
    log = project / "log"
    log.write_text("")
    done = subprocess.run(["make", *targets], cwd=project, capture_output=True, text=True, timeout=60,
                          env={"PATH": str(project / "tools"), "LOG": str(log), **env})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, log.read_text().splitlines()


def installs(calls):
    """The install calls among `calls`, as (tool, arguments after `install -q`)."""
    out = []
    for line in calls:
        if line.startswith("uv|pip|install|-q|--compile-bytecode|"):
            out.append(("uv", line.split("|")[4:-1]))
        elif line.startswith("python|-m|pip|install|-q|") and "uv>=0.5" not in line and "torch" not in line:
            out.append(("pip", line.split("|")[5:-1]))
    return out


def test_uv_installs_into_the_venv_once_and_the_stamp_holds_until_pyproject_changes(project):
    out, calls = make(project, "setup")
    assert "python|-m|pip|install|-q|uv>=0.5|" in calls  # uv comes from pip, into .venv
    assert installs(calls) == [("uv", ["--compile-bytecode", "--python", ".venv/bin/python", "-e", ".[lab,test]"])]
    assert "note:" not in out and (project / ".venv" / ".ready").exists()
    assert make(project, "setup")[1] == []  # a second run touches nothing
    os.utime(project / "pyproject.toml", (2e9, 2e9))  # an edited dependency list re-runs the install
    out, calls = make(project, "setup")
    assert installs(calls) == [("uv", ["--compile-bytecode", "--python", ".venv/bin/python", "-e", ".[lab,test]"])]
    assert "python|-m|pip|install|-q|uv>=0.5|" not in calls  # the uv in .venv is reused


def test_pip_installs_where_uv_cannot_be_had_or_fails_or_is_not_wanted(project):
    out, calls = make(project, "setup", NO_UV="1")
    assert installs(calls) == [("pip", ["-e", ".[lab,test]"])]
    assert "note: uv could not be installed; pip installs instead" in out
    (project / ".venv" / ".ready").unlink()
    out, calls = make(project, "setup", UV_FAILS="1")
    assert installs(calls) == [("uv", ["--compile-bytecode", "--python", ".venv/bin/python", "-e", ".[lab,test]"]),
                               ("pip", ["-e", ".[lab,test]"])]
    assert "note: uv failed (above); pip installs instead" in out
    (project / ".venv" / ".ready").unlink()
    out, calls = make(project, "setup", "INSTALLER=pip")
    assert installs(calls) == [("pip", ["-e", ".[lab,test]"])] and "note:" not in out
    assert not any(line.startswith("uv|") for line in calls)


def test_a_venv_borrowing_the_systems_torch_never_hands_the_install_to_uv(project):
    """uv does not see a --system-site-packages venv's borrowed packages: it would fetch a CUDA torch."""
    (project / ".venv" / "pyvenv.cfg").write_text("include-system-site-packages = true\n")
    (project / ".venv" / "bin" / "uv").write_text("#!/bin/bash\necho uv >> \"$LOG\"\n")
    (project / ".venv" / "bin" / "uv").chmod(0o755)
    out, calls = make(project, "setup")
    assert installs(calls) == [("pip", ["-e", ".[lab,test]"])] and "uv" not in calls and "note:" not in out


def test_pips_mirror_is_handed_to_uv(project):
    mirror = "https://mirrors.example.cn/pypi/simple/"
    _, calls = make(project, "setup", PIP_MIRROR=mirror)
    assert installs(calls) == [("uv", ["--compile-bytecode", "--python", ".venv/bin/python", "--default-index", mirror,
                                       "-e", ".[lab,test]"])]


def test_crosscheck_deps_installs_the_extra_with_the_same_installer(project):
    out, calls = make(project, "crosscheck-deps")
    assert installs(calls)[-1] == ("uv", ["--compile-bytecode", "--python", ".venv/bin/python", "-e", ".[crosscheck]"])
    assert "note:" not in out
    out, calls = make(project, "crosscheck-deps", UV_FAILS="1", PIP_FAILS="1")  # offline: a note, no failure
    assert installs(calls) == [("uv", ["--compile-bytecode", "--python", ".venv/bin/python", "-e", ".[crosscheck]"]),
                               ("pip", ["-e", ".[crosscheck]"])]
    assert out.strip() == "note: libcachesim not installed (tests/test_crosscheck_libcachesim.py is skipped)"


def test_torch_comes_from_pip_uncompiled_then_one_import_compiles_what_kernels_read(project):
    """Where the venv has no torch, pip installs TORCH_SPEC (its on-disk CPU build) before uv runs;
    the import that byte-compiles it comes last, once numpy is installed (torch warns without it)."""
    _, calls = make(project, "setup", NO_TORCH="1")
    assert calls[:2] == ["python|-c|import torch|", "python|-m|pip|install|-q|--no-compile|torch==2.13.0|"]
    assert installs(calls) == [("uv", ["--compile-bytecode", "--python", ".venv/bin/python", "-e", ".[lab,test]"])]
    assert calls[-1] == "python|-c|import sys; sys.dont_write_bytecode = False; import torch|"  # after numpy is in
