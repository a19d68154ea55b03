"""Rivet's config matrix message rules as tests (issue 35 item 5): its fixtures probed with
`doctor`, `check` and `plan` against our `rivet` on the real servers, each rule of its
`dev/cfg_matrix/expected_msg.txt` one test (fixtures and rules: cfg_matrix.py)."""

from __future__ import annotations

import pytest

from tests.rivet_matrix.cfg_matrix import RULES, probe
from tests.rivet_matrix.cli_matrix import Outcome, message_holds


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory,
           matrix_databases: tuple[str, str]) -> dict[tuple[str, str], Outcome]:
    pg, my = matrix_databases
    return probe(tmp_path_factory.mktemp("cfg_matrix"), pg, my)


@pytest.mark.postgres
@pytest.mark.mysql
@pytest.mark.parametrize(("sid", "command", "stream", "op", "text"), RULES,
                         ids=[f"{r[0]}:{r[1]}:{r[3]}{r[4]}" for r in RULES])
def test_each_rule_of_rivets_config_matrix_holds(probes, sid, command, stream, op, text):
    outcome = probes[(sid, command)]
    body = outcome.stdout if stream == "stdout" else outcome.stderr
    assert message_holds(outcome, stream, op, text), f"{sid} {command}/{stream} {op} {text!r} (exit {outcome.rc}):\n{body[-2000:]}"
