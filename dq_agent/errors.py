"""The one error family of dq-agent: each error carries its exit code and an actionable message.

The CLI catches `DQAgentError` once, prints its message on one line and exits with its code.
Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

# The exit-code contract (README "Exit codes"): cron jobs rely on these numbers.
EXIT_OK = 0
EXIT_VERDICT = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_AGENT = 4
EXIT_INTERRUPTED = 130


class DQAgentError(Exception):
    """An expected failure with a message a person can act on."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(DQAgentError):
    """Bad command-line invocation."""

    exit_code = EXIT_USAGE


class ConfigError(DQAgentError):
    """Bad configuration: names the key and the file."""

    exit_code = EXIT_USAGE


class InputError(DQAgentError):
    """The input cannot be read, is empty, or nothing could be checked."""

    exit_code = EXIT_INPUT


class HistoryError(DQAgentError):
    """The history database cannot be opened, read or written."""

    exit_code = EXIT_INPUT


class ToolRegistrationError(InputError):
    """A detection tool could not be registered: loud, because a missing registration would look
    exactly like a model that skipped the tool."""


class ToolArgumentError(DQAgentError, ValueError):
    """Arguments a tool cannot take; the message names the valid choices (it is shown to a model)."""


class ModelCallError(DQAgentError):
    """A model call failed for a reason outside the model's control (server, network, setup).

    `kind` names the failure for the trace and the audit (`unreachable`, `timeout`, ...).
    """

    exit_code = EXIT_AGENT

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ModelUnavailableError(ModelCallError):
    """The model cannot be used for this run at all (pre-flight or first call failed)."""

    @classmethod
    def from_call_error(cls, error: ModelCallError) -> ModelUnavailableError:
        return cls(error.kind, error.message)


class AgentUnavailableError(DQAgentError):
    """The model could not be used and the user required it (`--require-agent`)."""

    exit_code = EXIT_AGENT
