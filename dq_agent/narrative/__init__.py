"""Internals of the narrative guard: sentences, facts, figures, names, dimensions and verdicts.

The public entry is `dq_agent.narrative.guard` (`check_narrative`, `review_narrative`).
"""
