"""The account dq-agent writes itself when the model's text cannot be shown.

One sentence per dimension from its result (status, the summary's key figures, the worst finding)
and the verdict. Every name and figure comes from the results, so the narrative guard accepts it.
"""

from __future__ import annotations

from collections.abc import Mapping

from dq_agent.narrative.excused import Windows, excused_sentence
from dq_agent.result import CheckResult, Finding, Status, Verdict

_SEVERITY = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2, Status.SKIPPED: 3, Status.PASS: 4}
VERDICT_SENTENCE = "Verdict (computed by code): {verdict}"


def written_account(
    checks: Mapping[str, CheckResult], verdict: Verdict, maintenance: Windows = ()
) -> str:
    """`maintenance`: the windows and their excused readings, said after the checks."""
    lines = [_sentence(tool, result) for tool, result in checks.items()]
    excused = excused_sentence(maintenance)
    if excused is not None:
        lines.append(excused)
    lines.append(VERDICT_SENTENCE.format(verdict=str(verdict).upper()))
    return "\n".join(lines)


def _sentence(tool: str, result: CheckResult) -> str:
    if result.status is Status.ERROR:
        return f"{tool}: could not run ({result.error})."
    text = f"{tool}: {str(result.status).upper()}. {_full_stop(result.summary)}"
    worst = _worst(result.findings)
    if worst is not None and worst.what not in result.summary:
        where = worst.where()
        text += f" Worst finding: {worst.what}{f' ({where})' if where else ''}."
    return text


def _worst(findings: list[Finding]) -> Finding | None:
    if not findings:
        return None
    return min(findings, key=lambda f: (_SEVERITY.get(f.severity, 5), -f.count))


def _full_stop(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."
