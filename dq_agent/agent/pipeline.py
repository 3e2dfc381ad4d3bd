"""The agent's part of an inspection: pre-flight, the loop, the guard, the merge, the review.

`run_agent_inspection` returns every registered dimension once the model has started: a model
that fails mid-run leaves the rest to the guard. A model that cannot be used at all raises
`ModelUnavailableError` before any check ran, and the inspection takes the direct path. The
verdict is never the model's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dq_agent.agent.client import ModelClient
from dq_agent.agent.loop import AgentLoop, LoopResult
from dq_agent.agent.prompting import prompt
from dq_agent.config import Config
from dq_agent.errors import ModelCallError
from dq_agent.guard import Guarded, complete
from dq_agent.load import Dataset
from dq_agent.narrative.account import written_account
from dq_agent.narrative.excused import Windows
from dq_agent.narrative.guard import review_narrative
from dq_agent.outcome import AgentInfo, Audit
from dq_agent.result import CheckResult, Status, verdict_of
from dq_agent.tools import Tool
from dq_agent.trace import Trace

log = logging.getLogger(__name__)

MERGED = "merged"
APPENDED = "appended"
GUARD_SECTION_TITLE = (
    "Added by the completeness guard (checks the model did not run; not reviewed by the model)"
)

AskModel = Callable[[str], str]


@dataclass
class AgentOutcome:
    checks: dict[str, CheckResult]
    audit: Audit
    agent: AgentInfo


def run_agent_inspection(
    tools: list[Tool],
    dataset: Dataset,
    config: Config,
    *,
    question: str | None = None,
    trace: Trace | None = None,
    maintenance: Windows = (),
) -> AgentOutcome:
    """`maintenance`: the windows and the readings each excused (the JSON report's
    `maintenance`): the model is told, and the narrative may and the written account does say,
    how many readings the checks left out."""
    trace = trace or Trace()
    settings = config.agent
    info = AgentInfo(status="ok", model=settings.model, mode="none")
    with ModelClient(settings) as model:
        facts = model.preflight()
        loop = AgentLoop(
            model,
            tools,
            dataset,
            react=facts.supports_tools is False,
            max_steps=settings.max_steps,
            max_sentinel_rounds=settings.max_sentinel_rounds,
            question=question,
            maintenance=maintenance,
            trace=trace,
            use_sentinel=settings.sentinel,
            num_predict_tools=settings.num_predict_tools,
            num_predict_answer=settings.num_predict_answer,
        )
        trace.emit(
            "preflight",
            model=model.model,
            host=model.host,
            mode=loop.mode,
            capabilities=facts.capabilities,
        )
        run = loop.run()
        guarded = complete(tools, run.results, trace=trace)
        _account(info, run)
        guarded.audit.called_after_push = list(run.called_after_push)
        alive = run.error is None
        ask = _asker(model, info, trace) if alive else None
        info.narrative, info.merge = _merge(
            run, guarded, ask if settings.fallback_merge else None, trace
        )
        _review(info, guarded.checks, dataset, ask, run, maintenance)
        trace.emit(
            "account",
            line=info.account_line(),
            rejected_narrative=info.rejected_narrative,
            checks=info.narrative_checks,
        )
    return AgentOutcome(guarded.checks, guarded.audit, info)


def _account(info: AgentInfo, run: LoopResult) -> None:
    info.mode = run.mode
    info.steps = run.steps
    info.sentinel_rounds = run.sentinel_rounds
    info.sentinel_invocations = list(run.sentinel_invocations)
    info.prompt_tokens += run.prompt_tokens
    info.completion_tokens += run.completion_tokens
    if run.error is not None:
        info.status = "failed"
        info.error = run.error
        log.warning("the model failed mid-run, the guard completes the inspection: %s", run.error)


def _asker(model: ModelClient, info: AgentInfo, trace: Trace) -> AskModel:
    """One prompt to the model (merge, repair), its text back; raises ModelCallError. Tokens are
    counted and the call traced like the loop's."""

    def ask(text: str) -> str:
        num_predict = model.settings.num_predict_answer
        reply = model.chat([{"role": "user", "content": text}], num_predict=num_predict)
        info.prompt_tokens += reply.prompt_tokens
        info.completion_tokens += reply.completion_tokens
        trace.emit(
            "model_call",
            seconds=round(reply.seconds, 4),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            mode="ask",
            offered=[],
            num_predict=num_predict,
        )
        trace.emit("model_reply", content=reply.content, tool_calls=[])
        return reply.content.strip()

    return ask


def _merge(
    run: LoopResult, guarded: Guarded, ask: AskModel | None, trace: Trace
) -> tuple[str | None, str | None]:
    """Nothing backfilled: the answer passes through untouched, with no extra call."""
    backfilled = guarded.audit.fallback_executed
    if not backfilled:
        return run.narrative, None
    if ask is not None and run.narrative:
        results = "\n".join(guarded.checks[name].observation() for name in backfilled)
        try:
            merged = ask(prompt("merge", results=results, narrative=run.narrative))
        except ModelCallError as exc:
            log.warning(
                "merging the backfilled results failed, appending them instead: %s", exc.message
            )
            merged = ""
        if merged:
            trace.emit("merge", outcome=MERGED, tools=backfilled)
            return merged, MERGED
    trace.emit("merge", outcome=APPENDED, tools=backfilled)
    section = guard_section(guarded.checks, backfilled)
    return (f"{run.narrative.rstrip()}\n\n{section}" if run.narrative else section), APPENDED


def guard_section(checks: dict[str, CheckResult], names: Sequence[str]) -> str:
    lines = [f"## {GUARD_SECTION_TITLE}", ""]
    for name in names:
        result = checks[name]
        if result.status is Status.ERROR:
            lines.append(
                f"- {name} [backfilled]: could not run: {result.error} ({result.suggestion})"
            )
        else:
            lines.append(f"- {name} [backfilled]: {result.status}: {result.summary}")
    return "\n".join(lines)


def _review(
    info: AgentInfo,
    checks: dict[str, CheckResult],
    dataset: Dataset,
    ask: AskModel | None,
    run: LoopResult,
    maintenance: Windows = (),
) -> None:
    """The narrative guard (coverage, grounded names and figures, no contradicting verdict, no
    tool markup), then the choice of account: the model's checked text, or one written by code
    when the model's text cannot be shown even after the repair round."""
    verdict = verdict_of(list(checks.values()))
    if info.narrative is None:
        reasons = ["no answer"]
    else:
        info.narrative, info.narrative_checks = review_narrative(
            info.narrative, checks, dataset, verdict, ask, run.drill_downs, maintenance
        )
        reasons = list((info.narrative_checks or {}).get("rejection_reasons") or [])
    if not reasons:
        info.account_source = "model"
        return
    info.rejected_narrative = info.narrative
    info.narrative = written_account(checks, verdict, maintenance)
    info.account_source = "dq-agent"
    info.account_reason = ", ".join(reasons)
    log.info("the model's account was rejected (%s): dq-agent wrote one", info.account_reason)
