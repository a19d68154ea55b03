"""Real fault machinery for the hardening tests: a private S3 server, a faulty HTTP proxy,
and the file barrier of `RIVET_TEST_PAUSE_AT` (rivet_core/pipeline/faults.py).

Nothing here mocks a database or boto3. The private SeaweedFS is a real server this module
starts and can kill by PID (the shared one must keep serving the other suites). The proxy is
a real socket server in front of a real S3 endpoint: it forwards requests byte for byte
(the SigV4 signature covers the Host header, which is forwarded unchanged) and, while a rule
says so, answers with an S3 error document or holds the response back.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import rivet_quick

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Poll `predicate` until it returns something truthy; fail the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}", pytrace=False)
        time.sleep(interval)  # polling with a deadline


# ------------------------------------------------------------------------ pause barrier
class PauseBarrier:
    """The test side of RIVET_TEST_PAUSE_AT: wait for `.reached`, act, then release."""

    def __init__(self, directory: Path, point: str) -> None:
        self.directory, self.point = directory, point
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def env(self) -> dict[str, str]:
        return {"RIVET_TEST_PAUSE_AT": self.point, "RIVET_TEST_PAUSE_DIR": str(self.directory),
                "RIVET_TEST_PAUSE_TIMEOUT_S": "90"}

    def wait(self, proc: subprocess.Popen[str] | None = None, timeout: float = 60) -> int:
        """Block until the run parks at the point; returns the paused process's pid."""
        reached = self.directory / f"{self.point}.reached"

        def parked() -> bool:
            if proc is not None and proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"the run ended (rc={proc.returncode}) before reaching {self.point}:\n"
                            f"{err[-3000:]}", pytrace=False)
            return reached.exists() and reached.read_text() != ""

        wait_until(parked, timeout, f"the run to pause at {self.point}")
        return int(reached.read_text())

    def release(self) -> None:
        (self.directory / f"{self.point}.release").write_text("go")


