"""The command line: options plus one call each. Expected errors are caught once, in `DQAgentGroup`."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any

import click
import typer
import typer.core
from rich.console import Console

from dq_agent import __version__
from dq_agent.commands import InspectOptions, run_inspect
from dq_agent.errors import EXIT_INTERRUPTED, DQAgentError

EXIT_CODES_HELP = (
    "Exit codes: 0 the verdict is below --fail-on; 1 it is at or above --fail-on; "
    "2 bad invocation or configuration; 3 the input cannot be read, is empty, or nothing could "
    "be checked; 4 the model could not be used and --require-agent was given; 130 interrupted."
)


class DQAgentGroup(typer.core.TyperGroup):
    """Catches the one error family once: a one-line message and its exit code, no traceback
    (unless --debug)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DQAgentError as exc:
            if ctx.meta.get("dq_agent.debug"):
                raise
            Console(stderr=True).print(f"dq-agent: error: {exc.message}", markup=False, highlight=False)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            Console(stderr=True).print("dq-agent: interrupted", markup=False, highlight=False)
            ctx.exit(EXIT_INTERRUPTED)


app = typer.Typer(
    cls=DQAgentGroup,
    help="Inspect industrial sensor data (CSV or Parquet) for quality problems.\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dq-agent {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Inspect industrial sensor data (CSV or Parquet) for quality problems."""


def _setup(ctx: typer.Context, debug: bool, quiet: bool, verbose: bool) -> None:
    ctx.meta["dq_agent.debug"] = debug
    level = logging.DEBUG if debug else logging.ERROR if quiet else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="dq-agent: %(levelname)s: %(message)s", force=True)


@app.command(epilog=EXIT_CODES_HELP)
def inspect(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="A CSV or Parquet file, a glob, or a directory of Parquet files.")],
    config: Annotated[Path | None, typer.Option("--config", "-c", help="YAML config file.")] = None,
    no_agent: Annotated[bool, typer.Option("--no-agent", help="Run every check directly, no model.")] = False,
    output_format: Annotated[str, typer.Option("--format", "-f", help="rich | json | markdown.")] = "rich",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report here (atomically).")] = None,
    fail_on: Annotated[str, typer.Option("--fail-on", help="Exit 1 at this verdict or worse: warn | fail | never.")] = "fail",
    as_of: Annotated[
        str | None,
        typer.Option("--as-of", help="Reference time for freshness and future rows (ISO 8601; default now)."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Ollama model (default qwen2.5:7b).")] = None,
    host: Annotated[str | None, typer.Option("--host", help="Ollama host (default $OLLAMA_HOST).")] = None,
    model_timeout: Annotated[
        float | None, typer.Option("--model-timeout", help="Seconds per model call before giving up.")
    ] = None,
    question: Annotated[str | None, typer.Option("--question", help="A question the model must answer too.")] = None,
    require_agent: Annotated[
        bool, typer.Option("--require-agent", help="Exit 4 when the model cannot be used.")
    ] = False,
    no_history: Annotated[bool, typer.Option("--no-history", help="Do not record this run.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print every agent step live.")] = False,
    trace: Annotated[Path | None, typer.Option("--trace", help="Write every agent step as JSON lines.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress or notes; only errors.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    """Inspect PATH and print a data-quality report."""
    _setup(ctx, debug, quiet, verbose)
    overrides: dict[str, Any] = {
        "agent.enabled": False if no_agent else None,
        "agent.model": model,
        "agent.host": host,
        "agent.timeout_seconds": model_timeout,
        "agent.require": True if require_agent else None,
        "delay_check.as_of": as_of,
        "history.enabled": False if no_history else None,
    }
    options = InspectOptions(
        path=path,
        config_file=config,
        output_format=output_format,
        output=output,
        fail_on=fail_on,
        quiet=quiet,
        verbose=verbose,
        trace_file=trace,
        question=question,
        overrides=overrides,
    )
    raise typer.Exit(run_inspect(options))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
