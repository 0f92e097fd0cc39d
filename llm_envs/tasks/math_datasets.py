"""Math benchmarks from the Hugging Face Hub (or local copies in the same schema).

=================  ===============================  ==========  ===============================
name               hub id (config)                  splits      fields used
=================  ===============================  ==========  ===============================
``gsm8k``          ``openai/gsm8k`` (``main``)      train/test  ``question``; ``answer`` = worked
                                                                solution ending ``#### <n>``
``math500``        ``HuggingFaceH4/MATH-500``       test        ``problem``, ``answer``,
                                                                ``solution``, ``subject``,
                                                                ``level``, ``unique_id``
``aime2024``       ``HuggingFaceH4/aime_2024``      train       ``id``, ``problem``, ``answer``,
                                                                ``solution``, ``url``, ``year``
``aime2025``       ``yentinglin/aime_2025``         train       ``problem``, ``answer`` (``id``,
                                                                ``solution`` if present)
``olympiadbench``  ``Hothan/OlympiadBench``         train       ``id``, ``question``,
                   (``OE_TO_maths_en_COMP``)                    ``final_answer`` (list of str),
                                                                ``solution`` (list), ``context``,
                                                                ``unit``, ``is_multiple_answer``
=================  ===============================  ==========  ===============================

GSM8K uses its official train/test splits by default; the single-split sets default to the
``"hash"`` policy (disjoint 80/10/10 by problem text), and ``split_policy="benchmark"`` serves
the whole benchmark as ``split="test"``. See :mod:`llm_envs.tasks.hub`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from llm_envs.tasks.base import Problem, register_task_source
from llm_envs.tasks.hub import HubSpec, Row, hub_factory


def _text(row: Row, *names: str) -> str:
    """The first present, non-empty field among ``names`` (datasets differ in capitalisation)
    that is text or a number; a list, a mapping or a boolean is no field's value here (a list
    answer ``["2", "3"]`` became the answer key ``"['2', '3']"``, which no answer matches)."""
    for name in names:
        value = row.get(name)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
            return str(value)
    return ""


def strip_math_delimiters(answer: str) -> str:
    """``"$\\frac12$"`` -> ``"\\frac12"``: drop surrounding ``$``/``\\(\\)`` and spaces."""
    text = answer.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if (
            text.startswith(left)
            and text.endswith(right)
            and len(text) >= len(left) + len(right)
        ):
            text = text[len(left) : len(text) - len(right)].strip()
    return text


def _gradable(answer: str) -> bool:
    """Whether an answer holds something to grade once its delimiters, braces and an empty box
    are gone (``"$$"``, ``"\\boxed{}"``, ``"."`` are problems nobody can be paid for)."""
    from llm_envs.verifiers.math import normalize_answer

    return bool(re.sub(r"\\boxed|[{}\s]", "", normalize_answer(strip_math_delimiters(answer))))


# ---------------------------------------------------------------------------------------------
# ---------------------------------------------------------------------------------------------
# GSM8K

_GSM8K_ANSWER = re.compile(r"####\s*(.+?)\s*$", re.DOTALL)


def gsm8k_final_answer(answer_field: str) -> str:
    """The number after ``####`` in a GSM8K answer, without thousands separators."""
    match = _GSM8K_ANSWER.search(answer_field)
    if match is None:
        raise ValueError(
            f"GSM8K answer has no '#### <answer>' line: {answer_field[-80:]!r}"
        )
    return match.group(1).strip().replace(",", "")


def _has_final_answer(row: Row) -> bool:
    """Whether a GSM8K row has a question and an answer that ends in ``#### <answer>`` with an
    answer (``"#### "`` is a problem nobody can be paid for solving; a row without a question
    failed mid-episode with ``KeyError``)."""
    if not isinstance(row.get("answer"), str) or not _text(row, "question"):
        return False
    try:
        return _gradable(gsm8k_final_answer(row["answer"]))
    except ValueError:
        return False


def _gsm8k_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    worked = str(row["answer"])
    return Problem(
        id=f"gsm8k/{_gsm8k_id(row, index)}",
        prompt=str(row["question"]).strip(),
        split=split,
        answer=gsm8k_final_answer(worked),
        solution=worked.split("####")[0].strip(),
        style="answer",
        metadata={"source": "gsm8k"},
    )


def _gsm8k_id(row: Row, index: int) -> str:
    # GSM8K rows carry no id; the content hash is stable across copies and splits.
    import hashlib

    return hashlib.sha256(str(row["question"]).encode("utf-8")).hexdigest()[:12]


GSM8K = HubSpec(
    name="gsm8k",
    repo="openai/gsm8k",
    config="main",
    hub_splits=("train", "test"),
    official_splits={"train": "train", "test": "test"},
    schema="{'question': str, 'answer': str ending in '#### <final answer>'}",
    convert=_gsm8k_convert,
    key=lambda row: _text(row, "question"),
    keep=lambda row, options: _has_final_answer(row),
    default_options={"config": "main"},
    scan_fields=("question", "answer"),
)


# ---------------------------------------------------------------------------------------------
# MATH-500


