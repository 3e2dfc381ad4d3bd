"""dq-agent: a data-quality inspector for industrial sensor data."""

__version__ = "0.1.0"
