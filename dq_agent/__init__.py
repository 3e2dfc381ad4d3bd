"""dq-agent: a data-quality inspector for industrial sensor data.

`dq_agent.inspect(frame)` is the library entry point (`dq_agent.api`). It is imported on first
use (PEP 562), so `import dq_agent` and `dq-agent --help` load neither Polars nor the checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["__version__", "inspect"]

if TYPE_CHECKING:
    from dq_agent.api import inspect


def __getattr__(name: str) -> Any:
    if name == "inspect":
        from dq_agent.api import inspect

        return inspect
    raise AttributeError(f"module 'dq_agent' has no attribute {name!r}")
