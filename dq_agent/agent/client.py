"""The Ollama client: pinned options, a finite timeout, pre-flight, and failures given names.

Every infrastructure failure (unreachable, not pulled, timeout, broken stream, garbage) becomes a
`ModelCallError` with an actionable message: the loop ends on it and the guard takes over, so a
dead model never kills the run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import ollama

from dq_agent.errors import ModelCallError, ModelUnavailableError
from dq_agent.settings import AgentConfig

log = logging.getLogger(__name__)

DEFAULT_PORT = 11434
# Ollama silently drops the oldest messages beyond num_ctx: warn before that happens.
CONTEXT_WARNING_SHARE = 0.9


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Any


@dataclass(frozen=True)
class ModelReply:
    content: str
    tool_calls: list[ToolCall]
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    prompt_seconds: float | None = None
    """Time the server spent reading the prompt, when it says (Ollama's prompt_eval_duration)."""
    eval_seconds: float | None = None
    """Time the server spent generating, when it says (eval_duration)."""


@dataclass(frozen=True)
class ModelFacts:
    """What `show` says about the model. `supports_tools` is None when the server does not say."""

    supports_tools: bool | None
    context_length: int | None = None
    capabilities: list[str] = field(default_factory=list)


def normalise_host(host: str) -> str:
    """A base URL as the ollama client reads `host`: no scheme means http on port 11434."""
    scheme, _, rest = host.strip().partition("://")
    if not rest:
        scheme, rest, port = "http", host.strip(), DEFAULT_PORT
    else:
        port = 443 if scheme == "https" else 80
    parts = urlsplit(f"{scheme}://{rest}")
    try:
        port = parts.port or port
    except ValueError:
        raise ModelUnavailableError(
            "bad_host", f"the Ollama host {host!r} is not a valid URL"
        ) from None
    name = parts.hostname or "127.0.0.1"
    if ":" in name:
        name = f"[{name}]"
    path = parts.path.strip("/")
    return f"{scheme}://{name}:{port}" + (f"/{path}" if path else "")


class ModelClient:
    """One model on one Ollama server, called with pinned options and a per-call deadline."""

    def __init__(self, settings: AgentConfig) -> None:
        self.settings = settings
        self.host = normalise_host(settings.host)
        self.model = settings.model
        self._client = ollama.Client(host=self.host, timeout=settings.timeout_seconds)
        self._context_warned = False

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]  # ollama leaves close() unannotated

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- pre-flight -------------------------------------------------------------------------

    def preflight(self) -> ModelFacts:
        """Server reachable, model pulled, capabilities known. Raises ModelUnavailableError."""
        try:
            return self.facts()
        except ModelCallError as exc:
            raise ModelUnavailableError.from_call_error(exc) from exc

    def facts(self) -> ModelFacts:
        try:
            shown = self._client.show(self.model)
        except _FAILURES as exc:
            raise self._describe(exc) from exc
        capabilities = list(shown.capabilities or [])
        return ModelFacts(
            supports_tools=("tools" in capabilities) if shown.capabilities is not None else None,
            context_length=_context_length(shown.modelinfo or {}),
            capabilities=capabilities,
        )

    def server_version(self) -> str:
        """The server's version (GET /api/version); raises ModelCallError when unreachable."""
        try:
            response = httpx.get(f"{self.host}/api/version", timeout=self.settings.timeout_seconds)
            response.raise_for_status()
            return str(response.json().get("version", "unknown"))
        except httpx.HTTPStatusError as exc:
            raise self._describe(
                ollama.ResponseError(exc.response.text, exc.response.status_code)
            ) from exc
        except _FAILURES as exc:
            raise self._describe(exc) from exc

    def pulled_models(self) -> list[str]:
        try:
            listed = self._client.list()
        except _FAILURES as exc:
            raise self._describe(exc) from exc
        return [m.model for m in listed.models if m.model]

    # -- calls ------------------------------------------------------------------------------

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        *,
        stop: Sequence[str] | None = None,
        num_predict: int | None = None,
    ) -> ModelReply:
        """One streamed chat call, accumulated; the whole call must finish within the timeout.

        `num_predict` bounds the reply (default: the account's length): every call is bounded.
        """
        options: dict[str, Any] = {
            "num_ctx": self.settings.num_ctx,
            "temperature": self.settings.temperature,
            "seed": self.settings.seed,
            "num_predict": num_predict or self.settings.num_predict_answer,
        }
        if stop:
            options["stop"] = list(stop)
        started = time.monotonic()
        deadline = started + self.settings.timeout_seconds
        content: list[str] = []
        calls: list[ToolCall] = []
        prompt_tokens = completion_tokens = 0
        durations: tuple[float | None, float | None] = (None, None)
        try:
            stream: Iterator[ollama.ChatResponse] = self._client.chat(
                self.model,
                messages=list(messages),
                tools=list(tools or []),
                stream=True,
                options=options,
            )
            for part in stream:
                content.append(part.message.content or "")
                calls.extend(
                    ToolCall(c.function.name, dict(c.function.arguments))
                    for c in part.message.tool_calls or []
                )
                if part.done:
                    prompt_tokens = part.prompt_eval_count or 0
                    completion_tokens = part.eval_count or 0
                    durations = (_seconds(part.prompt_eval_duration), _seconds(part.eval_duration))
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the model did not finish within the timeout")
        except _FAILURES as exc:
            raise self._describe(exc) from exc
        self._watch_context(prompt_tokens)
        return ModelReply(
            "".join(content),
            calls,
            prompt_tokens,
            completion_tokens,
            time.monotonic() - started,
            *durations,
        )

    def ask(self, prompt: str, num_predict: int | None = None) -> str:
        """One prompt, no tools, the text of the answer. Raises ModelCallError."""
        messages = [{"role": "user", "content": prompt}]
        return self.chat(messages, num_predict=num_predict).content.strip()

    # -- helpers ----------------------------------------------------------------------------

    def _watch_context(self, prompt_tokens: int) -> None:
        if self._context_warned or prompt_tokens < CONTEXT_WARNING_SHARE * self.settings.num_ctx:
            return
        self._context_warned = True
        log.warning(
            "the prompt uses %d of num_ctx %d tokens: Ollama drops the oldest messages beyond it; "
            "raise agent.num_ctx",
            prompt_tokens,
            self.settings.num_ctx,
        )

    @property
    def context_warned(self) -> bool:
        return self._context_warned

    def _describe(self, exc: BaseException) -> ModelCallError:
        model, host = self.model, self.host
        if isinstance(exc, ollama.ResponseError):
            text = str(exc.error)
            if exc.status_code == 404 or "not found" in text:
                return ModelCallError(
                    "not_pulled", f"model {model} is not pulled: run `ollama pull {model}`"
                )
            if "does not support tools" in text:
                return ModelCallError("no_tools", f"model {model} does not support tools")
            code = f" (HTTP {exc.status_code})" if exc.status_code > 0 else ""
            return ModelCallError("server_error", f"Ollama at {host} failed{code}: {text}")
        if isinstance(exc, httpx.TimeoutException):
            return ModelCallError(
                "timeout",
                f"model {model} did not answer within {self.settings.timeout_seconds:g} s: "
                "raise --model-timeout or use a smaller model",
            )
        if isinstance(exc, ConnectionError | httpx.ConnectError):
            return ModelCallError(
                "unreachable",
                f"Ollama is not reachable at {host}: start it with `ollama serve`, "
                "or set --host / OLLAMA_HOST",
            )
        if isinstance(exc, httpx.HTTPError):
            return ModelCallError(
                "connection_lost", f"the connection to Ollama at {host} failed: {exc}"
            )
        return ModelCallError(
            "bad_response",
            f"Ollama at {host} sent a response that could not be read ({type(exc).__name__})",
        )


# What a call can fail with: HTTP errors from the server, network and timeouts (httpx, and
# ollama's ConnectionError), undecodable or invalid bodies (json, pydantic: both ValueErrors).
_FAILURES: tuple[type[BaseException], ...] = (
    ollama.ResponseError,
    ConnectionError,
    httpx.HTTPError,
    json.JSONDecodeError,
    ValueError,
)


def _seconds(nanoseconds: int | None) -> float | None:
    return nanoseconds / 1e9 if nanoseconds else None


def _context_length(model_info: Mapping[str, Any]) -> int | None:
    for key, value in model_info.items():
        if key.endswith(".context_length") and isinstance(value, int):
            return value
    return None
