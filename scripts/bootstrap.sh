#!/usr/bin/env bash
# Create or refresh the project's virtualenv (.venv) exactly as requirements.lock says.
#
# Used by `make test` (scripts/test.sh), `make lint` and `make demo`; safe to run any time.
#   * needs python3 >= 3.11 (override with PYTHON=/path/to/python3.X);
#   * installs a pinned `uv` into .venv, then `uv pip sync requirements.lock` (no dependency
#     re-resolution: the lock is the whole environment) and `uv pip install --no-deps -e .`,
#     which also compiles the optional C extensions rivet_core/source/mysql/_mysqlframe.c and
#     _pgbinary.c in place (setup.py; without a C compiler the install still succeeds, with
#     slower fallbacks — the bootstrap then says so);
#   * `uv pip check` must pass;
#   * the project's packages are byte-compiled (every run, only stale files: compile_project);
#   * a stamp file (.venv/.rivet-bootstrap) holds a hash of the inputs, so a second run with
#     nothing changed returns at once (not written while the C extension is missing, so the
#     build is retried).
# Only PyPI is needed (uv and every wheel come from it).
#
# requirements.lock is generated, never edited by hand. To change a dependency, edit
# pyproject.toml and run `make lock` (= uv pip compile pyproject.toml --extra dev
# --python-version 3.11 -o requirements.lock), then commit both files.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VENV=$ROOT/.venv
PY=${PYTHON:-python3}
UV_VERSION=0.13.9
STAMP=$VENV/.rivet-bootstrap

say(){ echo "[bootstrap] $*"; }
die(){ echo "[bootstrap] error: $*" >&2; exit 1; }

command -v "$PY" >/dev/null 2>&1 || die "$PY not found; install Python >= 3.11 (Debian: apt-get install python3 python3-venv) or set PYTHON=/path/to/python3.11"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || die "$("$PY" -V 2>&1) is too old: Rivet needs Python >= 3.11 (set PYTHON=/path/to/python3.11)"

# The stamp covers everything that decides the venv's content.
# The C extension's sources are inputs too: a changed .c file must be rebuilt.
EXT_SOURCES=(setup.py rivet_core/source/mysql/_mysqlframe.c rivet_core/source/postgres/_pgbinary.c rivet_core/manifest/_colsum.c rivet_core/manifest/vendor/xxhash.h)
want=$( { cat requirements.lock pyproject.toml "$0" "${EXT_SOURCES[@]}"; echo "uv=$UV_VERSION"; "$PY" -V 2>&1; } | sha256sum | cut -d' ' -f1)
# The project's own byte-code, as an installed package has it: the editable install compiles
# none, and a shell with PYTHONDONTWRITEBYTECODE (this machine sets it) would make every
# `rivet` process and every Dagster run worker compile the run path again (~0.1 s each, more
# for rivet_dagster). Only stale files are compiled, so this costs ~0.1 s when nothing changed.
compile_project(){
  "$VENV/bin/python" -m compileall -q -j 0 rivet_core rivet_dagster >/dev/null \
    || say "warning: some project files did not byte-compile (a syntax error?); they are compiled at each import"
}
if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  compile_project
  say ".venv is up to date"
  exit 0
fi

t0=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -c 'import venv, ensurepip' 2>/dev/null \
    || die "$PY cannot create virtualenvs (Debian: apt-get install python3-venv)"
  say "creating .venv with $("$PY" -V 2>&1)"
  "$PY" -m venv "$VENV"
fi
if [ "$("$VENV/bin/uv" --version 2>/dev/null | cut -d' ' -f2)" != "$UV_VERSION" ]; then
  say "installing uv $UV_VERSION into .venv"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
fi
UV=("$VENV/bin/uv" pip)
# Trust the machine's CA store (as pip does), also where a proxy's CA is installed there but
# SSL_CERT_FILE is not set.
export UV_SYSTEM_CERTS=${UV_SYSTEM_CERTS:-1}
# --python pins the target: `uv pip` would otherwise pick whatever interpreter it finds.
say "syncing .venv to requirements.lock"
# --compile-bytecode: this machine sets PYTHONDONTWRITEBYTECODE, so without it every
# `rivet` process would recompile pandas, SQLAlchemy and Dagster from source (seconds each).
"${UV[@]}" sync -q --compile-bytecode --python "$VENV/bin/python" requirements.lock
# --reinstall-package: always rebuild the project (so the C extension is compiled from the
# current .c file) instead of trusting a cached build; the stamp decides when this runs.
"${UV[@]}" install -q --python "$VENV/bin/python" --no-deps --reinstall-package rivet-dagster -e .
check_out=$("${UV[@]}" check --python "$VENV/bin/python" 2>&1) || { echo "$check_out" >&2; die "uv pip check found broken dependencies"; }
# The C extension is optional (setup.py: optional=True), so a failed compile is not an error;
# but then the stamp is not written, so the next run (e.g. after installing a compiler) tries
# the build again.
if "$VENV/bin/python" -c 'import rivet_core.source.mysql._mysqlframe, rivet_core.source.postgres._pgbinary, rivet_core.manifest._colsum' 2>/dev/null; then
  echo "$want" >"$STAMP"
else
  rm -f "$STAMP"
  say "warning: the C extensions rivet_core.source.mysql._mysqlframe / _pgbinary / rivet_core.manifest._colsum were not built (no C compiler or Python headers?); MySQL reads fall back to the slower pure-Python packet framing, PostgreSQL reads to the ADBC driver and string column checksums to pandas. Install them (Debian: apt-get install gcc python3-dev) and re-run this script."
fi
compile_project
say ".venv ready in $(( $(date +%s) - t0 )) s"
