"""The command line: options plus one call each. Expected errors are caught once, in `errors_handled`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from dq_agent import __version__
from dq_agent.errors import EXIT_INTERRUPTED, DQAgentError
from dq_agent.report.text import one_line

# Each command imports its work (Polars, Rich, the Ollama client) when it runs: `--help` and
# `--version` stay fast.

EXIT_CODES_HELP = (
    "Exit codes: 0 the verdict is below --fail-on; 1 it is at or above --fail-on; "
    "2 bad invocation or configuration; 3 the input cannot be read, is empty, or nothing or part "
    "of it could be checked (a check errored); 4 the model could not be used and --require-agent was given; 130 interrupted."
)


@contextlib.contextmanager
def errors_handled(debug: bool) -> Iterator[None]:
    """The one place expected errors are caught: a one-line message and the error's exit code,
    no traceback (unless --debug)."""
    try:
        yield
    except DQAgentError as exc:
        if debug:
            raise
        typer.echo(f"dq-agent: error: {one_line(exc.message, 2000)}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("dq-agent: interrupted", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


app = typer.Typer(
    help="Inspect industrial sensor data (CSV, Parquet or a DuckDB table) for quality problems.\n\n"
    + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


# Options shared by several commands, declared once.
ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="YAML config file.")]
ModelOption = Annotated[
    str | None, typer.Option("--model", help="Ollama model (default qwen2.5:7b).")
]
HostOption = Annotated[
    str | None, typer.Option("--host", help="Ollama host (default $OLLAMA_HOST).")
]
ModelTimeoutOption = Annotated[
    float | None, typer.Option("--model-timeout", help="Seconds per model call before giving up.")
]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dq-agent {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Inspect industrial sensor data (CSV, Parquet or a DuckDB table) for quality problems."""


def _setup_logging(debug: bool, quiet: bool, verbose: bool) -> None:
    level = (
        logging.DEBUG
        if debug
        else logging.ERROR
        if quiet
        else logging.INFO
        if verbose
        else logging.WARNING
    )
    logging.basicConfig(level=level, format="dq-agent: %(levelname)s: %(message)s", force=True)


@app.command(epilog=EXIT_CODES_HELP)
def inspect(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="A CSV or Parquet file, a glob, a directory of Parquet files, or a DuckDB "
            "table as duckdb:FILE.db:TABLE.",
        ),
    ],
    config: ConfigOption = None,
    no_agent: Annotated[
        bool, typer.Option("--no-agent", help="Run every check directly, no model.")
    ] = False,
    output_format: Annotated[
        str, typer.Option("--format", "-f", help="rich | json | markdown | junit | html.")
    ] = "rich",
    junit_warn_as: Annotated[
        str,
        typer.Option(
            "--junit-warn-as", help="In JUnit XML a warning is: pass (with a property) | failure."
        ),
    ] = "pass",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report here (atomically).")
    ] = None,
    fail_on: Annotated[
        str, typer.Option("--fail-on", help="Exit 1 at this verdict or worse: warn | fail | never.")
    ] = "fail",
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of", help="Reference time for freshness and future rows (ISO 8601; default now)."
        ),
    ] = None,
    model: ModelOption = None,
    host: HostOption = None,
    model_timeout: ModelTimeoutOption = None,
    question: Annotated[
        str | None, typer.Option("--question", help="A question the model must answer too.")
    ] = None,
    require_agent: Annotated[
        bool, typer.Option("--require-agent", help="Exit 4 when the model cannot be used.")
    ] = False,
    max_memory: Annotated[
        str | None,
        typer.Option(
            "--max-memory",
            help="Memory budget, e.g. 2G (default 80% of the machine): data over it runs out "
            "of core (CSV streamed to Parquet first).",
        ),
    ] = None,
    no_history: Annotated[
        bool,
        typer.Option(
            "--no-history", help="Neither record this run nor compare it with the baseline."
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Print every agent step live.")
    ] = False,
    trace: Annotated[
        Path | None, typer.Option("--trace", help="Write every agent step as JSON lines.")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress or notes; only errors.")
    ] = False,
    checks: Annotated[
        str | None,
        typer.Option(
            "--checks", help="Run only these checks, comma-separated (default: every check)."
        ),
    ] = None,
    flags: Annotated[
        Path | None,
        typer.Option("--flags", help="Also write a QARTOD flag per reading and column (Parquet)."),
    ] = None,
    order_by: Annotated[
        str | None,
        typer.Option(
            "--order-by",
            help="Judge out-of-order rows in this column's order (a sequence number) instead of "
            "the file's; a DuckDB table has no row order without it.",
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="Run the checks on polars (default) | duckdb | spark (extras: pip install "
            "'dq-agent[duckdb]', 'dq-agent[spark]'); a check not yet ported runs on Polars.",
        ),
    ] = None,
    debug: DebugOption = False,
) -> None:
    """Inspect PATH and print a data-quality report."""
    from dq_agent.checks.delays import AS_OF_KEY
    from dq_agent.commands import InspectOptions, run_inspect

    _setup_logging(debug, quiet, verbose)
    overrides: dict[str, Any] = {
        "agent.enabled": False if no_agent else None,
        "agent.model": model,
        "agent.host": host,
        "agent.timeout_seconds": model_timeout,
        "agent.require": True if require_agent else None,
        AS_OF_KEY: as_of,
        "history.enabled": False if no_history else None,
        "limits.max_memory": max_memory,
        "run.checks": checks,
        "columns.order_by": order_by,
        "run.engine": engine,
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
        junit_warn_as=junit_warn_as,
        overrides=overrides,
        flags=flags,
    )
    with errors_handled(debug):
        code = run_inspect(options)
    raise typer.Exit(code)