# --------------------------------------------------------------------- private SeaweedFS
@dataclass
class PrivateS3:
    """A SeaweedFS `weed mini` of our own (the one in scripts/services.sh, same flags)."""

    root: Path
    access_key: str = "hard-access"
    secret_key: str = "hard-secret-key-9f3b"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    _args: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PrivateS3:
        weed = shutil.which("weed") or str(REPO / ".venv" / "bin" / "weed")
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        creds = {"identities": [{"name": "ci", "credentials": [
            {"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
        (self.root / "s3.json").write_text(json.dumps(creds))
        if not self._args:  # the same ports on a restart, so the endpoint URL stays valid
            self.port = free_port()
            self._args = [f"-dir={self.root / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                          "-master.telemetry=false", "-admin.ui=false", "-webdav=false",
                          "-volume.preStopSeconds=0", "-s3.allowDeleteBucketNotEmpty=false",
                          f"-s3.config={self.root / 's3.json'}", f"-s3.port={self.port}"]
            for opt in ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
                        "filer.port", "filer.port.grpc", "s3.port.grpc", "s3.port.iceberg",
                        "s3.port.lance", "admin.port", "admin.port.grpc", "metricsPort"):
                self._args.append(f"-{opt}={free_port()}")
        log = open(self.root / "weed.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen([weed, "mini", *self._args], stdout=log, stderr=log,
                                     start_new_session=True)
        log.close()

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(f"private SeaweedFS exited: {(self.root / 'weed.log').read_text()[-2000:]}",
                            pytrace=False)
            try:  # the write path (filer + volume server), not just the front door
                client = self.client()
                if "ready-probe" not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
                    client.create_bucket(Bucket="ready-probe")
                client.put_object(Bucket="ready-probe", Key="probe", Body=b"ok")
                return True
            except Exception:  # noqa: BLE001 - not up yet
                return False

        wait_until(ready, 60, "the private SeaweedFS to accept writes", interval=0.1)
        return self

    def kill(self) -> None:
        """SIGKILL the server (its whole process group) and wait for it: a crash, not a stop."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name="us-east-1",
                            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10))


@contextlib.contextmanager
def private_s3() -> Iterator[PrivateS3]:
    root = Path(tempfile.mkdtemp(prefix="rivet-hard-s3-"))
    server = PrivateS3(root).start()
    try:
        yield server
    finally:
        server.kill()
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------------- fault proxy
@dataclass
class Rule:
    """What the proxy does to requests matching `methods`: answer `status` with an S3 error
    (when `status`), or hold the response `delay_s` seconds (when `delay_s`), for the first
    `count` matching requests (None: all of them)."""

    methods: tuple[str, ...] = ("GET", "PUT", "POST", "HEAD", "DELETE")
    status: int | None = None
    delay_s: float = 0.0
    count: int | None = None
    hits: int = 0


class FaultProxy:
    """A threaded HTTP/1.1 proxy to `upstream` applying `rules` (first match wins)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://").rstrip("/")
        self.rules: list[Rule] = []
        self.requests: list[tuple[str, str, str]] = []  # (method, path, what we did)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                action = proxy._decide(self.command)
                if action is not None and action.status:
                    proxy._log(self.command, self.path, f"status {action.status}")
                    self._error(action.status)
                    return
                if action is not None and action.delay_s:
                    proxy._log(self.command, self.path, f"delay {action.delay_s}")
                    proxy._stop.wait(action.delay_s)  # the injected slowness itself
                else:
                    proxy._log(self.command, self.path, "forward")
                try:
                    self._forward(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (its timeout): expected

            def _error(self, status: int) -> None:
                code = {500: "InternalError", 503: "ServiceUnavailable"}.get(status, "InternalError")
                payload = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                           f"<Message>injected by the test proxy</Message></Error>").encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(0 if self.command == "HEAD" else len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            def _forward(self, body: bytes) -> None:
                conn = http.client.HTTPConnection(proxy.upstream, timeout=60)
                try:
                    conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                    for name, value in self.headers.items():
                        if name.lower() not in ("expect", "connection", "content-length"):
                            conn.putheader(name, value)
                    conn.putheader("Content-Length", str(len(body)))
                    conn.endheaders(body)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for name, value in resp.getheaders():
                        if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(name, value)
                    length = resp.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
                    self.send_header("Content-Length", length or "0")
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle  # noqa: N815

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _decide(self, method: str) -> Rule | None:
        with self._lock:
            for rule in self.rules:
                if method in rule.methods and (rule.count is None or rule.hits < rule.count):
                    rule.hits += 1
                    return rule
        return None

    def _log(self, method: str, path: str, what: str) -> None:
        with self._lock:
            self.requests.append((method, path, what))

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------------------------ running
def rivet_popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The real CLI in a subprocess we can pause (RIVET_TEST_PAUSE_AT) and act around."""
    import sys

    return subprocess.Popen([sys.executable, "-m", "rivet_core.cli", *args], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


# --------------------------------------------------------------------------- S3 oracle
def s3_keys(client: Any, bucket: str, prefix: str) -> dict[str, int]:
    """Every object under `prefix` (key relative to it) → size."""
    out: dict[str, int] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []) or []:
            out[obj["Key"][len(prefix):]] = int(obj["Size"])
    return out


def s3_success_ids(client: Any, bucket: str, prefix: str, column: str = "id") -> list[Any]:
    """Ids of every row in every part a `status: success` manifest at the prefix lists
    (manifest.json and each manifest-<run>.json, each run once) — re-read with pyarrow."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    manifests: dict[str, dict[str, Any]] = {}
    for key in s3_keys(client, bucket, prefix):
        if key.startswith("manifest") and key.endswith(".json"):
            body = client.get_object(Bucket=bucket, Key=prefix + key)["Body"].read()
            m = json.loads(body)
            if m.get("status") == "success":
                manifests[m["run_id"]] = m
    ids: list[Any] = []
    for m in manifests.values():
        for part in m["parts"]:
            if part.get("status", "committed") != "committed":
                continue
            data = client.get_object(Bucket=bucket, Key=prefix + part["path"])["Body"].read()
            table = (pacsv.read_csv(pa.BufferReader(data)) if part["path"].endswith(".csv")
                     else pq.read_table(pa.BufferReader(data)))
            ids.extend(table.column(column).to_pylist())
    return sorted(ids)




def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in-process with `env` for the call only (tests/helpers.py rivet_quick): for
    runs that need no process of their own (no crash, no pause)."""
    return rivet_quick(*args, env=env)
