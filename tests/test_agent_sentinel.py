"""verify_result answers from facts: which detection tools have run, not what the model says."""

from __future__ import annotations

from dq_agent.agent.sentinel import (
    EXHAUSTED,
    NOT_READY,
    READY,
    SENTINEL_NAME,
    SENTINEL_SCHEMA,
    Sentinel,
)

ALL = ["null_check", "duplicate_check", "outlier_check", "delay_check", "structure_check"]


def test_schema_has_the_five_parameters() -> None:
    function = SENTINEL_SCHEMA["function"]
    assert function["name"] == SENTINEL_NAME == "verify_result"
    assert list(function["parameters"]["properties"]) == [
        "task_goal",
        "actual_result",
        "missing_items",
        "errors_found",
        "is_ready",
    ]


def test_claimed_ready_with_tools_missing_is_not_ready_and_names_them() -> None:
    sentinel = Sentinel(ALL, max_rounds=3)
    verdict = sentinel.review({"is_ready": True}, {"null_check", "delay_check"})
    assert verdict.verdict == NOT_READY
    assert verdict.missing == ["duplicate_check", "outlier_check", "structure_check"]
    assert verdict.observation == (
        "NOT READY. You said you are ready, but you are not. These detection tools have not run "
        "yet: duplicate_check, outlier_check, structure_check. Call each of them now, then call "
        "verify_result again."
    )
    assert (verdict.round, sentinel.rounds) == (1, 1)


def test_model_opinion_does_not_change_the_facts() -> None:
    # "Not ready" from a model that ran everything is still READY: code decides.
    verdict = Sentinel(ALL, 3).review(
        {"is_ready": "false", "missing_items": "more plots"}, set(ALL)
    )
    assert verdict.verdict == READY
    assert verdict.claimed_ready is False
    assert verdict.observation.startswith(
        "READY. All 5 detection tools have run. Give your final answer"
    )
    assert "plots" not in verdict.observation


def test_ready_reminds_the_question_only() -> None:
    verdict = Sentinel(ALL, 3, question="Is device b late?").review({}, set(ALL))
    assert "answer the user's question: Is device b late?" in verdict.observation


def test_rounds_are_capped() -> None:
    sentinel = Sentinel(ALL, max_rounds=2)
    sentinel.review({}, set())
    sentinel.review({}, set())
    assert sentinel.exhausted
    third = sentinel.review({}, {"null_check"})
    assert third.verdict == EXHAUSTED
    assert sentinel.rounds == 2
    assert third.observation == (
        "verify_result was already called 2 times, the limit: do not call it again. Call "
        "duplicate_check, outlier_check, delay_check, structure_check now, then give your final "
        "answer."
    )
    assert sentinel.review({}, set(ALL)).observation.endswith("Give your final answer.")
