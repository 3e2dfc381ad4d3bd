"""Where the run history lives when the config does not say.

Order: `history.path` in the config, then `$DQ_AGENT_HOME/history.sqlite`, then the XDG data
directory (`$XDG_DATA_HOME/dq-agent/history.sqlite`, default `~/.local/share/dq-agent/`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dq_agent.settings import HistoryConfig

HISTORY_FILE_NAME = "history.sqlite"
APP_DIR_NAME = "dq-agent"


def history_path(config: HistoryConfig, environ: Mapping[str, str] | None = None) -> Path:
    """The history database file for this configuration and environment (not created here)."""
    env = os.environ if environ is None else environ
    if config.path:
        return Path(config.path).expanduser()
    home = env.get("DQ_AGENT_HOME", "")
    if home:
        return Path(home).expanduser() / HISTORY_FILE_NAME
    xdg = env.get("XDG_DATA_HOME", "")
    # The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / APP_DIR_NAME / HISTORY_FILE_NAME
    return _user_home(env) / ".local" / "share" / APP_DIR_NAME / HISTORY_FILE_NAME


def _user_home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME", "")
    return Path(home) if home else Path.home()
