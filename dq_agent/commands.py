"""What each CLI command does, as plain functions: the CLI only parses options and calls one.

Every function returns the process exit code; expected failures raise `DQAgentError`.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from dq_agent.api import record_run
from dq_agent.config import Config, resolve
from dq_agent.errors import EXIT_INPUT, UsageError
from dq_agent.evaluate import evaluate_model, evaluations_json, run_table
from dq_agent.history import (
    HistoryError,
    HistoryStore,
    compute_stats,
    history_json,
    history_path,
    history_renderable,
    stats_json,
    stats_renderable,
    tool_table,
    trend_json,
    trend_renderable,
)
from dq_agent.history.trend import Trend, build_trend
from dq_agent.inspection import inspect
from dq_agent.load import resolve_files
from dq_agent.outcome import FAIL_ON_CHOICES, Inspection, exit_code_for
from dq_agent.output import check_outputs, refuse_input_overwrite, write_atomic
from dq_agent.report.html import render_html
from dq_agent.report.json_report import render_json
from dq_agent.report.junit import WARN_AS_CHOICES, render_junit
from dq_agent.report.markdown import render_markdown
from dq_agent.report.terminal import render_plain, render_rich
from dq_agent.report.text import one_line
from dq_agent.suggest import render_suggestion, suggest
from dq_agent.trace import Trace

FORMATS = ("rich", "json", "markdown", "junit", "html")


@dataclass
class InspectOptions:
    path: str
    config_file: Path | None = None
    output_format: str = "rich"
    output: Path | None = None
    fail_on: str = "fail"
    quiet: bool = False
    verbose: bool = False
    trace_file: Path | None = None
    question: str | None = None
    junit_warn_as: str = "pass"
    overrides: dict[str, Any] = field(default_factory=dict)
    flags: Path | None = None
    """Also write a per-reading QARTOD flag file (Parquet) here."""


def _stderr_console(quiet: bool) -> Console:
    # Status lines unwrapped: in a log (stderr not a terminal, 80 columns assumed) a path cut
    # onto a second line cannot be grepped or copied.
    return Console(stderr=True, quiet=quiet, soft_wrap=True)


@contextlib.contextmanager
def _progress(console: Console, enabled: bool) -> Iterator[Any]:
    """A spinner on stderr for work that takes a moment; a no-op when not wanted."""
    if not enabled:
        yield lambda _text: None
        return
    with console.status("Starting…") as status:
        yield lambda text: status.update(Text(one_line(text, 200)))


def render(
    inspection: Inspection,
    output_format: str,
    console: Console | None = None,
    junit_warn_as: str = "pass",
    trend: Trend | None = None,
) -> str | None:
    """The report in `output_format`; for `rich` with a console, printed and None returned."""
    if output_format == "html":
        return render_html(inspection, trend=trend)
    if output_format == "junit":
        return render_junit(inspection, warn_as=junit_warn_as)
    if output_format == "json":
        return render_json(inspection)
    if output_format == "markdown":
        return render_markdown(inspection)
    if console is not None:
        render_rich(inspection, console, trend)
        return None
    return render_plain(inspection, trend=trend)


def _record(inspection: Inspection, config: Config, exit_code: int, err: Console) -> Trend | None:
    """Compare with the baseline, then record the run; the dataset's trend including it. A
    broken history warns; it never fails the inspection (the data was checked)."""
    try:
        records = record_run(inspection, config, exit_code)
    except HistoryError as exc:
        err.print(
            f"dq-agent: warning: run not recorded: {exc.message}", markup=False, highlight=False
        )
        return None
    return build_trend(records, inspection.dataset.path) if len(records) > 1 else None


def run_history(
    path: str | None,
    last: int,
    stats: bool,
    output_format: str,
    config_file: Path | None = None,
    trend: bool = False,
) -> int:
    if output_format not in ("rich", "json"):
        raise UsageError(f"--format must be rich or json, not {output_format!r}")
    if trend and (path is None or stats):
        raise UsageError("--trend needs a dataset PATH (or name) and cannot go with --stats")
    config = resolve(config_file)
    database = history_path(config.history)
    if not database.exists():
        raise UsageError(f"no run history yet at {database}: run `dq-agent inspect PATH` first")
    with HistoryStore.open(database) as store:
        records = store.recent_runs(limit=None if stats else last, dataset=path)
    if path is not None and not records:
        raise UsageError(f"no recorded runs of {path}; `dq-agent history` lists every dataset")
    if trend and path is not None:
        series = build_trend(records, path)
        if output_format == "json":
            sys.stdout.write(trend_json(series) + "\n")
        else:
            Console().print(trend_renderable(series))
        return 0
    if output_format == "json":
        sys.stdout.write(
            (stats_json(compute_stats(records)) if stats else history_json(records)) + "\n"
        )
    else:
        Console().print(
            stats_renderable(compute_stats(records)) if stats else history_renderable(records)
        )
    return 0


def run_eval_model(
    path: str,
    runs: int,
    without_sentinel: bool,
    output_format: str,
    config_file: Path | None,
    overrides: dict[str, Any],
) -> int:
    if output_format not in ("rich", "json"):
        raise UsageError(f"--format must be rich or json, not {output_format!r}")
    config = resolve(config_file, overrides)
    err = _stderr_console(quiet=output_format == "json")
    evaluations = evaluate_model(
        path,
        config,
        runs,
        without_sentinel=without_sentinel,
        on_run=lambda variant, index: err.print(
            f"run {index}/{runs} {variant}", markup=False, highlight=False
        ),
    )
    if output_format == "json":
        sys.stdout.write(evaluations_json(evaluations))
        return 0
    console = Console()
    for evaluation in evaluations:
        console.print(run_table(evaluation, config.agent.model))
        console.print(
            tool_table(
                compute_stats(evaluation.records).tools,
                title=f"{config.agent.model}, {evaluation.label}: {len(evaluation.records)} runs",
            )
        )
    return 0


def run_init(path: str, output: Path | None, force: bool, config_file: Path | None = None) -> int:
    """Suggest a config from the data at `path`: to `output`, else to stdout."""
    config = resolve(config_file)
    if output is not None:
        files, _ = resolve_files(path)
        refuse_input_overwrite(output, files)
        if output.exists() and not force:
            raise UsageError(f"{output} exists: give --force to replace it")
        if not output.resolve().parent.is_dir():
            raise UsageError(f"cannot write {output}: its folder does not exist")
    text = render_suggestion(suggest(path, config), config)
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomic(output, text)
        _stderr_console(quiet=False).print(
            f"dq-agent: suggested config written to {output}; check it, then "
            f"`dq-agent inspect {path} --config {output}`",
            markup=False,
            highlight=False,
        )
    return 0


def run_doctor_command(config_file: Path | None, overrides: dict[str, Any]) -> int:
    # Here, not at the top: the Ollama client it loads is no part of a run without the model.
    from dq_agent.agent.doctor import render_doctor, run_doctor

    report = run_doctor(resolve(config_file, overrides))
    render_doctor(report, Console())
    return report.exit_code


def run_inspect(options: InspectOptions, stdout: Console | None = None) -> int:
    if options.output_format not in FORMATS:
        raise UsageError(
            f"--format must be one of {', '.join(FORMATS)}, not {options.output_format!r}"
        )
    if options.junit_warn_as not in WARN_AS_CHOICES:
        raise UsageError(
            f"--junit-warn-as must be one of {', '.join(WARN_AS_CHOICES)}, "
            f"not {options.junit_warn_as!r}"
        )
    if options.fail_on not in FAIL_ON_CHOICES:
        raise UsageError(
            f"--fail-on must be one of {', '.join(FAIL_ON_CHOICES)}, not {options.fail_on!r}"
        )
    config: Config = resolve(options.config_file, options.overrides)
    err = _stderr_console(options.quiet)
    out = stdout or Console()
    # Checked before the (possibly long) run: the input is never written to, and a bad output
    # path fails fast.
    outputs = {"--output": options.output, "--flags": options.flags, "--trace": options.trace_file}
    if any(path is not None for path in outputs.values()):
        check_outputs(outputs, resolve_files(options.path)[0])

    # A spinner only where a person watches: a TTY on stderr, not quiet, not verbose (the trace
    # prints there), and not when the report itself streams to a piped stdout.
    report_streams = options.output is None and options.output_format != "rich"
    show_progress = (
        err.is_terminal and not options.quiet and not options.verbose and not report_streams
    )
    trace = Trace(console=err if options.verbose else None, jsonl_path=options.trace_file)
    with trace, _progress(err, show_progress) as on_stage:
        inspection = inspect(
            options.path, config, question=options.question, trace=trace, on_stage=on_stage
        )

    code = exit_code_for(inspection, options.fail_on)
    if options.flags is not None:
        from dq_agent.flags import write_flags

        flagged = write_flags(options.path, config, options.flags)
        if not options.quiet:
            err.print(
                f"dq-agent: {flagged:,} flagged readings; flags written to {options.flags}",
                markup=False,
                highlight=False,
            )
    trend = _record(inspection, config, code, err) if config.history.enabled else None
    if options.output is not None:
        text = render(
            inspection, options.output_format, junit_warn_as=options.junit_warn_as, trend=trend
        )
        write_atomic(options.output, text or "")
        if not options.quiet:
            err.print(
                f"dq-agent: verdict {str(inspection.verdict).upper()}; "
                f"{options.output_format} report written to {options.output}",
                markup=False,
                highlight=False,
            )
    elif options.output_format == "rich":
        if not options.quiet:
            render(inspection, "rich", out, trend=trend)
    else:
        sys.stdout.write(
            render(
                inspection,
                options.output_format,
                junit_warn_as=options.junit_warn_as,
                trend=trend,
            )
            or ""
        )
        sys.stdout.flush()
    if code == EXIT_INPUT:
        # The report says which checks; the exit code's reason gets its line like any error.
        what = (
            "nothing was checked: every check errored or was not evaluated"
            if inspection.nothing_checked()
            else f"part of the data was not checked: {', '.join(inspection.unchecked())} failed"
        )
        _stderr_console(quiet=False).print(
            f"dq-agent: exit 3: {what} (see the report)", markup=False, highlight=False
        )
    return code
