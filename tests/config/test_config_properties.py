"""Property tests: the loader only ever fails with ConfigError; sizes round-trip; the
did-you-mean helper never guesses a far-away key."""

from __future__ import annotations

import copy
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivet_core.config import load_config, parse_size
from rivet_core.config.models import DestinationConfig, ExportConfig, SourceConfig
from rivet_core.config.suggest import is_substring_match, levenshtein, max_distance, suggest
from rivet_core.errors import ConfigError

_VALID: dict[str, Any] = {
    "source": {"type": "postgres", "url_env": "RIVET_TEST_DB_URL"},
    "exports": [
        {
            "name": "orders",
            "table": "orders",
            "format": "parquet",
            "destination": {"type": "local", "path": "out"},
        },
    ],
}

_KEYS = sorted(
    {"source", "exports", "notifications", "dagster", "tuning", "tls", "quality", "columns"}
    | set(SourceConfig.model_fields)
    | set(ExportConfig.model_fields)
    | set(DestinationConfig.model_fields)
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(
        [
            "parquet",
            "csv",
            "s3",
            "local",
            "full",
            "incremental",
            "{date}",
            "../x",
            "${}",
            "zstd",
            "1e400MB",
            "9" * 400,
            "sqlite:///x.db",
            "\u202e\u0000",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(_KEYS), st.text(max_size=12)), inner, max_size=5),
    ),
    max_leaves=25,
)


def _load_text(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rivet.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            load_config(path)
        except ConfigError as exc:
            assert exc.exit_code == 1
            assert "pydantic" not in str(exc).lower()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_random_yaml_shapes_only_ever_raise_config_error(data):
    _load_text(yaml.safe_dump(data, allow_unicode=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from([("source",), ("exports", 0), ("exports", 0, "destination")]),
    key=st.sampled_from(_KEYS + ["mystery", "tuning", "on"]),
    value=values,
)
def test_mutating_one_field_of_a_valid_config_only_ever_raises_config_error(path, key, value):
    data = copy.deepcopy(_VALID)
    node: Any = data
    for part in path:
        node = node[part]
    node[key] = value
    _load_text(yaml.safe_dump(data, allow_unicode=True))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_only_ever_raises_config_error(text):
    _load_text(text.replace("\ud800", ""))


units = st.sampled_from(
    [
        ("", 1),
        ("B", 1),
        ("KB", 1024),
        ("MB", 1024**2),
        ("GB", 1024**3),
        ("kb", 1024),
        ("Mb", 1024**2),
        ("gB", 1024**3),
    ]
)


@given(st.integers(min_value=1, max_value=10**12), units, st.sampled_from(["", " "]))
def test_parse_size_round_trips_whole_numbers(number, unit, space):
    suffix, multiplier = unit
    assert parse_size(f"{number}{space if suffix else ''}{suffix}") == number * multiplier


@given(
    st.decimals(
        min_value=Decimal("0.001"),
        max_value=Decimal(10**6),
        places=3,
        allow_nan=False,
        allow_infinity=False,
    ),
    units,
)
def test_parse_size_truncates_fractions_exactly(number, unit):
    suffix, multiplier = unit
    expected = int(number * multiplier)
    text = f"{number:f}{suffix}"
    if expected <= 0:
        try:
            parse_size(text)
        except ConfigError:
            return
        raise AssertionError("a size below one byte must be rejected")
    assert parse_size(text) == expected


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=30))
def test_did_you_mean_never_suggests_a_far_away_key(key):
    candidates = _KEYS
    hint = suggest(key, candidates)
    if hint is not None:
        close = levenshtein(key.lower(), hint.lower()) <= max_distance(key)
        assert close or is_substring_match(key, hint)


def test_did_you_mean_gives_nothing_for_an_unrelated_word():
    assert suggest("zzzzqqqq", _KEYS) is None
    assert suggest("acccess_key_env", _KEYS) == "access_key_env"
