"""The documentation is executable: every console command in docs/*.md and README.md runs.

Convention (docs/README: "How the commands in these docs are run"):

- Commands live in fenced ```console blocks, one per line starting with `$ `. A line
  ending in `\\` continues on the next line; a here-document (`<<'EOF'` … `EOF`) is part
  of its command. Other lines in the block are sample output.
- Every command of one document runs, in document order, in a fresh directory holding the
  demo config `rivet.yaml` (examples/demo/rivet.yaml) and a small demo database `shop.db`,
  with the virtualenv's `bin/` first on PATH and `.venv` linked into it (so both `rivet …`
  and `.venv/bin/rivet …` work). Exported variables and `cd` carry over to the next
  command of the same document, as in a terminal.
- A command must exit 0, or the code written as a trailing `# exit: N` comment.
- Sample output lines starting with `Error: ` or `[FAIL] ` must appear in the command's
  output (the docs show real error messages and `rivet doctor` verdicts, so they cannot
  drift); a `…` in such a line abbreviates the rest, and only the text before it is compared.
- `make …` commands are not run here (they build the virtualenv, run the whole suite or a
  server); they are exercised by `make demo` / `make test` themselves.
- Anything else is skipped only with a trailing `# not-run: <reason>`; their number is
  capped (MAX_NOT_RUN) so the docs stay executable.

Speed (the commands are subprocesses, so the documents run concurrently, 2 at a time, each
in its own directory): the demo database is built once per session and copied into each
workspace, and Dagster runs use the in-process executor (`RIVET_DAGSTER_EXECUTOR=in_process`:
one process per run instead of one per step; the default multiprocess executor is covered
by tests/dagster/test_dagster_cli.py).

Other engineers add console blocks for their commands; this test runs whatever exists.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]
DEMO_CONFIG = REPO / "examples" / "demo" / "rivet.yaml"
DEMO_ORDERS = 500
COMMAND_TIMEOUT = 300
MAX_NOT_RUN = 8
WORKERS = 2  # documents run at the same time

_NOT_RUN = re.compile(r"#\s*not-run:\s*(\S.*)$")
_EXIT = re.compile(r"#\s*exit:\s*(\d+)\s*$")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_CHECKED_OUTPUT = ("Error: ", "[FAIL] ")  # sample lines that must really be printed


@dataclass
class Command:
    doc: str
    line: int
    text: str
    output: list[str] = field(default_factory=list)

    @property
    def not_run(self) -> str | None:
        found = next((m for line in self.text.splitlines() if (m := _NOT_RUN.search(line))), None)
        return found.group(1).strip() if found else None

    @property
    def expected_exit(self) -> int:
        found = next((m for line in self.text.splitlines() if (m := _EXIT.search(line))), None)
        return int(found.group(1)) if found else 0

    @property
    def is_make(self) -> bool:
        """`make …` (optionally after VAR=value assignments)."""
        try:
            words = shlex.split(self.text.splitlines()[0], comments=True)
        except ValueError:
            return False
        words = [w for w in words if not _ASSIGNMENT.match(w)]
        return bool(words) and words[0] == "make"

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}: $ {self.text}"


def console_commands(path: Path) -> list[Command]:
    """Every `$ ` command of the ```console blocks of one markdown file, in order."""
    commands: list[Command] = []
    in_block = False
    heredoc: str | None = None
    continued = False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if not in_block:
            in_block = stripped == "```console"
            continue
        if heredoc is not None:
            commands[-1].text += "\n" + line
            if stripped == heredoc:
                heredoc = None
            continue
        if continued:
            commands[-1].text += "\n" + line
            continued = line.endswith("\\")
            continue
        if stripped.startswith("```"):
            in_block = False
            continue
        if line.startswith("$ "):
            commands.append(Command(path.name, number, line[2:]))
            continued = line.endswith("\\")
            found = _HEREDOC.search(line)
            heredoc = found.group(1) if found else None
        elif commands and line.strip():
            commands[-1].output.append(line)
    return commands


