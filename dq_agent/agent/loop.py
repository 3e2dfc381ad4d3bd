"""The ReAct loop: the model calls tools until it answers, within a step budget.

Model mistakes (unknown tools, bad arguments, repeats, an empty answer) are answered with an
observation or one nudge and the loop goes on. Infrastructure failures end it: on the very first
call as `ModelUnavailableError` (the model cannot be used), later as a result with `error` set.
Either way the guard completes what is missing.

The loop enforces the sentinel: a final answer, an empty turn or a turn of nothing but repeats,
while detection tools are missing, is never the end. The loop runs verify_result itself and sends
its "not ready" as the next message (`by: loop`), until the shared round limit is reached.

Ollama cannot force a tool choice, so the offered tool list is the lever: after a "not ready"
verdict only the missing detection tools are offered; once all have run, drill_down (and
verify_result until it said "ready").

Every call sets `num_predict`: short while tools are missing (a turn of calls needs little), long
once the account is due.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dq_agent.agent.budget import prompt_budget
from dq_agent.agent.client import ModelClient, ModelReply
from dq_agent.agent.dispatch import REPEATED, Dispatcher, Outcome
from dq_agent.agent.drilldown import drill_down_schema
from dq_agent.agent.prompting import prompt, sentinel_position, system_prompt, task_prompt
from dq_agent.agent.react import (
    ParsedTurn,
    clean_answer,
    parse_content_calls,
    parse_react,
    visible_part,
)
from dq_agent.agent.sentinel import BY_LOOP, BY_MODEL, NOT_READY, READY, SENTINEL_SCHEMA, Sentinel
from dq_agent.errors import ModelCallError, ModelUnavailableError
from dq_agent.load import Dataset
from dq_agent.narrative.excused import Windows
from dq_agent.result import CheckResult
from dq_agent.tools import Tool
from dq_agent.trace import Trace

MODE_TOOLS = "tools"
MODE_REACT = "react"
_REACT_STOP = ["\nObservation:", "<tool_response>"]


@dataclass
class LoopResult:
    """What the loop did. `results`: detection tools the model ran successfully, in call order."""

    results: dict[str, CheckResult]
    narrative: str | None
    mode: str
    steps: int
    sentinel_rounds: int
    prompt_tokens: int
    completion_tokens: int
    end_reason: str
    error: str | None = None
    called_after_push: list[str] = field(default_factory=list)
    """Detection tools the model called only after a loop-invoked sentinel round."""
    sentinel_invocations: list[dict[str, Any]] = field(default_factory=list)
    drill_downs: list[CheckResult] = field(default_factory=list)


class AgentLoop:
    def __init__(
        self,
        model: ModelClient,
        tools: Sequence[Tool],
        dataset: Dataset,
        *,
        react: bool,
        max_steps: int,
        max_sentinel_rounds: int,
        question: str | None = None,
        maintenance: Windows = (),
        trace: Trace | None = None,
        use_sentinel: bool = True,
        num_predict_tools: int | None = None,
        num_predict_answer: int | None = None,
    ) -> None:
        self.model = model
        self.tools = list(tools)
        self.dataset = dataset
        self.react = react
        self.max_steps = max_steps
        self.question = question
        self.maintenance = maintenance
        # Off only to measure what the sentinel buys (eval-model --no-sentinel).
        self.use_sentinel = use_sentinel
        self.trace = trace or Trace()
        self.sentinel = Sentinel([t.name for t in self.tools], max_sentinel_rounds, question)
        self.dispatcher = Dispatcher(self.tools, self.sentinel, self.trace)
        self.steps = 0
        self.replies = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.num_predict_tools = num_predict_tools
        self.num_predict_answer = num_predict_answer
        self._before_push: set[str] | None = None
        self._nudged = False
        self._format_nudged = False
        self._stalled = False
        self._answer_only = False
        self._context_traced = False

    @property
    def mode(self) -> str:
        return MODE_REACT if self.react else MODE_TOOLS

    def run(self) -> LoopResult:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(self.tools, self.react, self.use_sentinel)},
            {"role": "user", "content": task_prompt(self.dataset, self.question, self.maintenance)},
        ]
        while self.steps < self.max_steps:
            self.steps += 1
            try:
                reply = self._call(messages)
            except ModelCallError as exc:
                self.trace.emit("model_error", step=self.steps, kind=exc.kind, error=exc.message)
                if self.replies == 0:
                    raise ModelUnavailableError.from_call_error(exc) from exc
                return self._end("model_failed", error=exc.message)
            self.replies += 1
            turn = self._read(reply)
            if turn.thought:
                self.trace.emit("thought", step=self.steps, text=turn.thought)
            if turn.calls:
                self._answer_only = False
                messages.append(self._assistant_message(reply))
                outcomes = self._execute(turn)
                messages.extend(self._observation_message(o.tool, o.observation) for o in outcomes)
                if all(o.kind == REPEATED for o in outcomes) and not self._push(messages, None):
                    # Nothing left to push: a model that only repeats gets no tools, then ends.
                    if self._stalled:
                        return self._end("repeating")
                    self._stalled = True
                    self._answer_only = True
                continue
            answer = (turn.final_answer or "").strip()
            if self.react and turn.final_answer is None and not self._format_nudged:
                self._format_nudged = True
                self._nudge(messages, reply, "react_format")
                continue
            if self._push(messages, reply):
                continue
            if not answer:
                if self._nudged:
                    return self._end("empty_answer")
                self._nudged = True
                self._answer_only = True
                self._nudge(messages, reply, "summarise")
                continue
            self.trace.emit("answer", step=self.steps, chars=len(answer), text=answer)
            return self._end("answered", narrative=answer)
        return self._end("step_budget")

    def _execute(self, turn: ParsedTurn) -> list[Outcome]:
        """Run each call of the turn, in order."""
        outcomes = []
        for call in turn.calls:
            outcome = self.dispatcher.execute(call, self.steps)
            if outcome.verdict is not None:
                self._trace_verdict(outcome.verdict.verdict, BY_MODEL, outcome)
            outcomes.append(outcome)
        return outcomes

    def _trace_verdict(self, verdict: str, by: str, outcome: Outcome | None = None) -> None:
        last = self.sentinel.last
        self.trace.emit(
            "sentinel",
            step=self.steps,
            verdict=verdict,
            missing=last.missing if last else [],
            round=last.round if last else 0,
            claimed_ready=outcome.verdict.claimed_ready if outcome and outcome.verdict else None,
            by=by,
        )

    def _push(self, messages: list[dict[str, Any]], reply: ModelReply | None) -> bool:
        """The model stopped while tools are missing: run verify_result for it. False when the
        sentinel is off, nothing is missing or the rounds are used up (the guard then backfills)."""
        missing = self.dispatcher.missing
        if not self.use_sentinel or not missing or self.sentinel.exhausted:
            return False
        verdict = self.sentinel.review({}, self.dispatcher.results, by=BY_LOOP)
        if self._before_push is None:
            self._before_push = set(self.dispatcher.results)
        self._answer_only = False
        self._trace_verdict(verdict.verdict, BY_LOOP)
        if reply is not None:
            messages.append({"role": "assistant", "content": visible_part(reply.content)})
        text = f"Observation: {verdict.observation}" if self.react else verdict.observation
        messages.append({"role": "user", "content": text})
        return True

    def _nudge(self, messages: list[dict[str, Any]], reply: ModelReply, kind: str) -> None:
        self.trace.emit("nudge", step=self.steps, kind=kind)
        messages.append({"role": "assistant", "content": visible_part(reply.content)})
        messages.append({"role": "user", "content": prompt(kind)})

    def _call(self, messages: list[dict[str, Any]]) -> ModelReply:
        offered = [] if self.react else self._offered()
        # Short while tools are missing: a turn of calls needs little, and a small model that
        # answers instead is pushed back anyway. Long once the account is due.
        num_predict = self.num_predict_tools if self.dispatcher.missing else self.num_predict_answer
        try:
            reply = self.model.chat(
                messages,
                offered,
                stop=_REACT_STOP if self.react else None,
                num_predict=num_predict,
            )
        except ModelCallError as exc:
            if exc.kind != "no_tools" or self.react:
                raise
            # `show` did not list capabilities, and the server refuses tools: switch to text.
            self.react = True
            offered = []
            messages[0] = {
                "role": "system",
                "content": system_prompt(self.tools, react=True, sentinel=self.use_sentinel),
            }
            reply = self.model.chat(messages, offered, stop=_REACT_STOP, num_predict=num_predict)
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        budget = prompt_budget(len(self.tools))
        if reply.prompt_tokens > budget:
            self.trace.emit(
                "over_budget", step=self.steps, prompt_tokens=reply.prompt_tokens, budget=budget
            )
        self.trace.emit(
            "model_call",
            step=self.steps,
            seconds=round(reply.seconds, 4),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            mode=self.mode,
            offered=[t["function"]["name"] for t in offered],
            num_predict=num_predict,
        )
        self.trace.emit(
            "model_reply",
            step=self.steps,
            content=reply.content,
            tool_calls=[{"name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
        )
        if self.model.context_warned and not self._context_traced:
            self._context_traced = True
            self.trace.emit(
                "context_warning",
                prompt_tokens=reply.prompt_tokens,
                num_ctx=self.model.settings.num_ctx,
            )
        return reply

    def _offered(self) -> list[dict[str, Any]]:
        last = self.sentinel.last.verdict if self.sentinel.last else None
        if self._answer_only or last == READY:
            return []
        missing = self.dispatcher.missing
        sentinel = self.use_sentinel and not self.sentinel.exhausted
        if not missing:
            names = [t.name for t in self.tools]
            schemas = [drill_down_schema(names, self.dataset)]
            return [SENTINEL_SCHEMA, *schemas] if sentinel else schemas
        if last == NOT_READY:
            return [t.ollama_schema() for t in self.tools if t.name in missing]
        schemas = [t.ollama_schema() for t in self.tools if t.name in missing]
        if sentinel:
            schemas.insert(sentinel_position(len(schemas)), SENTINEL_SCHEMA)
        return schemas

    def _read(self, reply: ModelReply) -> ParsedTurn:
        if self.react:
            return parse_react(reply.content)
        if reply.tool_calls:
            return ParsedTurn(calls=reply.tool_calls, thought=reply.content.strip() or None)
        calls = parse_content_calls(reply.content)
        if calls:
            return ParsedTurn(calls=calls)
        return ParsedTurn(final_answer=clean_answer(reply.content))

    def _assistant_message(self, reply: ModelReply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": visible_part(reply.content)}
        if reply.tool_calls and not self.react:
            message["tool_calls"] = [
                {"function": {"name": c.name, "arguments": c.arguments}} for c in reply.tool_calls
            ]
        return message

    def _observation_message(self, tool: str, observation: str) -> dict[str, Any]:
        if self.react:
            return {"role": "user", "content": f"Observation: {observation}"}
        return {"role": "tool", "tool_name": tool, "content": observation}

    def _end(
        self, reason: str, *, narrative: str | None = None, error: str | None = None
    ) -> LoopResult:
        self.trace.emit("loop_end", reason=reason, steps=self.steps)
        before = self._before_push
        after_push = (
            [] if before is None else [n for n in self.dispatcher.results if n not in before]
        )
        return LoopResult(
            results=dict(self.dispatcher.results),
            narrative=narrative,
            mode=self.mode,
            steps=self.steps,
            sentinel_rounds=self.sentinel.rounds,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            end_reason=reason,
            error=error,
            called_after_push=after_push,
            sentinel_invocations=list(self.sentinel.invocations),
            drill_downs=list(self.dispatcher.drill_downs),
        )
