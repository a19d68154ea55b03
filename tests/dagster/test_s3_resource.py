"""S3 destinations in Dagster take their client from `dagster_aws.s3.S3Resource` (issue 14
item 8), against the real S3 server (SeaweedFS enforces credentials like S3).

- By default each S3 destination setting is an `S3Resource` with `dg.EnvVar` credentials
  (the variables rivet.yaml names), bound under `rivet_s3_<hash>`.
- With `s3_resource_key=` the exports use the project's own resource: here the variables
  rivet.yaml names hold a WRONG secret, so a run can only succeed with the resource's client
  (and the CLI, which keeps rivet.yaml's credentials, is refused by the server).
- The same export writes the same rows either way (re-read with pyarrow, compared with the
  CLI's export of the same table and with the source).
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from dagster_aws.s3 import S3Resource

from rivet_dagster import build_definitions
from tests.dagster.support import (
    Target,
    check_evaluations,
    export_block,
    id_amounts,
    orders_config,
    run_job,
    source_rows,
)
from tests.helpers import rivet


def test_by_default_an_s3_export_gets_an_s3_resource_with_env_var_credentials(
        orders_pg: str, tmp_path: Path, s3, instance: dg.DagsterInstance) -> None:  # noqa: ANN001
    target = Target("s3", tmp_path, s3)
    defs = build_definitions(orders_config(tmp_path, orders_pg, [
        export_block("orders_s3", "full", target.destination("orders_s3"))]))
    resources = {k: v for k, v in defs.resources.items() if k.startswith("rivet_s3_")}
    assert len(resources) == 1
    resource = next(iter(resources.values()))
    assert isinstance(resource, S3Resource) and resource.endpoint_url == s3.endpoint
    assert isinstance(resource.aws_secret_access_key, dg.EnvVar)  # read at run time, never shown
    assert resource.aws_secret_access_key.env_var_name == "RIVET_TEST_SK"

    result = run_job(defs, "orders_s3_job", instance)
    assert result.success and check_evaluations(result)["manifest_verified"].passed
    view = target.view("orders_s3")
    assert id_amounts(view.parts_table([view.current_manifest()])) == source_rows(orders_pg)


def test_the_projects_own_s3_resource_carries_the_export_and_the_bytes_match_the_cli(
        orders_pg: str, tmp_path: Path, s3, instance: dg.DagsterInstance,  # noqa: ANN001
        monkeypatch: pytest.MonkeyPatch) -> None:
    target = Target("s3", tmp_path, s3)
    cli_export = export_block("orders_cli", "full", target.destination("orders_cli"))
    dagster_export = export_block("orders_dg", "full", target.destination("orders_dg"))
    config = orders_config(tmp_path, orders_pg, [cli_export, dagster_export])
    assert rivet("run", "-c", str(config), "-e", "orders_cli").returncode == 0

    monkeypatch.setenv("RIVET_TEST_SK", "a-wrong-secret")  # rivet.yaml's credentials now fail
    refused = rivet("run", "-c", str(config), "-e", "orders_dg")
    assert refused.returncode != 0, "the server accepted a wrong secret: the test proves nothing"
    assert "a-wrong-secret" not in refused.stdout + refused.stderr

    own = S3Resource(endpoint_url=s3.endpoint, region_name="us-east-1",
                     aws_access_key_id=s3.access_key, aws_secret_access_key=s3.secret_key)
    defs = dg.Definitions.merge(build_definitions(config, s3_resource_key="s3"),
                                dg.Definitions(resources={"s3": own}))
    assert not [k for k in defs.resources if k.startswith("rivet_s3_")]
    result = run_job(defs, "orders_dg_job", instance)
    assert result.success, "the export did not use the project's S3Resource"
    assert check_evaluations(result)["manifest_verified"].passed  # the check reads with it too

    view_cli, view_dg = target.view("orders_cli"), target.view("orders_dg")
    rows_cli = id_amounts(view_cli.parts_table([view_cli.current_manifest()]))
    rows_dg = id_amounts(view_dg.parts_table([view_dg.current_manifest()]))
    assert rows_dg == rows_cli == source_rows(orders_pg)
    parts_cli = view_cli.current_manifest()["parts"]
    parts_dg = view_dg.current_manifest()["parts"]
    assert [p["rows"] for p in parts_cli] == [p["rows"] for p in parts_dg]