def all_commands() -> list[Command]:
    return [c for doc in DOCS for c in console_commands(doc)]


def demo_database(directory: Path) -> Path:
    """Build the small demo `shop.db` in `directory` (once per session; workspaces copy it)."""
    from rivet_core.ops.demo import ensure_demo_database

    directory.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RIVET_DEMO_ORDERS", str(DEMO_ORDERS))
        return ensure_demo_database(directory / "shop.db")


def workspace(root: Path, demo_db: Path | None = None) -> tuple[Path, dict[str, str]]:
    """A directory holding the demo `rivet.yaml` and a copy of a small `shop.db`; the environment."""
    root.mkdir(parents=True)
    (root / "rivet.yaml").write_text(DEMO_CONFIG.read_text())
    shutil.copyfile(demo_db or demo_database(root.parent / "demo-db"), root / "shop.db")
    (root / ".venv").symlink_to(REPO / ".venv")
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RIVET_", "DAGSTER_", "TEST_", "PYTEST_", "AWS_")) and k != "DATABASE_URL"}
    env.update(PATH=os.pathsep.join([venv_bin, env.get("PATH", "")]), RIVET_DEMO_ORDERS=str(DEMO_ORDERS),
               RIVET_DAGSTER_EXECUTOR="in_process", DAGSTER_DISABLE_TELEMETRY="1", NO_COLOR="1",
               COLUMNS="120")
    return root, env


def run_document(doc: Path, tmp: Path, demo_db: Path | None = None) -> list[str]:
    """Run the document's commands in order in one workspace; return what went wrong."""
    cwd, env = workspace(tmp / "ws", demo_db)
    state = tmp / "shell-state.sh"
    pwd_file = tmp / "shell-pwd"
    pwd_file.write_text(str(cwd))
    state.write_text("")
    problems = []
    for cmd in console_commands(doc):
        if cmd.is_make or cmd.not_run:
            continue
        script = (f'source {shlex.quote(str(state))}\ncd "$(cat {shlex.quote(str(pwd_file))})"\n'
                  f"{cmd.text}\n__rc=$?\nexport -p > {shlex.quote(str(state))}\n"
                  f"pwd > {shlex.quote(str(pwd_file))}\nexit $__rc\n")
        try:
            proc = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            problems.append(f"{cmd}\n  did not finish in {COMMAND_TIMEOUT} s")
            continue
        output = proc.stdout + proc.stderr
        if proc.returncode != cmd.expected_exit:
            problems.append(f"{cmd}\n  exited {proc.returncode}, the doc expects {cmd.expected_exit}; "
                            f"output:\n{output[-3000:]}")
            continue
        for line in cmd.output:
            expected = line.split("…")[0].strip()   # "…" abbreviates: the text before it must match
            if line.startswith(_CHECKED_OUTPUT) and expected not in output:
                problems.append(f"{cmd}\n  the doc shows `{expected}`, the command printed:\n{output[-3000:]}")
    return problems


def _cost(doc: Path) -> int:
    """Rough run time of a document (Dagster commands are the slow ones): longest first."""
    commands = [c for c in console_commands(doc) if not (c.is_make or c.not_run)]
    return len(commands) + 8 * sum("dagster " in c.text for c in commands)


