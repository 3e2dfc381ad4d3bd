"""The narrative guard end to end: the issue's example, a faithful narrative, the repair round."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from dq_agent.config import Config
from dq_agent.errors import AgentUnavailableError, ModelCallError, ModelUnavailableError
from dq_agent.load import Dataset, load
from dq_agent.narrative.guard import check_narrative, repair_prompt, review_narrative
from dq_agent.result import CheckResult, Finding, Status, Verdict

EXAMPLE = (
    "Null Check: 998 missing values found in column1. Duplicate Check: 199 duplicate rows "
    "identified based on the device_id key. Outlier Check: 690 temperature outliers detected "
    "across all devices. Delay Check: 3 gaps and 99 late rows observed. Based on these findings, "
    "the data quality of sensors.parquet is **VERIFIED**."
)
# Rates as percentages (results hold fractions), durations in minutes (results hold seconds).
FAITHFUL = """\
1. Null check: 998 of 20,000 pressure values are missing (5.0%).
2. Duplicate check: 199 duplicate rows (1.0%), keyed on device_id and timestamp.
3. Outlier check: 690 outliers in the temperature column (3.45%), 3-sigma rule.
4. Delay check: 3 gaps totalling about 30 minutes; the longest, 10 min 1 s on sensor_2, ran \
from 2024-01-01 10:00 to 10:10 UTC. 99 rows arrived late (p95 latency 6.9 min).
5. Structure check: pass; all 4 columns present, no encoding problems.
Overall verdict: FAIL, because of the missing pressure values across all 5 tools' findings."""
HALLUCINATION = (
    "Null check: 12 missing values in column humidity. Duplicates, outliers, gaps and the "
    "schema were all reviewed. The data is clean."
)


class FakeModel:
    """Stands in for the agent's `ask_model`: records prompts, answers or raises as told."""

    def __init__(self, answer: str = "", error: BaseException | None = None) -> None:
        self.answer = answer
        self.error = error
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if self.error is not None:
            raise self.error
        return self.answer


