"""`dq-agent doctor`: the pre-flight checks one by one, each with what is wrong and how to fix it.

Exit code: 0 when the model can be used (warnings included: no native tool calling only means
the text ReAct mode, a slow model only a long run), 4 (`EXIT_AGENT`) when it cannot: server
unreachable or model not pulled.

The last check measures the model's speed on a small prompt (prompt tokens read and tokens
generated per second) and from it the expected duration of a run on the sample and of a first
call, against `--model-timeout`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from rich.console import Console
from rich.markup import escape

from dq_agent.agent.client import ModelClient, ModelFacts
from dq_agent.config import Config
from dq_agent.errors import EXIT_AGENT, EXIT_OK, ModelCallError

OK = "ok"
WARN = "warn"
PROBLEM = "problem"
# Below this the system prompt, five observations and the answer hardly fit.
MIN_USEFUL_NUM_CTX = 4096
DOCTOR_TIMEOUT = 10.0
# A run on the sample with qwen2.5-coder:1.5b (README, agent section): its first two turns took
# 790 + 2,423 prompt and 163 + 163 generated tokens; the account turn adds about 2,600 + 300.
SAMPLE_RUN_PROMPT_TOKENS = 6000
SAMPLE_RUN_COMPLETION_TOKENS = 650
FIRST_PROMPT_TOKENS = 1500
_SPEED_PROMPT = (
    "You check industrial sensor data for missing values, duplicates, outliers, delays and "
    "schema problems. A device reports temperature, pressure and humidity once a minute. "
    "Name, in one short sentence, the first thing you would check in such data."
)
_SPEED_TOKENS = 24


@dataclass(frozen=True)
class DoctorCheck:
    name: str
    status: str
    detail: str
    fix: str | None = None


@dataclass
class DoctorReport:
    host: str
    model: str
    checks: list[DoctorCheck] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        return all(check.status != PROBLEM for check in self.checks)

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.usable else EXIT_AGENT


def run_doctor(config: Config) -> DoctorReport:
    # The doctor's calls only read metadata: a hung server must not stall it for minutes.
    settings = replace(
        config.agent, timeout_seconds=min(config.agent.timeout_seconds, DOCTOR_TIMEOUT)
    )
    try:
        client = ModelClient(settings)
    except ModelCallError as exc:
        report = DoctorReport(settings.host, settings.model)
        report.checks.append(
            DoctorCheck("server reachable", PROBLEM, exc.message, "fix agent.host or OLLAMA_HOST")
        )
        return report
    with client:
        report = DoctorReport(client.host, client.model)
        try:
            version = client.server_version()
            pulled = client.pulled_models()
        except ModelCallError as exc:
            report.checks.append(
                DoctorCheck("server reachable", PROBLEM, exc.message, "run `ollama serve`")
            )
            return report
        report.checks.append(
            DoctorCheck("server reachable", OK, f"Ollama {version} at {client.host}")
        )
        if _full_name(client.model) not in {_full_name(m) for m in pulled}:
            available = ", ".join(pulled) or "none"
            report.checks.append(
                DoctorCheck(
                    "model pulled",
                    PROBLEM,
                    f"model {client.model} is not pulled (pulled: {available})",
                    f"run `ollama pull {client.model}`, or choose a pulled one with --model",
                )
            )
            return report
        report.checks.append(DoctorCheck("model pulled", OK, f"{client.model} is pulled"))
        try:
            facts = client.facts()
        except ModelCallError as exc:
            report.checks.append(
                DoctorCheck("model details", PROBLEM, exc.message, "check the Ollama server log")
            )
            return report
        report.checks.append(_tools_check(facts, client.model))
        report.checks.append(_context_check(facts, settings.num_ctx))
    report.checks.append(_speed_check(config))
    return report


@dataclass(frozen=True)
class Speed:
    prompt_per_second: float
    generated_per_second: float

    def seconds(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens / self.prompt_per_second + completion_tokens / self.generated_per_second
        )


def measure_speed(client: ModelClient) -> Speed:
    """A warm-up call, then one small call: rates from the server's own timings (else the wall
    clock). Raises ModelCallError."""
    # A first call may include loading the model into memory: warm up, then measure.
    client.chat([{"role": "user", "content": "Say OK."}], num_predict=1)
    reply = client.chat([{"role": "user", "content": _SPEED_PROMPT}], num_predict=_SPEED_TOKENS)
    prompt_seconds = reply.prompt_seconds or reply.seconds
    eval_seconds = reply.eval_seconds or reply.seconds
    return Speed(
        max(reply.prompt_tokens, 1) / max(prompt_seconds, 1e-6),
        max(reply.completion_tokens, 1) / max(eval_seconds, 1e-6),
    )


def _speed_check(config: Config) -> DoctorCheck:
    settings = config.agent
    try:
        with ModelClient(settings) as client:
            speed = measure_speed(client)
    except ModelCallError as exc:
        return DoctorCheck("speed", WARN, f"could not measure: {exc.message}")
    run = speed.seconds(SAMPLE_RUN_PROMPT_TOKENS, SAMPLE_RUN_COMPLETION_TOKENS)
    first = speed.seconds(FIRST_PROMPT_TOKENS, settings.num_predict_tools)
    detail = (
        f"{speed.prompt_per_second:.0f} prompt tokens/s, {speed.generated_per_second:.1f} "
        f"generated tokens/s: a run on the sample takes about {_duration(run)}, "
        f"a first call about {_duration(first)}"
    )
    if first > settings.timeout_seconds:
        return DoctorCheck(
            "speed",
            WARN,
            f"{detail}, beyond --model-timeout {settings.timeout_seconds:g} s",
            f"raise --model-timeout to {int(first * 1.5 / 10 + 1) * 10} or use a faster model",
        )
    return DoctorCheck("speed", OK, f"{detail} (--model-timeout {settings.timeout_seconds:g} s)")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def _tools_check(facts: ModelFacts, model: str) -> DoctorCheck:
    if facts.supports_tools:
        return DoctorCheck("tools capability", OK, f"{model} supports native tool calling")
    if facts.supports_tools is None:
        return DoctorCheck(
            "tools capability",
            WARN,
            "the server does not report capabilities: tool calling is tried, text ReAct if refused",
            "update Ollama",
        )
    return DoctorCheck(
        "tools capability",
        WARN,
        f"{model} has no native tool calling: the text ReAct format is used (less reliable)",
        "use a model with tools, e.g. `ollama pull qwen2.5:7b`",
    )


def _context_check(facts: ModelFacts, num_ctx: int) -> DoctorCheck:
    if facts.context_length is not None and num_ctx > facts.context_length:
        return DoctorCheck(
            "num_ctx",
            WARN,
            f"num_ctx {num_ctx} exceeds the model's context length {facts.context_length}",
            f"set agent.num_ctx to {facts.context_length} or less",
        )
    if num_ctx < MIN_USEFUL_NUM_CTX:
        return DoctorCheck(
            "num_ctx",
            WARN,
            f"num_ctx {num_ctx} is small: Ollama silently drops the oldest messages beyond it",
            f"set agent.num_ctx to at least {MIN_USEFUL_NUM_CTX} (8192 recommended)",
        )
    limit = f" (model maximum {facts.context_length})" if facts.context_length else ""
    return DoctorCheck("num_ctx", OK, f"num_ctx {num_ctx}{limit}")


def render_doctor(report: DoctorReport, console: Console) -> None:
    marks = {OK: "[green]✓[/]", WARN: "[yellow]![/]", PROBLEM: "[red]✗[/]"}
    console.print(
        f"[bold]dq-agent doctor[/]: model {escape(report.model)} at {escape(report.host)}"
    )
    for check in report.checks:
        console.print(f" {marks[check.status]} {escape(check.name)}: {escape(check.detail)}")
        if check.fix and check.status != OK:
            console.print(f"     fix: {escape(check.fix)}")
    if report.usable:
        console.print("[green]The model can be used.[/]")
    else:
        console.print("[red]The model cannot be used: inspections run the tools directly.[/]")


def _full_name(name: str) -> str:
    return name if ":" in name else f"{name}:latest"
