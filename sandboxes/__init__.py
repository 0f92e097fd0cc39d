"""Isolated, fast execution of Python programs written by language models.

    import sandboxes
    with sandboxes.make_sandbox("auto") as sb:       # strongest backend that works here
        res = sb.run("print(input()[::-1])", stdin="abc")
        assert res.ok and res.stdout == "cba\\n"

Backends, strongest first: ``docker`` (locked-down warm containers), ``bwrap`` (bubblewrap:
user/pid/net/ipc/mount namespaces, read-only system, non-root uid), ``process`` (for hosts that
block user namespaces; weaker), and ``unsafe`` (no isolation; only with ``allow_unsafe=True``).
All of them keep a pool of warm interpreters inside the sandbox and fork one child per run.
See docs/sandboxes.md for the threat model and what each backend guarantees.

Only the standard library is needed; ``docker`` is imported lazily by the docker backend.
"""

from .core import (
    DEFAULT_LIMITS,
    Job,
    Limits,
    RunResult,
    Sandbox,
    SandboxError,
    SandboxUnavailable,
)
from .factory import (
    BACKENDS,
    available_backends,
    close_shared_sandboxes,
    make_sandbox,
    shared_sandbox,
)
from .harness import (
    TestReport,
    TestResult,
    ValueCheck,
    ValueCheckResult,
    outputs_match,
    parse_python,
    run_function_tests,
    run_io_cases,
    run_io_programs,
    run_value_checks,
    split_check_function,
    split_test_code,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_LIMITS",
    "Job",
    "Limits",
    "RunResult",
    "Sandbox",
    "SandboxError",
    "SandboxUnavailable",
    "TestReport",
    "ValueCheck",
    "ValueCheckResult",
    "TestResult",
    "available_backends",
    "close_shared_sandboxes",
    "make_sandbox",
    "outputs_match",
    "parse_python",
    "run_value_checks",
    "run_function_tests",
    "run_io_cases",
    "run_io_programs",
    "shared_sandbox",
    "split_check_function",
    "split_test_code",
]
