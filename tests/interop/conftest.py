"""Interop tests: the examples in ``examples/`` are imported as modules, MARL libraries are optional."""

import os
import sys
from pathlib import Path

# Tianshou's vector replay buffer JIT-compiles with numba on first use (~10 s on this machine);
# the interpreted fallback is instant for the few transitions collected here.
os.environ.setdefault("NUMBA_DISABLE_JIT", "1")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))
