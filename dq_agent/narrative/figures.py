"""Reading figures out of text: plain numbers, percentages, durations and moments in time.

The same reader serves both sides: it collects the figures of the results (their summaries and
finding texts) and the figures a narrative claims, so "10.0 min" means the same on both.

What counts as a figure, and what does not (the rule the narrative guard holds to):
- A number is a data claim unless it belongs to the text's structure or to the method: list
  numbering at a line start (dropped by the sentence splitter), the multiplier of "3-sigma" /
  "3σ" / "3 standard deviations" (a method parameter), and counts of tools, checks or
  dimensions ("5 tools", "3 of 5 checks": the completeness guard audits those, not this one).
- A number glued to letters is part of a name (`column1`, `p95`, `UTF-8`, `3rd`), not a figure.
- A date or time (ISO `2024-01-05 10:00`, a time of day `10:10`, `Jan 5, 2024`) is one figure, a
  moment, checked against the timestamps in the results, so its year, month and day are never
  read as separate numbers. A bare year counts when some result timestamp lies in that year.
- Durations: ms, s, min, h, d, w in their spellings ("601 s", "10-minute", "2.5 hours"), "m" for
  minutes only glued to the number ("2h 1m"); consecutive units from larger to smaller are one
  duration ("10 min 1 s", "1 hour and 5 minutes").
- Every written number carries its rounding tolerance, half a unit of its last written digit:
  "5.0%" stands for [4.95, 5.05], "10 min" for 570..630 s, "10 min 1 s" for 600.5..601.5 s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from dq_agent.narrative.text import mask


class FigureKind(StrEnum):
    PLAIN = "plain"
    PERCENT = "percent"
    DURATION = "duration"
    MOMENT = "moment"


@dataclass(frozen=True)
class Figure:
    """One figure as written. `value`: the number, the percentage, or seconds for a duration.

    `number` is the number as written ("10.0" of "10.0 min"); `tolerance` is in `value`'s unit;
    a moment has `moment`, a regular expression over normalised timestamps
    ("YYYY-MM-DD HH:MM:SS.ffffff").
    """

    text: str
    kind: FigureKind
    value: float
    number: float
    tolerance: float
    start: int
    end: int
    moment: str | None = None
    unit_seconds: float = 0.0


_UNIT_SECONDS: list[tuple[str, float]] = [
    (r"milliseconds?|msecs?|ms", 0.001),
    (r"seconds?|secs?|s", 1.0),
    (r"minutes?|mins?", 60.0),
    (r"hours?|hrs?|h", 3600.0),
    (r"days?|d", 86400.0),
    (r"weeks?|wks?|w", 604800.0),
]
_UNIT = "|".join(f"(?:{pattern})" for pattern, _ in _UNIT_SECONDS)
_NUMBER = re.compile(
    r"(?<![\w.\-/:])(?P<num>-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)"
    rf"(?:(?P<pct>\s?(?:%|percent\b|per\s?cent\b|pct\b))|(?:\s|-)?(?P<unit>{_UNIT})(?!\w)"
    # "m" is minutes only glued to its number, as in "2h 1m": "5 m" may well be metres.
    r"|(?P<unit_m>m)(?!\w))?",
    re.IGNORECASE,
)
_GLUED = re.compile(r"[A-Za-z_]|\d")
_DURATION_JOINER = re.compile(r"\s*(?:and\s)?\s*", re.IGNORECASE)

_MONTHS = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "may": 5,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTH = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_ISO_MOMENT = re.compile(
    r"(?<!\d)(?P<date>\d{4}[-/]\d{2}[-/]\d{2})"
    r"(?:[T ](?P<time>\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?))?"
    r"(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)?(?!\d)",
    re.IGNORECASE,
)
_TIME_OF_DAY = re.compile(
    r"(?<![\d:])(?P<time>\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)(?![\d:])(?:\s?UTC)?"
)
_MONTH_DAY = re.compile(
    rf"\b{_MONTH}\.?\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(?P<year>\d{{4}})\b)?",
    re.IGNORECASE,
)
_DAY_MONTH = re.compile(
    rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH}\b\.?(?:,?\s+(?P<year>\d{{4}})\b)?",
    re.IGNORECASE,
)
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?\s+(?P<year>\d{{4}})\b", re.IGNORECASE)
# Method parameters and tool counts: numbers that are not claims about the data.
_NOT_DATA = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?\s*[-‐–]?\s*(?:sigma\b|σ|standard deviations?\b|std\b)"
    r"|(?<![\w.])\d+\s+(?:of\s+(?:the\s+)?\d+\s+)?(?:detection\s+)?"
    r"(?:tools?|checks?|dimensions?)\b",
    re.IGNORECASE,
)


def find_figures(text: str) -> list[Figure]:
    """Every figure in `text`, in order of appearance."""
    moments = _find_moments(text)
    without_moments = mask(text, [(f.start, f.end) for f in moments])
    masked = mask(without_moments, [m.span() for m in _NOT_DATA.finditer(without_moments)])
    numbers = _join_durations(text, _find_numbers(masked, text))
    return sorted([*moments, *numbers], key=lambda f: f.start)


def _find_numbers(masked: str, original: str) -> list[Figure]:
    figures: list[Figure] = []
    for match in _NUMBER.finditer(masked):
        if match.end() < len(masked) and _GLUED.match(masked[match.end()]):
            continue  # "3rd", "5x", "2D": part of a word, not a figure
        written = match.group("num")
        number = float(written.replace(",", ""))
        decimals = len(written.split(".")[1]) if "." in written else 0
        half_digit = 0.5 * 10.0**-decimals
        text = original[match.start() : match.end()]
        if match.group("pct"):
            figures.append(
                Figure(
                    text, FigureKind.PERCENT, number, number, half_digit, match.start(), match.end()
                )
            )
        elif match.group("unit") or match.group("unit_m"):
            seconds = _unit_seconds(match.group("unit") or "min")
            figures.append(
                Figure(
                    text,
                    FigureKind.DURATION,
                    number * seconds,
                    number,
                    half_digit * seconds,
                    match.start(),
                    match.end(),
                    unit_seconds=seconds,
                )
            )
        else:
            figures.append(
                Figure(
                    text, FigureKind.PLAIN, number, number, half_digit, match.start(), match.end()
                )
            )
    return figures


def _unit_seconds(unit: str) -> float:
    for pattern, seconds in _UNIT_SECONDS:
        if re.fullmatch(pattern, unit, re.IGNORECASE):
            return seconds
    raise ValueError(f"unknown duration unit {unit!r}")


def _join_durations(text: str, figures: list[Figure]) -> list[Figure]:
    """Merge "10 min 1 s" and "1 hour and 5 minutes" into one duration (larger unit first)."""
    joined: list[Figure] = []
    for figure in figures:
        previous = joined[-1] if joined else None
        if (
            previous is not None
            and previous.kind is FigureKind.DURATION
            and figure.kind is FigureKind.DURATION
            and figure.number >= 0
            and figure.unit_seconds < previous.unit_seconds
            and _DURATION_JOINER.fullmatch(text[previous.end : figure.start])
        ):
            joined[-1] = Figure(
                text[previous.start : figure.end],
                FigureKind.DURATION,
                previous.value + figure.value,
                previous.number,
                figure.tolerance,
                previous.start,
                figure.end,
                unit_seconds=figure.unit_seconds,
            )
        else:
            joined.append(figure)
    return joined


def _find_moments(text: str) -> list[Figure]:
    """Dates and times, as patterns over normalised timestamps "YYYY-MM-DD HH:MM:SS.ffffff"."""
    found: list[Figure] = []
    taken: list[tuple[int, int]] = []

    def add(match: re.Match[str], pattern: str) -> None:
        if any(match.start() < end and start < match.end() for start, end in taken):
            return
        taken.append((match.start(), match.end()))
        found.append(
            Figure(
                match.group(),
                FigureKind.MOMENT,
                0.0,
                0.0,
                0.0,
                match.start(),
                match.end(),
                moment=pattern,
            )
        )

    for match in _ISO_MOMENT.finditer(text):
        date = match.group("date").replace("/", "-")
        time = match.group("time")
        add(match, "^" + re.escape(f"{date} {time}" if time else date))
    for regex in (_MONTH_DAY, _DAY_MONTH):
        for match in regex.finditer(text):
            month = _MONTHS[match.group("mon")[:3].lower()]
            year = match.group("year") or r"\d{4}"
            add(match, f"^{year}-{month:02d}-{int(match.group('day')):02d}")
    for match in _MONTH_YEAR.finditer(text):
        add(match, f"^{match.group('year')}-{_MONTHS[match.group('mon')[:3].lower()]:02d}-")
    for match in _TIME_OF_DAY.finditer(text):
        hours, rest = match.group("time").split(":", 1)
        add(match, r"^.{11}" + re.escape(f"{int(hours):02d}:{rest}"))
    return found


def timestamps_in(text: str) -> list[str]:
    """The ISO timestamps and dates in `text`, as "YYYY-MM-DD HH:MM:SS.ffffff" prefixes."""
    found: list[str] = []
    for match in _ISO_MOMENT.finditer(text):
        date = match.group("date").replace("/", "-")
        time = match.group("time")
        found.append(f"{date} {time}" if time else date)
    return found
