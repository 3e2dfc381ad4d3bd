"""The completeness guard: whatever the model skipped is run by code, and the audit says so.

`expected` is the registered detection tools (never empty: an empty baseline would pass
vacuously), `called` the detection tools that executed successfully for the model, and
`missing = sorted(expected - called)` is backfilled in one runner call. The audit records all
four lists every time, so the skip rate is a statistic rather than a guess.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dq_agent import runner
from dq_agent.outcome import Audit
from dq_agent.result import CheckResult, Source
from dq_agent.tools import Tool
from dq_agent.trace import Trace

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Guarded:
    """Every registered tool's result in registration order, and the audit of how it came."""

    checks: dict[str, CheckResult]
    audit: Audit


def complete(
    tools: Sequence[Tool], executed: Mapping[str, CheckResult], *, trace: Trace | None = None
) -> Guarded:
    """Every registered tool's result: `executed` (what the model ran) plus the backfill."""
    expected = [tool.name for tool in tools]
    assert expected, "no detection tools registered: the completeness check would pass vacuously"
    # Only a result that really ran counts: a tool that raised for the model is backfilled.
    called = [
        name for name, result in executed.items() if name in expected and result.error is None
    ]
    missing = sorted(set(expected) - set(called))
    backfilled = (
        runner.run_tools([t for t in tools if t.name in missing], Source.BACKFILLED)
        if missing
        else {}
    )
    checks = {
        name: backfilled[name] if name in backfilled else executed[name].with_source(Source.AGENT)
        for name in expected
    }
    audit = Audit(
        expected_tools=expected,
        called_tools=called,
        fallback_executed=missing,
        fallback_outputs={name: result.to_dict() for name, result in backfilled.items()},
    )
    if missing:
        log.warning("guard triggered (model skipped %s, backfilled)", missing)
    else:
        log.info("completeness check passed (called %d/%d)", len(called), len(expected))
    if trace is not None:
        trace.emit("guard", expected=expected, called=called, missing=missing)
    return Guarded(checks, audit)
