"""dq-agent: a data-quality inspector for industrial sensor data.

`dq_agent.inspect(frame)` is the library entry point (`dq_agent.api`). It is imported on first
use (PEP 562), so `import dq_agent` and `dq-agent --help` load neither Polars nor the checks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

# A library logs and leaves the output to the caller's logging setup (the CLI sets its own):
# without this, Python prints warnings such as "model unavailable" to stderr by itself.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"
__all__ = ["__version__", "inspect", "json_report"]

if TYPE_CHECKING:
    from dq_agent.api import inspect, json_report


def __getattr__(name: str) -> Any:
    if name in ("inspect", "json_report"):
        from dq_agent import api

        return getattr(api, name)
    raise AttributeError(f"module 'dq_agent' has no attribute {name!r}")
