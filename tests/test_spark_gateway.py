"""The local JVM's stderr is passed on without its two start-up notices (no JVM here: the
filter reads a pipe)."""

from __future__ import annotations

import os

import pytest

from dq_agent.engines.spark_gateway import _pass_on

JVM_START = (
    b"WARNING: Using incubator modules: jdk.incubator.vector\n"
    b'Setting default log level to "WARN".\n'
    b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).\n"
    b"dq-agent: spark: ERROR Executor: Exception in task 0.0\n"
    b"JAVA_HOME is not set\n"
)


def test_start_up_notices_are_dropped_and_everything_else_passed_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    read, write = os.pipe()
    os.write(write, JVM_START)
    os.close(write)
    _pass_on(os.fdopen(read, "rb"))
    captured = capsys.readouterr()
    assert captured.err == (
        "dq-agent: spark: ERROR Executor: Exception in task 0.0\nJAVA_HOME is not set\n"
    )
    assert captured.out == ""
