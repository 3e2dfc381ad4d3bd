"""`dq-agent doctor`: the pre-flight checks one by one, each with what is wrong and how to fix it.

Exit code: 0 when the model can be used (warnings included: no native tool calling only means
the text ReAct mode), 4 (`EXIT_AGENT`) when it cannot: server unreachable or model not pulled.
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
    return report


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
