"""``arithmetic``: an offline, procedural math source with exactly verifiable answers.

The default task of the math environments, so that they work with no download. Six levels:

=====  =======================================================================================
level  problems
=====  =======================================================================================
0      one operation on single digits (``3 + 5``, ``4 × 6``): opt-in, a curriculum's first step
1      one operation on small integers (``37 + 58``, ``14 × 9``)
2      three or four integers with parentheses; every division is exact
3      fractions (``3/4 + 5/6``); the answer is a reduced fraction
4      word problems (change from a purchase, speed, ages, tanks, sharing, discounts, ``ax+b=c``)
5      number theory (``a^b mod m``, gcd, lcm, sums of multiples, digit sums of powers)
=====  =======================================================================================

Answers are exact: an integer (``"42"``), a terminating decimal with at most four places
(``"12.5"``) or a reduced fraction (``"7/12"``); :func:`llm_envs.verifiers.math.check_answer`
accepts every equivalent spelling. Each problem carries a worked solution that ends in
``\\boxed{answer}`` and, in ``metadata["program"]``, a Python program that prints the answer
(what a reference tool agent runs).

Splits (80/10/10) are drawn from a problem's content, not its wording (:func:`content_key`;
docs/tasks.md, "Splits"); problem ``i`` of a split is a pure function of ``(split, i)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from llm_envs.core.splits import check_split, split_of, split_seed
from llm_envs.tasks.base import Problem, TaskSource, register_task_source

#: Nominal size of each split (the generator is unbounded; indices wrap nothing).
NOMINAL_SIZE = 1_000_000_000
LEVELS = (1, 2, 3, 4, 5)
_MAX_DRAWS = 1000


@dataclass(frozen=True)
class _Draft:
    question: str
    answer: Fraction
    steps: str  # worked solution without the final box
    program: str  # Python that prints the answer
    kind: str
    as_fraction: bool = False  # state the answer as p/q even where a decimal is exact


def content_key(draft: _Draft) -> str:
    """What a problem asks, without its wording or names: its template (``kind``) and the
    program that computes its answer. The split is drawn from it: a question's split was drawn
    from its text, and the three wordings of one sum (or a word problem with another name) each
    drew their own, so 290 of 300 level-0 test questions were served to training reworded."""
    return f"{draft.kind}\n{draft.program}"


def format_answer(value: Fraction) -> str:
    """Canonical answer text: ``"42"``, ``"-3.25"`` (at most 4 decimals) or ``"7/12"``."""
    if value.denominator == 1:
        return str(value.numerator)
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    places = max(twos, fives)
    if denominator == 1 and places <= 4:
        scaled = value * 10**places
        sign = "-" if scaled < 0 else ""
        digits = str(abs(scaled.numerator)).rjust(places + 1, "0")
        return f"{sign}{digits[:-places]}.{digits[-places:]}"
    return f"{value.numerator}/{value.denominator}"


def _program(expression: str) -> str:
    return (
        f"from fractions import Fraction as F\n\nanswer = {expression}\nprint(answer)\n"
    )


def _int(rng: np.random.Generator, low: int, high: int) -> int:
    """A uniform integer in [low, high] (inclusive)."""
    return int(rng.integers(low, high + 1))


def _pick(rng: np.random.Generator, items: Sequence[str]) -> str:
    return items[int(rng.integers(0, len(items)))]


# ---------------------------------------------------------------------------------------------
# level 0 (opt-in, for curricula): one operation on single digits


def _one_operation(rng: np.random.Generator, a: int, op: str, b: int, kind: str) -> _Draft:
    """``a op b`` (``op`` one of ``+−×``) as a question in one of three phrasings."""
    value = a + b if op == "+" else a - b if op == "−" else a * b
    py = {"+": "+", "−": "-", "×": "*"}[op]
    phrasing = _pick(rng, ("What is {e}?", "Compute {e}.", "Calculate {e}."))
    expression = f"{a} {op} {b}"
    return _Draft(
        question=phrasing.format(e=expression),
        answer=Fraction(value),
        steps=f"{expression} = {value}.",
        program=_program(f"{a} {py} {b}"),
        kind=kind,
    )


def _level0(rng: np.random.Generator) -> _Draft:
    op = _pick(rng, "+−×")
    a, b = _int(rng, 0, 9), _int(rng, 0, 9)
    return _one_operation(rng, a, op, b, "one_digit_operation")


# level 1: one operation


def _level1(rng: np.random.Generator) -> _Draft:
    op = _pick(rng, "+−×")
    if op == "×":
        a, b = _int(rng, 2, 20), _int(rng, 2, 20)
    else:
        a, b = _int(rng, 0, 100), _int(rng, 0, 100)
    return _one_operation(rng, a, op, b, "one_operation")


# ---------------------------------------------------------------------------------------------
# level 2: several integers, parentheses, exact division


def _level2(rng: np.random.Generator) -> _Draft:
    template = _int(rng, 0, 3)
    a, b, c, d = (_int(rng, 2, 30) for _ in range(4))
    if template == 0:
        text, py, value = (
            f"({a} + {b}) × {c} − {d}",
            f"({a} + {b}) * {c} - {d}",
            (a + b) * c - d,
        )
        steps = f"({a} + {b}) = {a + b}; {a + b} × {c} = {(a + b) * c}; {(a + b) * c} − {d} = {value}."
    elif template == 1:
        text, py, value = (
            f"{a} × {b} + {c} × {d}",
            f"{a} * {b} + {c} * {d}",
            a * b + c * d,
        )
        steps = (
            f"{a} × {b} = {a * b}; {c} × {d} = {c * d}; {a * b} + {c * d} = {value}."
        )
    elif template == 2:
        product = a * c  # (a·c) ÷ c is exact by construction
        text, py, value = (
            f"{product} ÷ {c} + {b} × {d}",
            f"{product} // {c} + {b} * {d}",
            a + b * d,
        )
        steps = f"{product} ÷ {c} = {a}; {b} × {d} = {b * d}; {a} + {b * d} = {value}."
    else:
        text, py, value = (
            f"{a} × ({b} − {c}) + {d}",
            f"{a} * ({b} - {c}) + {d}",
            a * (b - c) + d,
        )
        steps = f"{b} − {c} = {b - c}; {a} × {b - c} = {a * (b - c)}; {a * (b - c)} + {d} = {value}."
    phrasing = _pick(
        rng, ("What is {e}?", "Evaluate {e}.", "Compute the value of {e}.")
    )
    return _Draft(
        phrasing.format(e=text), Fraction(value), steps, _program(py), "expression"
    )


# ---------------------------------------------------------------------------------------------
# level 3: fractions


def _fraction_text(value: Fraction) -> str:
    return (
        str(value.numerator)
        if value.denominator == 1
        else f"{value.numerator}/{value.denominator}"
    )


def _level3(rng: np.random.Generator) -> _Draft:
    def reduced() -> tuple[int, int]:
        # Shown as written, so draw numerator and denominator already in lowest terms.
        denominator = _int(rng, 2, 12)
        while True:
            numerator = _int(rng, 1, denominator * 2 - 1)
            if math.gcd(numerator, denominator) == 1:
                return numerator, denominator

    (xn, xd), (yn, yd) = reduced(), reduced()
    x, y = Fraction(xn, xd), Fraction(yn, yd)
    op = _pick(rng, "+−×÷")
    if op == "+":
        value = x + y
    elif op == "−":
        value = x - y
    elif op == "×":
        value = x * y
    else:
        value = x / y
    py_op = {"+": "+", "−": "-", "×": "*", "÷": "/"}[op]
    x_text = f"{x.numerator}/{x.denominator}"
    y_text = f"{y.numerator}/{y.denominator}"
    question = _pick(
        rng,
        (
            "What is {x} {op} {y}? Give the answer as a fraction in lowest terms.",
            "Compute {x} {op} {y} and simplify.",
        ),
    ).format(x=x_text, op=op, y=y_text)
    steps = f"{x_text} {op} {y_text} = {_fraction_text(value)} in lowest terms."
    program = _program(
        f"F({x.numerator}, {x.denominator}) {py_op} F({y.numerator}, {y.denominator})"
    )
    return _Draft(question, value, steps, program, "fractions", as_fraction=True)


# ---------------------------------------------------------------------------------------------
# level 4: word problems

_NAMES = (
    "Maya",
    "Omar",
    "Lena",
    "Ravi",
    "Sofia",
    "Kenji",
    "Amara",
    "Tom",
    "Ines",
    "Yusuf",
)
_ITEMS = (
    ("pencils", "pencil"),
    ("notebooks", "notebook"),
    ("apples", "apple"),
    ("stamps", "stamp"),
)


def _word_change(rng: np.random.Generator) -> _Draft:
    name = _pick(rng, _NAMES)
    plural, _singular = _ITEMS[int(rng.integers(0, len(_ITEMS)))]
    cents = _int(rng, 5, 400) * 5  # price in cents, a multiple of 5
    count = _int(rng, 2, 12)
    total = Fraction(cents * count, 100)
    bill = next(b for b in (5, 10, 20, 50, 100, 200, 500) if b >= total)
    change = bill - total
    price = Fraction(cents, 100)
    question = (
        f"{plural.capitalize()} cost ${float(price):.2f} each. {name} buys {count} {plural} "
        f"and pays with a ${bill} bill. How many dollars of change does {name} get?"
    )
    steps = f"Cost: {count} × {format_answer(price)} = {format_answer(total)}. Change: {bill} − {format_answer(total)} = {format_answer(change)}."
    return _Draft(
        question,
        change,
        steps,
        _program(f"{bill} - {count} * F({cents}, 100)"),
        "change",
    )


def _word_speed(rng: np.random.Generator) -> _Draft:
    hours = _int(rng, 2, 6)
    speed = _int(rng, 4, 30) * 5
    distance = speed * hours
    later = _int(rng, 1, 9)
    value = Fraction(speed * later)
    question = (
        f"A train travels {distance} km in {hours} hours at a constant speed. "
        f"How many kilometres does it travel in {later} hours at the same speed?"
    )
    steps = f"Speed: {distance} ÷ {hours} = {speed} km/h. Distance: {speed} × {later} = {speed * later}."
    return _Draft(
        question, value, steps, _program(f"F({distance}, {hours}) * {later}"), "speed"
    )


def _word_ages(rng: np.random.Generator) -> _Draft:
    name = _pick(rng, _NAMES)
    age = _int(rng, 3, 15)
    factor = _int(rng, 2, 5)
    years = _int(rng, 1, 20)
    value = Fraction(age * factor + years)
    question = (
        f"{name} is {age} years old. {name}'s grandmother is {factor} times as old as {name}. "
        f"How old will the grandmother be in {years} year{'s' if years != 1 else ''}?"
    )
    steps = f"Grandmother now: {age} × {factor} = {age * factor}. In {years} years: {age * factor + years}."
    return _Draft(
        question, value, steps, _program(f"{age} * {factor} + {years}"), "ages"
    )


def _word_tank(rng: np.random.Generator) -> _Draft:
    denominator = _int(rng, 2, 8)
    numerator = _int(rng, 1, denominator - 1)
    capacity = denominator * _int(rng, 5, 60)
    value = Fraction(capacity) * (1 - Fraction(numerator, denominator))
    question = (
        f"A water tank holds {capacity} litres when full. It is {numerator}/{denominator} full. "
        f"How many more litres are needed to fill it?"
    )
    steps = (
        f"Water now: {capacity} × {numerator}/{denominator} = {capacity * numerator // denominator}. "
        f"Missing: {capacity} − {capacity * numerator // denominator} = {format_answer(value)}."
    )
    return _Draft(
        question,
        value,
        steps,
        _program(f"{capacity} * (1 - F({numerator}, {denominator}))"),
        "tank",
    )


def _word_share(rng: np.random.Generator) -> _Draft:
    people = _int(rng, 2, 9)
    share = _int(rng, 5, 80)
    total = people * share
    spent = _int(rng, 1, share - 1)
    value = Fraction(share - spent)
    question = (
        f"{people} friends share ${total} equally. Each friend then spends ${spent}. "
        f"How many dollars does each friend have left?"
    )
    steps = (
        f"Each gets {total} ÷ {people} = {share}; {share} − {spent} = {share - spent}."
    )
    return _Draft(
        question, value, steps, _program(f"F({total}, {people}) - {spent}"), "share"
    )


def _word_discount(rng: np.random.Generator) -> _Draft:
    price = _int(rng, 2, 60) * 5
    percent = _int(rng, 1, 15) * 5
    value = Fraction(price) * Fraction(100 - percent, 100)
    question = (
        f"A jacket costs ${price}. During a sale its price is reduced by {percent}%. "
        f"What is the sale price in dollars?"
    )
    steps = f"{price} × (100 − {percent})/100 = {format_answer(value)}."
    return _Draft(
        question,
        value,
        steps,
        _program(f"{price} * F(100 - {percent}, 100)"),
        "discount",
    )


def _word_equation(rng: np.random.Generator) -> _Draft:
    a = _int(rng, 2, 12) * (1 if rng.integers(0, 4) else -1)
    b = _int(rng, -40, 40)
    c = _int(rng, -60, 60)
    value = Fraction(c - b, a)
    b_text = f"+ {b}" if b >= 0 else f"− {-b}"
    question = f"Solve for x: {a}x {b_text} = {c}."
    steps = (
        f"{a}x = {c} − ({b}) = {c - b}, so x = {c - b}/{a} = {format_answer(value)}."
    )
    return _Draft(
        question, value, steps, _program(f"F({c} - ({b}), {a})"), "linear_equation"
    )


_WORD_PROBLEMS: tuple[Callable[[np.random.Generator], _Draft], ...] = (
    _word_change,
    _word_speed,
    _word_ages,
    _word_tank,
    _word_share,
    _word_discount,
    _word_equation,
)


def _level4(rng: np.random.Generator) -> _Draft:
    return _WORD_PROBLEMS[int(rng.integers(0, len(_WORD_PROBLEMS)))](rng)


# ---------------------------------------------------------------------------------------------
# level 5: number theory


def _level5(rng: np.random.Generator) -> _Draft:
    template = _int(rng, 0, 4)
    if template == 0:
        base, exponent, modulus = _int(rng, 2, 30), _int(rng, 5, 60), _int(rng, 3, 97)
        value = pow(base, exponent, modulus)
        question = (
            f"What is the remainder when {base}^{exponent} is divided by {modulus}?"
        )
        steps = f"By repeated squaring modulo {modulus}, {base}^{exponent} ≡ {value} (mod {modulus})."
        program = f"print(pow({base}, {exponent}, {modulus}))\n"
    elif template == 1:
        common = _int(rng, 2, 30)
        a, b = common * _int(rng, 2, 40), common * _int(rng, 2, 40)
        value = math.gcd(a, b)
        question = f"What is the greatest common divisor of {a} and {b}?"
        steps = f"Euclid's algorithm on {a} and {b} gives {value}."
        program = f"import math\nprint(math.gcd({a}, {b}))\n"
    elif template == 2:
        a, b = _int(rng, 2, 40), _int(rng, 2, 40)
        value = a * b // math.gcd(a, b)
        question = f"What is the least common multiple of {a} and {b}?"
        steps = (
            f"lcm = {a} × {b} ÷ gcd({a}, {b}) = {a * b} ÷ {math.gcd(a, b)} = {value}."
        )
        program = f"import math\nprint({a} * {b} // math.gcd({a}, {b}))\n"
    elif template == 3:
        k, limit = _int(rng, 2, 13), _int(rng, 30, 500)
        count = limit // k
        value = k * count * (count + 1) // 2
        question = f"What is the sum of all positive multiples of {k} that are at most {limit}?"
        steps = f"There are {count} multiples; their sum is {k} × {count}·{count + 1}/2 = {value}."
        program = f"print(sum(range({k}, {limit} + 1, {k})))\n"
    else:
        base, exponent = _int(rng, 2, 9), _int(rng, 5, 40)
        value = sum(int(digit) for digit in str(base**exponent))
        question = f"What is the sum of the digits of {base}^{exponent}?"
        steps = f"{base}^{exponent} = {base**exponent}; its digits sum to {value}."
        program = f"print(sum(int(d) for d in str({base} ** {exponent})))\n"
    return _Draft(question, Fraction(value), steps, program, "number_theory")


_GENERATORS: dict[int, Callable[[np.random.Generator], _Draft]] = {
    0: _level0,
    1: _level1,
    2: _level2,
    3: _level3,
    4: _level4,
    5: _level5,
}


class ArithmeticSource(TaskSource):
    """Procedural arithmetic and word problems (see the module docstring).

    Args:
        split: ``"train"``, ``"validation"`` or ``"test"``.
        levels: Difficulty levels to draw from (uniformly per problem); default the five levels
            1-5 (level 0, single digits, is for curricula and only drawn when named).
        level: Shorthand for ``levels=(level,)``.
    """

    name = "arithmetic"

    def __init__(
        self,
        split: str = "train",
        *,
        levels: Sequence[int] | None = None,
        level: int | None = None,
    ) -> None:
        self.split = check_split(split)
        if level is not None:
            if levels is not None:
                raise ValueError("give either level or levels, not both")
            levels = (level,)
        chosen = tuple(sorted(set(levels if levels is not None else LEVELS)))
        unknown = [lv for lv in chosen if lv not in _GENERATORS]
        if not chosen or unknown:
            raise ValueError(
                f"levels must be a non-empty subset of {tuple(sorted(_GENERATORS))}, got {levels!r}"
            )
        self.levels = chosen

    def __len__(self) -> int:
        return NOMINAL_SIZE

    def get(self, index: int) -> Problem:
        if not 0 <= index < NOMINAL_SIZE:
            raise IndexError(
                f"index {index} out of range for {self.name} ({NOMINAL_SIZE} problems)"
            )
        # The generator state is a pure function of (split, index, levels), never of global RNGs.
        rng = np.random.default_rng([split_seed(self.split, index), *self.levels])
        for _ in range(_MAX_DRAWS):
            level = self.levels[int(rng.integers(0, len(self.levels)))]
            draft = _GENERATORS[level](rng)
            if split_of(content_key(draft)) == self.split:
                answer = (
                    _fraction_text(draft.answer)
                    if draft.as_fraction
                    else format_answer(draft.answer)
                )
                return Problem(
                    id=f"arithmetic/{self.split}/{index}",
                    prompt=draft.question,
                    split=self.split,
                    answer=answer,
                    solution=f"{draft.steps}\nThe answer is \\boxed{{{answer}}}.",
                    style="answer",
                    metadata={
                        "level": level,
                        "kind": draft.kind,
                        "program": draft.program,
                    },
                )
        raise RuntimeError(
            f"no {self.split} problem after {_MAX_DRAWS} draws (levels {self.levels})"
        )


register_task_source("arithmetic", ArithmeticSource)
