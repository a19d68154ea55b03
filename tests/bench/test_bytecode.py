"""benchmarks/bytecode.py: the code under test is timed as installed, with its byte-code,
even from a shell that sets PYTHONDONTWRITEBYTECODE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks.bytecode import compile_tree


def _load_log(root: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPYCACHEPREFIX", None)
    # -S: no site, so the editable install of the real rivet_core cannot shadow this one.
    proc = subprocess.run([sys.executable, "-S", "-v", "-c", "import rivet_core.probe"], env=env, cwd=root,
                          capture_output=True, text=True, check=True)
    return proc.stderr


def test_a_compiled_tree_is_imported_from_its_bytecode_and_a_changed_file_is_recompiled(tmp_path: Path) -> None:
    package = tmp_path / "rivet_core"
    package.mkdir()
    (package / "__init__.py").write_text("")
    probe = package / "probe.py"
    probe.write_text("VALUE = 1\n")
    pyc = package / "__pycache__" / f"probe.{sys.implementation.cache_tag}.pyc"
    assert f"code object from '{pyc}'" not in _load_log(tmp_path)  # nothing cached yet

    compile_tree(tmp_path)
    assert f"code object from '{pyc}'" in _load_log(tmp_path)

    probe.write_text("VALUE = 22\n")  # a later edit: the stale cache is not used, compile_tree refreshes it
    later = probe.stat().st_mtime + 2  # compileall compares whole seconds of mtime
    os.utime(probe, (later, later))
    assert f"code object from '{pyc}'" not in _load_log(tmp_path)
    compile_tree(tmp_path)
    assert f"code object from '{pyc}'" in _load_log(tmp_path)