@pytest.fixture(scope="module")
def document_problems(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Run every selected document once, WORKERS at a time; problems by document name."""
    selected = {item.callspec.params["doc"] for item in request.session.items
                if item.name.startswith("test_every_console_command") and hasattr(item, "callspec")}
    docs = sorted(selected, key=_cost, reverse=True)
    root = tmp_path_factory.mktemp("docs")
    demo_db = demo_database(root / "demo-db")
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {doc.name: pool.submit(run_document, doc, root / doc.stem, demo_db) for doc in docs}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("doc", [d for d in DOCS if console_commands(d)], ids=lambda d: d.name)
def test_every_console_command_of_the_document_runs_as_documented(
        doc: Path, document_problems: dict[str, list[str]]) -> None:
    problems = document_problems[doc.name]
    assert not problems, f"{len(problems)} documented command(s) failed:\n\n" + "\n\n".join(problems)


def test_the_docs_are_mostly_executable_and_cover_the_cli() -> None:
    commands = all_commands()
    skipped = [c for c in commands if c.not_run]
    assert len(skipped) <= MAX_NOT_RUN, "too many `# not-run:` commands:\n" + "\n".join(map(str, skipped))
    assert all(c.not_run for c in skipped)
    ran = " ".join(c.text for c in commands if not (c.not_run or c.is_make))
    # The operator's commands are all shown somewhere (and therefore run by the test above).
    for needed in ("rivet run", "rivet validate", "rivet state show", "rivet state chunks", "rivet state files",
                   "rivet metrics", "rivet journal", "rivet reconcile", "rivet repair", "--resume",
                   "dagster asset materialize", "rivet doctor", "rivet init", "rivet check", "--type-report",
                   "--strict", "rivet plan", "rivet apply", "--progress", "rivet gc"):
        assert needed in ran, f"no runnable `{needed}` command in the docs"


def test_the_parser_sees_commands_outputs_markers_and_heredocs(tmp_path: Path) -> None:
    """The harness itself: a doc it misreads would pass vacuously."""
    doc = tmp_path / "sample.md"
    doc.write_text("text\n```console\n$ cat > a.yaml <<'EOF'\nx: 1\nEOF\n$ rivet validate -c a.yaml  # exit: 1\n"
                   "Error: boom\n$ rivet run \\\n  -c a.yaml  # not-run: needs a server\n```\n"
                   "```bash\n$ ignored\n```\n```console\n$ RIVET_CONFIG=x make dev\n```\n")
    cmds = console_commands(doc)
    assert [c.text.splitlines()[0] for c in cmds] == [
        "cat > a.yaml <<'EOF'", "rivet validate -c a.yaml  # exit: 1", "rivet run \\", "RIVET_CONFIG=x make dev"]
    assert cmds[0].text.endswith("EOF") and cmds[1].expected_exit == 1 and cmds[1].output == ["Error: boom"]
    assert cmds[2].not_run == "needs a server" and "-c a.yaml" in cmds[2].text
    assert [c.is_make for c in cmds] == [False, False, False, True]


def test_a_failing_or_wrongly_documented_command_is_reported(tmp_path: Path) -> None:
    """The runner itself: wrong exit codes and error texts are caught; state carries over."""
    doc = tmp_path / "bad.md"
    doc.write_text("```console\n$ export GREETING=hello\n$ test \"$GREETING\" = hello\n$ false\n"
                   "$ rivet validate -c nope.yaml  # exit: 0\n"
                   "$ rivet validate -c rivet.yaml -e nope  # exit: 1\nError: this text is not printed\n"
                   "$ cat rivet.yaml | grep -q customers_chunked\n"
                   "$ rivet doctor -c rivet.yaml\n[OK] config: …\n[FAIL] source: a verdict it does not print\n```\n")
    problems = run_document(doc, tmp_path / "run")
    assert len(problems) == 4, "\n\n".join(problems)
    assert "$ false" in problems[0] and "exited 1, the doc expects 0" in problems[0]
    assert "nope.yaml" in problems[1] and "the doc expects 0" in problems[1]
    assert "Error: this text is not printed" in problems[2]
    assert "rivet doctor" in problems[3] and "[FAIL] source: a verdict it does not print" in problems[3]


def test_the_readme_links_every_guide() -> None:
    readme = (REPO / "README.md").read_text()
    for name in ("getting-started.md", "config-reference.md", "modes.md", "dagster-guide.md", "operations.md",
                 "onboarding.md"):
        assert (REPO / "docs" / name).is_file(), f"docs/{name} is missing"
        assert f"docs/{name}" in readme, f"README.md does not link docs/{name}"
