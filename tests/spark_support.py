"""The local Spark session the Spark tests share: one JVM per test run (`local_session`).

Without pyspark or Java the Spark tests skip, saying which is missing; under CI (`CI=true`,
where `.ci/run` installs both) they fail instead, so a broken install cannot pass unseen.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Any

import pytest


def missing() -> str | None:
    """What the Spark tests lack on this machine, or None."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'dq-agent[spark]')"
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and os.path.isdir(java_home)):
        return "no Java runtime (java not on PATH, JAVA_HOME unset): apt-get install default-jre-headless (Java 17 or newer)"
    return None


def session_or_skip() -> Any:
    """The shared local SparkSession, or a skip (a failure under CI) naming what is missing."""
    reason = missing()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the Spark tests cannot run: {reason}; CI must install it")
        pytest.skip(reason)
    from dq_agent.engines.spark import local_session

    return local_session()
