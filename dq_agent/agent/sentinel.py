"""The `verify_result` sentinel: the model asks whether it is done; code answers from facts.

The reply never echoes the model's own opinion (`is_ready`): it is computed from which detection
tools have actually run. It checks only the five dimensions and the user's question, never a
wider scope the model invents in `missing_items`.

The loop also runs it itself (`by=LOOP`) when the model stops while tools are missing: a final
answer, an empty turn, or a turn of repeats is never the end. Both kinds of round share one limit,
and `invocations` keeps who asked, so a model that checks itself can be told from one that is
pushed.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SENTINEL_NAME = "verify_result"

READY = "ready"
NOT_READY = "not_ready"
EXHAUSTED = "exhausted"

BY_MODEL = "model"
BY_LOOP = "loop"

SENTINEL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": SENTINEL_NAME,
        "description": (
            "Call this before your final answer: it checks whether every detection tool has run "
            "and tells you what is still missing."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "task_goal": {"type": "string", "description": "What you were asked to do."},
                "actual_result": {"type": "string", "description": "What you have done so far."},
                "missing_items": {
                    "type": "string",
                    "description": "What you think is still missing.",
                },
                "errors_found": {"type": "string", "description": "Problems found in the data."},
                "is_ready": {"type": "boolean", "description": "Whether you think you are done."},
            },
            "required": ["is_ready"],
        },
    },
}


@dataclass(frozen=True)
class SentinelVerdict:
    verdict: str
    missing: list[str]
    claimed_ready: bool | None
    round: int
    observation: str


class Sentinel:
    """Counts rounds and answers `verify_result` from the set of tools that have run."""

    def __init__(
        self, expected: Sequence[str], max_rounds: int, question: str | None = None
    ) -> None:
        self.expected = list(expected)
        self.max_rounds = max_rounds
        self.question = question
        self.rounds = 0
        self.last: SentinelVerdict | None = None
        self.invocations: list[dict[str, Any]] = []

    @property
    def exhausted(self) -> bool:
        return self.rounds >= self.max_rounds

    def missing(self, called: Collection[str]) -> list[str]:
        return [name for name in self.expected if name not in called]

    def rounds_by(self, by: str) -> int:
        return sum(1 for i in self.invocations if i["by"] == by)

    def review(
        self, arguments: Mapping[str, Any], called: Collection[str], by: str = BY_MODEL
    ) -> SentinelVerdict:
        missing = self.missing(called)
        claimed = _as_bool(arguments.get("is_ready"))
        if self.exhausted:
            todo = f"Call {', '.join(missing)} now, then give" if missing else "Give"
            text = (
                f"verify_result was already called {self.max_rounds} times, the limit: do not call "
                f"it again. {todo} your final answer."
            )
            return SentinelVerdict(EXHAUSTED, missing, claimed, self.rounds, text)
        self.rounds += 1
        self.invocations.append({"round": self.rounds, "by": by, "missing": list(missing)})
        if missing and by == BY_LOOP:
            text = (
                f"verify_result (run by dq-agent because you stopped): NOT READY. "
                f"{_and(missing)} {'has' if len(missing) == 1 else 'have'} not run: "
                f"call {'it' if len(missing) == 1 else 'them'} now."
            )
            verdict = NOT_READY
        elif missing:
            said = "You said you are ready, but you are not. " if claimed else ""
            text = (
                f"NOT READY. {said}These detection tools have not run yet: {', '.join(missing)}. "
                "Call each of them now, then call verify_result again."
            )
            verdict = NOT_READY
        else:
            question = f" and answer the user's question: {self.question}" if self.question else ""
            text = (
                f"READY. All {len(self.expected)} detection tools have run. Give your final answer "
                f"now: summarise the findings of each tool with their figures{question}. "
                "Do not call more tools."
            )
            verdict = READY
        self.last = SentinelVerdict(verdict, missing, claimed, self.rounds, text)
        return self.last


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
        return value.strip().lower() in ("true", "yes", "1")
    return None
