#!/usr/bin/env bash
# THE test command (`make test`, and CI's .ci/run): everything needed, from a fresh clone.
#   1. as root, apt-installs what is missing (mariadb-server, postgresql, curl, redis-server
#      unless TEST_REDIS_URL is set, and chromium
#      for the Dagster UI test; CHROMIUM_PATH is exported); as another user, says what to
#      install and carries on (tests needing a missing server or browser then fail);
#   2. scripts/bootstrap.sh: .venv exactly as requirements.lock (about 1 s when unchanged);
#      then `lint-imports` checks the import contracts in .importlinter (a broken one fails);
#   3. starts PostgreSQL, MariaDB, SeaweedFS, the GCS emulator (fake-gcs-server) and Azurite
#      (scripts/services.sh) on free ports in a mktemp -d dir — each one only when its variable
#      (TEST_PG_DSN / TEST_MYSQL_DSN / TEST_S3_ENDPOINT / TEST_GCS_ENDPOINT /
#      TEST_AZURE_ENDPOINT) is not exported already; a variable that is set is kept (with
#      TEST_S3_ACCESS_KEY/SECRET_KEY, TEST_AZURE_ACCOUNT/KEY). Azurite needs Node.js and npm
#      (installed from Debian as root when missing). What this script started is stopped by
#      PID on exit, also on failure or Ctrl-C;
#   4. python -m pytest -n 3 --dist loadfile --no-loadscope-reorder "$@" (RIVET_TEST_WORKERS sets the
#      worker count; 0 = no workers; the slowest files go first, tests/schedule.py) — pytest's
#      exit 5 (no test collected) counts as a failure.
# Lint is separate (`make lint`) and does not fail the tests.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
T0=$(date +%s%N)
say(){ local ms=$(( ($(date +%s%N) - T0) / 1000000 )); printf '[test.sh %4d.%01ds] %s\n' $((ms / 1000)) $((ms % 1000 / 100)) "$*"; }