def _write_sensors(directory: Path) -> Path:
    path = directory / "sensors.csv"
    path.write_text(
        "timestamp,device_id,temperature,pressure\n"
        "2024-01-01T10:00:00,sensor_1,20.5,1.01\n"
        "2024-01-01T10:01:00,sensor_1,20.7,\n"
        "2024-01-01T10:00:00,sensor_2,21.0,1.02\n"
        "2024-01-01T10:10:01,sensor_2,21.2,1.03\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def csv_dataset(tmp_path: Path) -> Dataset:
    return load(str(_write_sensors(tmp_path)), Config())


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    """The issue's file was sensors.parquet: the same tiny CSV, written as Parquet."""
    parquet = tmp_path / "sensors.parquet"
    pl.read_csv(_write_sensors(tmp_path)).write_parquet(parquet)
    return load(str(parquet), Config())


@pytest.fixture
def checks() -> dict[str, CheckResult]:
    """The issue's results: 998 missing pressure values, 199 duplicate rows, 690 temperature
    outliers, 3 gaps and 99 late rows, structure pass."""
    gap = Finding(
        "gap",
        1,
        Status.WARN,
        entity="sensor_2",
        start="2024-01-01T10:00:00+00:00",
        end="2024-01-01T10:10:01+00:00",
    )
    return {
        "null_check": CheckResult(
            "null_check",
            Status.FAIL,
            "998 missing values (4.99%), all in pressure",
            {"rows": 20000, "missing": {"pressure": 998}, "missing_rate": {"pressure": 0.0499}},
            [Finding("missing values", 998, Status.FAIL, column="pressure")],
        ),
        "duplicate_check": CheckResult(
            "duplicate_check",
            Status.FAIL,
            "199 exact duplicate rows",
            {"duplicate_rows": 199, "duplicate_rate": 0.00995},
        ),
        "outlier_check": CheckResult(
            "outlier_check",
            Status.FAIL,
            "690 outliers in temperature",
            {"outliers": {"temperature": 690}, "outlier_rate": {"temperature": 0.0345}},
        ),
        "delay_check": CheckResult(
            "delay_check",
            Status.FAIL,
            "3 gaps, 99 late rows",
            {"gaps": 3, "gap_seconds_total": 1803.0, "late_rows": 99, "latency_p95_seconds": 412.5},
            [gap],
        ),
        "structure_check": CheckResult(
            "structure_check", Status.PASS, "4 columns as expected, no encoding problems"
        ),
    }


def test_the_issue_example_yields_column1_structure_and_a_verdict_conflict(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    review = check_narrative(EXAMPLE, checks, dataset, Verdict.FAIL)

    found = review.to_dict()
    assert [(c["name"], c["sentence"]) for c in found["unsupported_names"]] == [
        ("column1", "Null Check: 998 missing values found in column1.")
    ]
    assert found["unsupported_figures"] == []
    assert [a["tool"] for a in found["added_summaries"]] == ["structure_check"]
    assert found["covered_dimensions"] == [
        "null_check",
        "duplicate_check",
        "outlier_check",
        "delay_check",
    ]
    assert [
        (c["word"], c["declared"], c["scope"], c["computed"]) for c in found["verdict_conflicts"]
    ] == [("VERIFIED", "pass", "overall", "fail")]
    assert review.needs_repair


def test_the_example_is_marked_in_the_text_without_losing_a_word(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    text = check_narrative(EXAMPLE, checks, dataset, Verdict.FAIL).annotated_text()

    assert text == (
        "Null Check: 998 missing values found in column1. [UNSUPPORTED NAME: column1] "
        "Duplicate Check: 199 duplicate rows identified based on the device_id key. "
        "Outlier Check: 690 temperature outliers detected across all devices. "
        "Delay Check: 3 gaps and 99 late rows observed. Based on these findings, the data "
        "quality of sensors.parquet is **VERIFIED**. [VERDICT CONFLICT: computed verdict is FAIL]"
        "\n\n[ADDED BY GUARD] structure_check (pass): 4 columns as expected, no encoding problems"
        "\n\nVerdict (computed by code): FAIL"
    )


def test_a_file_name_must_be_the_file_inspected(
    csv_dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    wrong = check_narrative(EXAMPLE, checks, csv_dataset, Verdict.FAIL)
    right = check_narrative(
        EXAMPLE.replace("sensors.parquet", "sensors.csv"), checks, csv_dataset, Verdict.FAIL
    )

    assert [(c.text, c.kind) for c in wrong.unsupported_names] == [
        ("column1", "name"),
        ("sensors.parquet", "file"),
    ]
    assert [c.text for c in right.unsupported_names] == ["column1"]


def test_a_faithful_narrative_yields_nothing(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    review = check_narrative(FAITHFUL, checks, dataset, Verdict.FAIL)

    assert review.to_dict() == {
        "covered_dimensions": list(checks),
        "added_summaries": [],
        "unsupported_names": [],
        "unsupported_figures": [],
        "verdict_conflicts": [],
        "needs_repair": False,
    }


def test_each_wrong_figure_is_caught(dataset: Dataset, checks: dict[str, CheckResult]) -> None:
    wrong = (
        FAITHFUL.replace("998 of", "997 of")
        .replace("(5.0%)", "(5.2%)")
        .replace("about 30 minutes", "about 40 minutes")
        .replace("6.9 min", "9.6 min")
    )
    review = check_narrative(wrong, checks, dataset, Verdict.FAIL)

    assert [c.text for c in review.unsupported_figures] == ["997", "5.2%", "40 minutes", "9.6 min"]
    assert not review.unsupported_names and not review.verdict_conflicts


def test_a_figure_must_come_from_the_check_the_sentence_speaks_of(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    narrative = (
        "Delay check: 690 gaps. Outlier check: 690 outliers in 20,000 rows. In total 690 problems."
    )
    review = check_narrative(narrative, checks, dataset, Verdict.FAIL)

    assert [(c.text, c.sentence.text) for c in review.unsupported_figures] == [
        ("690", "Delay check: 690 gaps.")
    ]


def test_a_dimension_status_contradicted_is_a_conflict_a_true_one_is_not(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    narrative = "Duplicate check passed. Structure check: pass. Null check failed."
    review = check_narrative(narrative, checks, dataset, Verdict.FAIL)

    assert [(c.word, c.scope, c.computed) for c in review.verdict_conflicts] == [
        ("passed", "duplicate_check", "fail")
    ]


def test_a_fail_word_against_a_pass_verdict_is_a_conflict(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    passing = {
        tool: CheckResult(tool, Status.PASS, f"{tool.removesuffix('_check')}: nothing found")
        for tool in checks
    }
    review = check_narrative(
        "Nulls, duplicates, outliers, gaps and schema were checked. The data quality is poor.",
        passing,
        dataset,
        Verdict.PASS,
    )

    assert [(c.word, c.declared, c.scope) for c in review.verdict_conflicts] == [
        ("poor", Verdict.FAIL, "overall")
    ]
    assert review.annotated_text().endswith(
        "is poor. [VERDICT CONFLICT: computed verdict is PASS]\n\nVerdict (computed by code): PASS"
    )


def test_nothing_wrong_means_no_model_call(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    model = FakeModel(answer="should never be asked")

    text, report = review_narrative(FAITHFUL, checks, dataset, Verdict.FAIL, model)

    assert model.prompts == []
    assert text == FAITHFUL + "\n\nVerdict (computed by code): FAIL"
    assert report["repair_attempted"] is False
    assert report["repair_outcome"] == "not_needed"
    assert report["needed_repair"] is False and report["kept_unsupported"] is False
    assert report["before_repair"] is None


def test_the_repair_round_fixes_a_hallucination(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    model = FakeModel(answer=FAITHFUL)

    text, report = review_narrative(EXAMPLE, checks, dataset, Verdict.FAIL, model)

    assert len(model.prompts) == 1
    assert text == FAITHFUL + "\n\nVerdict (computed by code): FAIL"
    assert report["repair_attempted"] is True
    assert report["repair_outcome"] == "fixed"
    assert report["needed_repair"] is True and report["kept_unsupported"] is False
    assert report["unsupported_names"] == [] and report["verdict_conflicts"] == []
    assert [c["name"] for c in report["before_repair"]["unsupported_names"]] == ["column1"]


def test_the_repair_prompt_lists_the_problems_and_the_facts(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    prompt = repair_prompt(check_narrative(EXAMPLE, checks, dataset, Verdict.FAIL), checks, dataset)

    assert '"column1" is not a column' in prompt
    assert '"VERIFIED" contradicts the computed verdict (FAIL)' in prompt
    assert "structure_check (pass) is not mentioned" in prompt
    # Data (names, summaries) is JSON-quoted: never a bare instruction-looking line.
    assert 'Columns: ["timestamp", "device_id", "temperature", "pressure"]' in prompt
    assert '- null_check: FAIL. "998 missing values (4.99%), all in pressure' in prompt
    assert "Overall verdict: FAIL" in prompt
    assert EXAMPLE in prompt


def test_a_second_hallucination_stays_marked(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    model = FakeModel(answer=HALLUCINATION)

    text, report = review_narrative(EXAMPLE, checks, dataset, Verdict.FAIL, model)

    assert len(model.prompts) == 1
    assert report["repair_outcome"] == "still_unsupported"
    assert report["kept_unsupported"] is True
    assert [c["name"] for c in report["unsupported_names"]] == ["humidity"]
    assert [c["figure"] for c in report["unsupported_figures"]] == ["12"]
    assert text.startswith(
        "Null check: 12 missing values in column humidity. "
        "[UNSUPPORTED NAME: humidity] [UNSUPPORTED FIGURE: 12] "
    )
    assert "The data is clean. [VERDICT CONFLICT: computed verdict is FAIL]" in text


def test_a_rewrite_that_drops_a_dimension_is_completed_by_the_guard(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    without_structure = "\n".join(line for line in FAITHFUL.splitlines() if "Structure" not in line)
    model = FakeModel(answer=without_structure)

    text, report = review_narrative(EXAMPLE, checks, dataset, Verdict.FAIL, model)

    assert report["repair_outcome"] == "still_incomplete"
    assert report["kept_unsupported"] is False
    assert "[ADDED BY GUARD] structure_check (pass): 4 columns as expected" in text


@pytest.mark.parametrize(
    "error",
    [
        # What the agent's asker raises (issue 9: no catch-all RuntimeError in the guard).
        ModelCallError("unreachable", "refused"),
        ModelCallError("timeout", "timed out"),
        ModelUnavailableError("server_error", "bad reply"),
        AgentUnavailableError("model gone"),
    ],
)
def test_a_failing_model_leaves_the_deterministic_review(
    dataset: Dataset, checks: dict[str, CheckResult], error: BaseException
) -> None:
    model = FakeModel(error=error)

    text, report = review_narrative(EXAMPLE, checks, dataset, Verdict.FAIL, model)

    assert len(model.prompts) == 1
    assert text == check_narrative(EXAMPLE, checks, dataset, Verdict.FAIL).annotated_text()
    assert report["repair_attempted"] is True
    assert report["repair_outcome"] == "model_failed"
    assert [c["name"] for c in report["unsupported_names"]] == ["column1"]


def test_an_empty_answer_counts_as_a_failed_repair(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    _, report = review_narrative(EXAMPLE, checks, dataset, Verdict.FAIL, FakeModel(answer="  \n"))

    assert report["repair_outcome"] == "model_failed"
    assert [c["name"] for c in report["unsupported_names"]] == ["column1"]


def test_a_bug_in_the_model_call_is_not_swallowed(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    with pytest.raises(KeyError):
        review_narrative(EXAMPLE, checks, dataset, Verdict.FAIL, FakeModel(error=KeyError("x")))


def test_without_a_model_the_deterministic_review_stands(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    text, report = review_narrative(EXAMPLE, checks, dataset, Verdict.FAIL, None)

    assert text == check_narrative(EXAMPLE, checks, dataset, Verdict.FAIL).annotated_text()
    assert report["repair_attempted"] is False
    assert report["repair_outcome"] == "no_model"
    assert report["needed_repair"] is True and report["kept_unsupported"] is True


def test_an_empty_narrative_becomes_the_summaries(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    text, report = review_narrative("", checks, dataset, Verdict.FAIL, None)

    assert [a["tool"] for a in report["added_summaries"]] == list(checks)
    assert text.splitlines()[0] == (
        "[ADDED BY GUARD] null_check (fail): 998 missing values (4.99%), all in pressure"
    )
    assert text.endswith("\n\nVerdict (computed by code): FAIL")


def test_the_report_is_json(dataset: Dataset, checks: dict[str, CheckResult]) -> None:
    _, report = review_narrative(EXAMPLE, checks, dataset, Verdict.FAIL, FakeModel(answer=FAITHFUL))

    assert json.loads(json.dumps(report)) == report
    assert set(report) == {
        "covered_dimensions",
        "added_summaries",
        "unsupported_names",
        "unsupported_figures",
        "verdict_conflicts",
        "repair_attempted",
        "repair_outcome",
        "needed_repair",
        "kept_unsupported",
        "removed_markup",
        "echoed_tool_output",
        "rejection_reasons",
        "before_repair",
    }
    assert report["rejection_reasons"] == []


def test_fine_is_a_verdict_word(dataset: Dataset, checks: dict[str, CheckResult]) -> None:
    review = check_narrative("Duplicates look fine.", checks, dataset, Verdict.FAIL)
    assert [(c.word, c.scope) for c in review.verdict_conflicts] == [("fine", "duplicate_check")]


# What a 1.5B model answered on the sample: the observations echoed back as XML.
ECHO = (
    '<tool_result name="null_check"> {"status": "fail", "summary": "998 missing values"} '
    "</tool_result>\n"
    '<tool_result name="delay_check"> {"status": "warn", "findings": [{"what": "gap"}]} '
    "</tool_result>"
)


def test_echoed_tool_output_is_removed_and_rejected_when_the_repair_echoes_again(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    model = FakeModel(answer=ECHO)
    text, report = review_narrative(ECHO, checks, dataset, Verdict.FAIL, model)
    assert "<tool_result" not in text and '"status"' not in text
    assert "pasted raw tool output" in model.prompts[0]
    assert report["echoed_tool_output"] is True
    assert report["repair_outcome"] == "still_unsupported"
    assert report["rejection_reasons"] == ["echoed tool output", "covers 0 of 5 dimensions"]


def test_an_echo_repaired_into_faithful_prose_is_accepted(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    wrapped = f"{FAITHFUL}\n<tools>\n" + '{"name": "null_check", "arguments": {}}\n</tools>'
    _, clean = review_narrative(wrapped, checks, dataset, Verdict.FAIL, None)
    # Tool calls in the prose are markup, not an echo: removed without a repair.
    assert (clean["removed_markup"], clean["echoed_tool_output"]) == (True, False)
    assert clean["repair_outcome"] == "not_needed"
    _, report = review_narrative(
        FAITHFUL + "\n" + ECHO, checks, dataset, Verdict.FAIL, FakeModel(answer=FAITHFUL)
    )
    assert report["needed_repair"] is True
    assert report["repair_outcome"] == "fixed"
    assert report["rejection_reasons"] == []


def test_the_code_written_account_passes_the_guard(
    dataset: Dataset, checks: dict[str, CheckResult]
) -> None:
    from dq_agent.narrative.account import written_account

    account = written_account(checks, Verdict.FAIL)
    assert account.splitlines()[-1] == "Verdict (computed by code): FAIL"
    assert [line.split(":")[0] for line in account.splitlines()[:-1]] == list(checks)
    review = check_narrative(account, checks, dataset, Verdict.FAIL)
    assert not review.needs_repair, review.problems()