def _math500_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    unique_id = _text(row, "unique_id") or str(index)
    return Problem(
        id=f"math500/{unique_id}",
        prompt=str(row["problem"]).strip(),
        split=split,
        answer=strip_math_delimiters(str(row["answer"])),
        solution=_text(row, "solution") or None,
        style="answer",
        metadata={
            "source": "math500",
            "subject": _text(row, "subject"),
            "level": row.get("level"),
        },
    )


MATH500 = HubSpec(
    name="math500",
    repo="HuggingFaceH4/MATH-500",
    config=None,
    hub_splits=("test",),
    official_splits={},
    schema="{'problem': str, 'solution': str, 'answer': str, 'subject': str, 'level': int, 'unique_id': str}",
    convert=_math500_convert,
    key=lambda row: _text(row, "problem"),
    keep=lambda row, options: (
        bool(_text(row, "problem")) and _gradable(_text(row, "answer"))
    ),
    scan_fields=("problem", "answer"),
)


# ---------------------------------------------------------------------------------------------
# AIME 2024 / 2025


def _aime_convert(source: str):
    def convert(
        row: Row, split: str, index: int, options: Mapping[str, Any]
    ) -> Problem:
        problem_id = _text(row, "id", "ID", "problem_idx") or str(index)
        return Problem(
            id=f"{source}/{problem_id}",
            prompt=_text(row, "problem", "Problem", "question").strip(),
            split=split,
            answer=strip_math_delimiters(_text(row, "answer", "Answer")),
            solution=_text(row, "solution", "Solution") or None,
            style="answer",
            metadata={
                "source": source,
                "url": _text(row, "url"),
                "year": _text(row, "year"),
            },
        )

    return convert


def _aime_keep(row: Row, options: Mapping[str, Any]) -> bool:
    return bool(_text(row, "problem", "Problem", "question")) and _gradable(
        _text(row, "answer", "Answer")
    )


AIME2024 = HubSpec(
    name="aime2024",
    repo="HuggingFaceH4/aime_2024",
    config=None,
    hub_splits=("train",),
    official_splits={},
    schema="{'id': int, 'problem': str, 'solution': str, 'answer': str, 'url': str, 'year': str}",
    convert=_aime_convert("aime2024"),
    key=lambda row: _text(row, "problem", "Problem", "question"),
    keep=_aime_keep,
)

AIME2025 = HubSpec(
    name="aime2025",
    repo="yentinglin/aime_2025",
    config=None,
    hub_splits=("train",),
    official_splits={},
    schema="{'problem': str, 'answer': str, optional 'id', 'solution', 'url', 'year'}",
    convert=_aime_convert("aime2025"),
    key=lambda row: _text(row, "problem", "Problem", "question"),
    keep=_aime_keep,
)


# ---------------------------------------------------------------------------------------------
# OlympiadBench


def _olympiad_answer(row: Row) -> str:
    final = row.get("final_answer")
    items = final if isinstance(final, (list, tuple)) else [final]
    answers = [
        strip_math_delimiters(str(item))
        for item in items
        if item is not None and str(item).strip()
    ]
    return ", ".join(answers)


def _olympiad_convert(
    row: Row, split: str, index: int, options: Mapping[str, Any]
) -> Problem:
    question = str(row["question"]).strip()
    context = _text(row, "context")
    if context:
        question = f"{context.strip()}\n\n{question}"
    unit = _text(row, "unit")
    if unit:
        question += (
            f"\n\n(Give the answer in {unit}; do not put the unit inside \\boxed{{}}.)"
        )
    solution = row.get("solution")
    if isinstance(solution, (list, tuple)):
        solution = "\n\n".join(str(s) for s in solution if s)
    return Problem(
        id=f"olympiadbench/{_text(row, 'id') or index}",
        prompt=question,
        split=split,
        answer=_olympiad_answer(row),
        solution=str(solution) if solution else None,
        style="answer",
        metadata={
            "source": "olympiadbench",
            "subfield": _text(row, "subfield"),
            "answer_type": _text(row, "answer_type"),
            "multiple_answers": bool(row.get("is_multiple_answer")),
            "unit": unit,
        },
    )


OLYMPIADBENCH = HubSpec(
    name="olympiadbench",
    repo="Hothan/OlympiadBench",
    config="OE_TO_maths_en_COMP",
    hub_splits=("train",),
    official_splits={},
    schema=(
        "{'id': int, 'question': str, 'final_answer': list[str], 'solution': list[str], "
        "'context': str | None, 'unit': str | None, 'is_multiple_answer': bool, "
        "'answer_type': str, 'subfield': str, 'language': str}"
    ),
    convert=_olympiad_convert,
    key=lambda row: str(row["question"]),
    keep=lambda row, options: (
        bool(_text(row, "question")) and _gradable(_olympiad_answer(row))
    ),
    default_options={"config": "OE_TO_maths_en_COMP"},
    scan_fields=("question", "final_answer"),
)


MATH_SPECS = (GSM8K, MATH500, AIME2024, AIME2025, OLYMPIADBENCH)

for _spec in MATH_SPECS:
    register_task_source(_spec.name, hub_factory(_spec))
