"""S3 destinations in Dagster take their client from `dagster_aws.s3.S3Resource`.

By default every distinct S3 destination setting of rivet.yaml (endpoint, region, profile,
the variables named by `access_key_env` / `secret_key_env` / `session_token_env`) becomes
one `S3Resource` with its credentials as `dg.EnvVar`s — read when a run starts, never at
load, never shown in the UI — under a key derived from those settings
(`rivet_s3_<hash>`). One object per setting in the process, so configs sharing a bucket
merge cleanly. With `s3_resource_key=` (build_definitions, or the component's
`s3_resource_key:` attribute) the exports use the project's own `S3Resource` bound under
that key instead, e.g. one `dagster_aws.components.S3ResourceComponent` for the project.

Only the client changes hands: uploads stay rivet's own (Content-MD5 per part, ETag and size
checked), so the same export writes the same files either way. The CLI keeps building its
client from rivet.yaml's fields. `load_input` reads with rivet.yaml's settings (the IO
manager is shared across configs and holds no resources).
"""

from __future__ import annotations

import hashlib
from typing import Any

import dagster as dg

from rivet_core import api

#: One resource object per distinct destination setting (`Definitions.merge` needs identity).
_RESOURCES: dict[str, Any] = {}


def _settings(export: api.ExportConfig) -> tuple[str | None, ...]:
    d = export.destination
    return (d.endpoint, d.region, d.aws_profile, d.access_key_env, d.secret_key_env, d.session_token_env)


def s3_resource_key(export: api.ExportConfig) -> str | None:
    """The resource key an export's S3 client comes from (`dagster.s3_resource_key`, else
    the default one); None for other destinations."""
    if export.destination.type != "s3":
        return None
    return _own_key(export) or _default_key(export)


def _own_key(export: api.ExportConfig) -> str | None:
    return export.dagster.s3_resource_key if export.dagster is not None else None


def _default_key(export: api.ExportConfig) -> str:
    return "rivet_s3_" + hashlib.sha256(repr(_settings(export)).encode()).hexdigest()[:10]


def default_s3_resource(export: api.ExportConfig) -> Any:
    """The `S3Resource` built from an export's destination fields (cached per setting)."""
    from dagster_aws.s3 import S3Resource

    key = _default_key(export)
    if key not in _RESOURCES:
        d = export.destination
        _RESOURCES[key] = S3Resource(
            endpoint_url=d.endpoint, region_name=d.region or ("us-east-1" if d.endpoint else None),
            profile_name=d.aws_profile,
            aws_access_key_id=dg.EnvVar(d.access_key_env) if d.access_key_env else None,
            aws_secret_access_key=dg.EnvVar(d.secret_key_env) if d.secret_key_env else None,
            aws_session_token=dg.EnvVar(d.session_token_env) if d.session_token_env else None,
            max_attempts=d.max_attempts or 5)
    return _RESOURCES[key]


def s3_resources(exports: list[api.ExportConfig]) -> dict[str, Any]:
    """The default resources to bind (not those the project brings under its own key)."""
    return {_default_key(e): default_s3_resource(e) for e in exports
            if e.destination.type == "s3" and not _own_key(e)}
