"""The tool's own words: dimension patterns and names that are not data names."""

from __future__ import annotations

import pytest

from dq_agent.narrative.vocabulary import (
    GENERIC_WORDS,
    dimension_pattern,
    is_dimension_word,
    is_tool_vocabulary,
)
from dq_agent.tools import DETECTION_TOOL_NAMES


@pytest.mark.parametrize("tool", DETECTION_TOOL_NAMES)
def test_every_tool_is_named_by_its_name_in_three_spellings(tool: str) -> None:
    pattern = dimension_pattern(tool)
    spaced = tool.replace("_", " ")

    for spelling in (tool, spaced.title(), tool.replace("_", "-")):
        assert pattern.fullmatch(spelling), spelling


@pytest.mark.parametrize(
    "token",
    ["null_check", "verify_result", "verify_result()", "Float64", "p95", "UTF-8", "iso8601"],
)
def test_the_tools_vocabulary(token: str) -> None:
    assert is_tool_vocabulary(token)


@pytest.mark.parametrize("token", ["pressure", "column1", "sensor_7", "ingest_time", "temperature"])
def test_data_names_and_config_keys_are_not_tool_vocabulary(token: str) -> None:
    # Config keys such as `ingest_time` or `temperature` may as well be columns: still claims.
    assert not is_tool_vocabulary(token)


def test_dimension_words() -> None:
    assert all(is_dimension_word(w) for w in ("missing", "Duplicates", "spikes", "gaps", "schema"))
    assert not any(is_dimension_word(w) for w in ("pressure", "latest", "column"))


def test_generic_words_are_lower_case_single_words() -> None:
    assert all(word == word.lower() and " " not in word for word in GENERIC_WORDS)
    assert {"the", "timestamp", "each", "types"} <= GENERIC_WORDS