# --- 1. system packages -----------------------------------------------------------------
need_pg=0 need_my=0 need_s3=0 need_gcs=0 need_azure=0
[ -n "${TEST_PG_DSN:-}" ] || need_pg=1
[ -n "${TEST_MYSQL_DSN:-}" ] || need_my=1
[ -n "${TEST_S3_ENDPOINT:-}" ] || need_s3=1
[ -n "${TEST_GCS_ENDPOINT:-}" ] || need_gcs=1
[ -n "${TEST_AZURE_ENDPOINT:-}" ] || need_azure=1
services=()   # what services.sh starts: only the servers no variable points at
[ "$need_pg" = 1 ] && services+=(pg)
[ "$need_my" = 1 ] && services+=(mysql)
[ "$need_s3" = 1 ] && services+=(s3)
[ "$need_gcs" = 1 ] && services+=(gcs)
[ "$need_azure" = 1 ] && services+=(azure)
start_services=$(( ${#services[@]} > 0 ))

missing=()
if [ "$start_services" = 1 ]; then
  [ "$need_my" = 1 ] && { command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server); }
  [ "$need_pg" = 1 ] && { [ -x "$PGBIN/initdb" ] || missing+=(postgresql); }
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  # Azurite runs on Node.js; npm installs it (pinned) into scripts/emulators/node_modules.
  [ "$need_azure" = 1 ] && { command -v npm >/dev/null 2>&1 || missing+=(nodejs npm); }
fi
# Redis for the Celery executor tests (tests/distributed/ start a private redis-server on a
# free port), unless TEST_REDIS_URL points at a broker you already run.
if [ -z "${TEST_REDIS_URL:-}" ]; then
  command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing+=(redis-server)
fi
# Headless Chromium for tests/dagster/test_ui.py ($CHROMIUM_PATH wins when it is executable).
need_chromium=0
if [ -n "${CHROMIUM_PATH:-}" ] && [ -x "$CHROMIUM_PATH" ]; then :
elif ! command -v chromium >/dev/null 2>&1; then need_chromium=1; fi
if [ ${#missing[@]} -gt 0 ] || [ "$need_chromium" = 1 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    if [ ${#missing[@]} -gt 0 ]; then
      say "installing system packages: ${missing[*]}"
      apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
      say "system packages installed"
    fi
    if [ "$need_chromium" = 1 ]; then
      # With recommends: fonts-liberation (a recommend) gives the Dagster UI readable text.
      say "installing chromium (about 30 s)"
      apt-get install -y -q chromium >/dev/null
      say "chromium installed"
    fi
  else
    if [ ${#missing[@]} -gt 0 ]; then
      say "WARNING: missing system packages: ${missing[*]}"
      say "  install them as root:  apt-get install --no-install-recommends ${missing[*]}"
      say "  or export TEST_PG_DSN / TEST_MYSQL_DSN / TEST_S3_ENDPOINT / TEST_GCS_ENDPOINT / TEST_AZURE_ENDPOINT to servers you already run"
    fi
    if [ "$need_chromium" = 1 ]; then
      say "WARNING: chromium is missing: the Dagster UI test will fail"
      say "  install it as root:  apt-get install chromium   (or export CHROMIUM_PATH=/path/to/chromium)"
    fi
  fi
fi
if [ -z "${CHROMIUM_PATH:-}" ] || [ ! -x "$CHROMIUM_PATH" ]; then
  CHROMIUM_PATH=$(command -v chromium 2>/dev/null || true)
fi
export CHROMIUM_PATH
say "chromium: ${CHROMIUM_PATH:-MISSING}"
export PATH=$PATH:/usr/sbin   # mariadbd lives in /usr/sbin, which a non-root PATH may lack

# --- 2. python environment -------------------------------------------------------------
bash scripts/bootstrap.sh
# The suite starts `rivet` in hundreds of subprocesses: let them cache the project's own
# bytecode (__pycache__ is gitignored) instead of recompiling ~80 modules in each one.
unset PYTHONDONTWRITEBYTECODE
export PATH=$ROOT/.venv/bin:$PATH
say "python env ready ($(python -V))"
# The import contracts (.importlinter: rivet_core never imports Dagster, rivet_dagster goes
# through rivet_core.api, only the facades import the state writers and the manifest write
# group). A broken contract fails the run before any server starts.
lint-imports --no-cache || { say "FAILED: lint-imports (an import contract in .importlinter is broken)"; exit 1; }
say "import contracts kept"

# --- 3. services -----------------------------------------------------------------------
RUN=""
cleanup(){
  local rc=$?
  if [ -n "$RUN" ]; then
    # services.sh stops PostgreSQL through `runuser -u postgres`, which only root can do.
    if [ "$(id -u)" != 0 ] && [ -f "$RUN/pg/data/postmaster.pid" ]; then
      "$PGBIN/pg_ctl" -D "$RUN/pg/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    bash scripts/services.sh stop "$RUN" || true
    say "services stopped"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ "$start_services" = 1 ]; then
  RUN=$(mktemp -d "${TMPDIR:-/tmp}/rivet-test.XXXXXX")
  say "starting ${services[*]} in $RUN"
  if ! bash scripts/services.sh start "$RUN" "${services[@]}"; then
    say "FAILED to start the test servers; their logs follow"
    tail -n 8 "$RUN"/*/*.log 2>/dev/null || true
    [ "$(id -u)" = 0 ] || say "  (as a non-root user, export TEST_PG_DSN / TEST_MYSQL_DSN / TEST_S3_ENDPOINT instead)"
    exit 1
  fi
  # env.sh holds TEST_*; keep whatever the user had already exported.
  saved=$(export -p | grep -E '^declare -x TEST_(PG_DSN|MYSQL_DSN|S3_ENDPOINT|S3_ACCESS_KEY|S3_SECRET_KEY|GCS_ENDPOINT|AZURE_ENDPOINT|AZURE_ACCOUNT|AZURE_KEY)=' || true)
  # shellcheck disable=SC1091
  source "$RUN/env.sh"
  [ "$need_s3" = 1 ] || unset TEST_S3_ACCESS_KEY TEST_S3_SECRET_KEY
  eval "$saved"
  say "services up"
else
  say "using the servers from TEST_PG_DSN / TEST_MYSQL_DSN / TEST_S3_ENDPOINT / TEST_GCS_ENDPOINT / TEST_AZURE_ENDPOINT"
fi
export AWS_EC2_METADATA_DISABLED=true
# Log where each server is, never with a password.
redact(){ sed -E 's#(://[^:/@]*):[^@]*@#\1:***@#'; }
[ "$need_pg" = 1 ] && src=started || src=yours; say "  PostgreSQL ($src): $(echo "$TEST_PG_DSN" | redact)"
[ "$need_my" = 1 ] && src=started || src=yours; say "  MariaDB    ($src): $(echo "$TEST_MYSQL_DSN" | redact)"
[ "$need_s3" = 1 ] && src=started || src=yours; say "  S3         ($src): $TEST_S3_ENDPOINT"
[ "$need_gcs" = 1 ] && src=started || src=yours; say "  GCS        ($src): $TEST_GCS_ENDPOINT"
[ "$need_azure" = 1 ] && src=started || src=yours; say "  Azure      ($src): $TEST_AZURE_ENDPOINT"

# --- 4. pytest -------------------------------------------------------------------------
# Test files run in parallel worker processes (pytest-xdist), a whole file per worker
# (`--dist loadfile`: a module's shared fixtures — the docs runner, a `dagster dev` — start
# once). Most of a test's time is spent waiting on a server or a `rivet` subprocess, so three
# workers keep two cores busy. The files are handed out slowest first (tests/schedule.py;
# xdist's own reordering by test count would hand the few-test, minutes-long files out last
# and leave workers idle at the end). RIVET_TEST_WORKERS=0 runs everything in this one process.
workers=${RIVET_TEST_WORKERS:-3}
extra=(-n "$workers")
[ "$workers" = 0 ] || extra+=(--dist loadfile --no-loadscope-reorder)
[ "${CI:-}" = true ] && extra+=(--durations=25)   # CI logs show what eats the time budget
say "running: python -m pytest${extra[*]:+ ${extra[*]}} $*"
set +e
python -m pytest "${extra[@]}" "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then
  say "FAILED: pytest collected no tests (exit 5); a test run must run tests"
  rc=1
fi
say "pytest finished with exit code $rc"
# Lint last, so a style slip never hides test results; it still fails the run.
if ! ruff check rivet_core rivet_dagster tests benchmarks; then
  say "FAILED: ruff found problems (run: make lint)"
  [ $rc -eq 0 ] && rc=1
fi
exit $rc
