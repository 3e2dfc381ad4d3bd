"""The ReAct loop: the model calls tools until it answers, within a step budget.

Model mistakes (unknown tools, bad arguments, repeats, an answer without verify_result, an empty
answer) are answered with an observation or one nudge and the loop goes on. Infrastructure
failures end it: on the very first call as `ModelUnavailableError` (the model cannot be used),
later as a result with `error` set. Either way the guard completes what is missing.

Ollama cannot force a tool choice, so the offered tool list is the lever: after a "not ready"
verdict only the missing detection tools and verify_result are offered; after "ready" none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dq_agent.agent.client import ModelClient, ModelReply
from dq_agent.agent.dispatch import Dispatcher
from dq_agent.agent.prompting import prompt, sentinel_position, system_prompt, task_prompt
from dq_agent.agent.react import (
    ParsedTurn,
    clean_answer,
    parse_content_calls,
    parse_react,
    visible_part,
)
from dq_agent.agent.sentinel import NOT_READY, READY, SENTINEL_SCHEMA, Sentinel
from dq_agent.errors import ModelCallError, ModelUnavailableError
from dq_agent.load import Dataset
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
        trace: Trace | None = None,
        use_sentinel: bool = True,
    ) -> None:
        self.model = model
        self.tools = list(tools)
        self.dataset = dataset
        self.react = react
        self.max_steps = max_steps
        self.question = question
        # Off only to measure what the sentinel buys (eval-model --no-sentinel).
        self.use_sentinel = use_sentinel
        self.trace = trace or Trace()
        self.sentinel = Sentinel([t.name for t in self.tools], max_sentinel_rounds, question)
        self.dispatcher = Dispatcher(self.tools, self.sentinel, self.trace)
        self.steps = 0
        self.replies = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._reminded = False
        self._nudged = False
        self._answer_only = False
        self._context_traced = False

    @property
    def mode(self) -> str:
        return MODE_REACT if self.react else MODE_TOOLS

    def run(self) -> LoopResult:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(self.tools, self.react, self.use_sentinel)},
            {"role": "user", "content": task_prompt(self.dataset, self.question)},
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
                messages.extend(self._execute(turn))
                continue
            answer = (turn.final_answer or "").strip()
            nudge = "react_format" if self.react and turn.final_answer is None else None
            nudge = nudge or self._nudge_for(answer)
            if nudge is None:
                if not answer:
                    return self._end("empty_answer")
                self.trace.emit("answer", step=self.steps, chars=len(answer), text=answer)
                return self._end("answered", narrative=answer)
            self.trace.emit("nudge", step=self.steps, kind=nudge)
            messages.append({"role": "assistant", "content": visible_part(reply.content)})
            messages.append({"role": "user", "content": prompt(nudge)})
        return self._end("step_budget")

    def _execute(self, turn: ParsedTurn) -> list[dict[str, Any]]:
        """Run each call of the turn; the observations to append, in order."""
        observations = []
        for call in turn.calls:
            outcome = self.dispatcher.execute(call, self.steps)
            if outcome.verdict is not None:
                verdict = outcome.verdict
                self.trace.emit(
                    "sentinel",
                    step=self.steps,
                    verdict=verdict.verdict,
                    missing=verdict.missing,
                    round=verdict.round,
                    claimed_ready=verdict.claimed_ready,
                )
            observations.append(self._observation_message(call.name, outcome.observation))
        return observations

    def _call(self, messages: list[dict[str, Any]]) -> ModelReply:
        offered = [] if self.react else self._offered()
        try:
            reply = self.model.chat(messages, offered, stop=_REACT_STOP if self.react else None)
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
            reply = self.model.chat(messages, offered, stop=_REACT_STOP)
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.trace.emit(
            "model_call",
            step=self.steps,
            seconds=round(reply.seconds, 4),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            mode=self.mode,
            offered=[t["function"]["name"] for t in offered],
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
        missing = self.sentinel.missing(self.dispatcher.results)
        schemas = [t.ollama_schema() for t in self.tools if last != NOT_READY or t.name in missing]
        if self.use_sentinel and not self.sentinel.exhausted:
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

    def _nudge_for(self, answer: str) -> str | None:
        """One reminder when verify_result was never called; one nudge for an empty answer."""
        if self.use_sentinel and self.sentinel.rounds == 0 and not self._reminded:
            self._reminded = True
            return "reminder"
        if not answer and not self._nudged:
            self._nudged = True
            self._answer_only = True
            return "summarise"
        return None

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
        )
