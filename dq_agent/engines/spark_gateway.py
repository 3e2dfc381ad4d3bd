"""The local Spark session's JVM, started with its stderr passed on through a filter.

At every start the JVM prints two notices outside log4j (so `spark_log4j2.properties` cannot
silence them): Java's on the incubator module Spark 4 adds (`--add-modules
jdk.incubator.vector`) and Spark's on the shell's default log level. A cron run under `-q`
must print nothing, so those lines are dropped; every other line of the JVM's stderr (its
errors, a missing Java) is written on as it comes.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, BinaryIO

_NOTICES = (
    b"WARNING: Using incubator modules",
    b"Setting default log level to",
    b"To adjust logging level use sc.setLogLevel",
)


def launch(conf: Any) -> Any:
    """The Py4J gateway of a new JVM started with `conf` (pyspark's `launch_gateway`), its
    stderr read by a daemon thread (`_pass_on`) from before the JVM starts: a pipe nobody
    reads would block the JVM once full."""
    from pyspark.java_gateway import launch_gateway

    read, write = os.pipe()
    threading.Thread(
        target=_pass_on, args=(os.fdopen(read, "rb"),), name="spark-stderr", daemon=True
    ).start()
    try:
        return launch_gateway(conf, popen_kwargs={"stderr": write})  # type: ignore[no-untyped-call]
    finally:
        # The JVM holds its own copy; closing ours lets the reader end when the JVM does.
        os.close(write)


def _pass_on(stream: BinaryIO) -> None:
    with stream:
        for line in stream:
            if line.startswith(_NOTICES):
                continue
            try:
                # Text, not bytes: a test's captured stderr has no buffer to write bytes to.
                sys.stderr.write(line.decode("utf-8", "replace"))
                sys.stderr.flush()
            except (ValueError, OSError):
                # stderr closed at exit: the JVM's last words have nowhere to go.
                return
