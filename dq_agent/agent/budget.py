"""Prompt budgets: what a run may cost, so a CPU-only machine finishes it in minutes.

Tokens are estimated from characters (no tokenizer is shipped): three characters per token is
conservative for the JSON-heavy prompts here (Qwen's tokenizer averages about four on them), so a
prompt within the estimate is within the budget. The budgets:
- the system prompt plus the offered tool schemas: at most 1,000 tokens;
- each observation: at most 300 tokens;
- the largest single prompt of a run: at most 800 tokens per registered check (4,000 with five),
  so the budget grows when more checks are registered.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

CHARS_PER_TOKEN = 3.0
SYSTEM_BUDGET = 1000
OBSERVATION_BUDGET = 300
PROMPT_BUDGET_PER_CHECK = 800


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def prompt_budget(checks: int) -> int:
    """The largest single prompt a run may send with `checks` detection tools registered."""
    return PROMPT_BUDGET_PER_CHECK * checks


def request_tokens(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
) -> int:
    """The estimated prompt of one chat request: every message and the tool schemas."""
    text = "".join(str(m.get("content") or "") for m in messages)
    text += "".join(json.dumps(m["tool_calls"]) for m in messages if m.get("tool_calls"))
    return estimate_tokens(text + (json.dumps(list(tools)) if tools else ""))