@app.command()
def history(
    path: Annotated[
        str | None, typer.Argument(metavar="[PATH]", help="Only runs of this dataset path or name.")
    ] = None,
    last: Annotated[int, typer.Option("--last", "-n", min=1, help="How many recent runs.")] = 20,
    stats: Annotated[
        bool, typer.Option("--stats", help="Per model and tool: call and skip rates.")
    ] = False,
    trend: Annotated[
        bool,
        typer.Option("--trend", help="Key figures of PATH's last runs as sparklines (-n runs)."),
    ] = False,
    output_format: Annotated[str, typer.Option("--format", "-f", help="rich | json.")] = "rich",
    config: ConfigOption = None,
    debug: DebugOption = False,
) -> None:
    """Show recorded runs, newest first, skip-rate statistics (--stats), or a trend (--trend)."""
    from dq_agent.commands import run_history

    _setup_logging(debug, quiet=False, verbose=False)
    with errors_handled(debug):
        code = run_history(path, last, stats, output_format, config, trend=trend)
    raise typer.Exit(code)


@app.command("eval-model")
def eval_model(
    path: Annotated[str, typer.Argument(metavar="PATH", help="The dataset to inspect repeatedly.")],
    runs: Annotated[int, typer.Option("--runs", "-n", min=1, help="Runs per variant.")] = 5,
    no_sentinel: Annotated[
        bool,
        typer.Option("--no-sentinel", help="Also run without the sentinel and show both tables."),
    ] = False,
    output_format: Annotated[str, typer.Option("--format", "-f", help="rich | json.")] = "rich",
    temperature: Annotated[
        float | None,
        typer.Option(
            "--temperature", min=0.0, help="Sampling temperature of the runs (default 0.7)."
        ),
    ] = None,
    config: ConfigOption = None,
    model: ModelOption = None,
    host: HostOption = None,
    model_timeout: ModelTimeoutOption = None,
    debug: DebugOption = False,
) -> None:
    """Run the agent N times on PATH: how often does this model skip each tool (exit 4 without a model)?"""
    from dq_agent.commands import run_eval_model

    _setup_logging(debug, quiet=True, verbose=False)
    overrides = {
        "agent.model": model,
        "agent.host": host,
        "agent.timeout_seconds": model_timeout,
        "agent.eval_temperature": temperature,
    }
    with errors_handled(debug):
        code = run_eval_model(path, runs, no_sentinel, output_format, config, overrides)
    raise typer.Exit(code)


@app.command()
def init(
    path: Annotated[
        str,
        typer.Argument(
            metavar="PATH",
            help="A CSV or Parquet file, a glob, a directory of Parquet files, or a DuckDB "
            "table as duckdb:FILE.db:TABLE.",
        ),
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the YAML here (default: stdout).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --output.")] = False,
    config: ConfigOption = None,
    debug: DebugOption = False,
) -> None:
    """Suggest a commented YAML config from the data at PATH: roles, interval, ranges, sentinels."""
    from dq_agent.commands import run_init

    _setup_logging(debug, quiet=False, verbose=False)
    with errors_handled(debug):
        code = run_init(path, output, force, config)
    raise typer.Exit(code)


@app.command()
def doctor(
    config: ConfigOption = None,
    model: ModelOption = None,
    host: HostOption = None,
    model_timeout: ModelTimeoutOption = None,
    debug: DebugOption = False,
) -> None:
    """Check that the model can be used: server reachable, model pulled, tool calling."""
    from dq_agent.commands import run_doctor_command

    _setup_logging(debug, quiet=False, verbose=False)
    with errors_handled(debug):
        code = run_doctor_command(
            config,
            {"agent.model": model, "agent.host": host, "agent.timeout_seconds": model_timeout},
        )
    raise typer.Exit(code)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
