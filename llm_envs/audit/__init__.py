"""Audit a grader: play the exploit catalogue through an environment (``llm-envs audit ENV``).

* :mod:`llm_envs.audit.exploits`: the catalogue (data: name, family, role, what it attacks, and
  a builder of the exploit and its plain wrong counterpart for a given problem);
* :mod:`llm_envs.audit.surface`: the ``audit_surface()`` hook an environment implements to say
  which agents write code, tests, programs or answers and how a text becomes an action (ours
  have defaults);
* :mod:`llm_envs.audit.runner`: plays each exploit and its plain wrong answer on clones of the
  same episode state and says ``held`` or ``paid``.

See docs/audit.md.
"""

from llm_envs.audit.exploits import CATALOGUE, FAMILIES, ROLES, Built, Exploit, Target, by_name, for_role
from llm_envs.audit.runner import AuditError, Outcome, audit_env, play_exploit, summarize
from llm_envs.audit.surface import AuditSurface, default_surface

__all__ = [
    "CATALOGUE",
    "FAMILIES",
    "ROLES",
    "AuditError",
    "AuditSurface",
    "Built",
    "Exploit",
    "Outcome",
    "Target",
    "audit_env",
    "by_name",
    "default_surface",
    "for_role",
    "play_exploit",
    "summarize",
]
