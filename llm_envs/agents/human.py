"""A person at the terminal plays an agent: the observation is printed, the action is typed.

Entry rules (shown to the player before each entry):

* an action may span several lines; it ends at an **empty line**, at a line holding only the
  **end marker** (``EOF`` by default; the marker line itself is not part of the action), or at
  the end of the input stream;
* inside an open Markdown code fence (a line starting with three backticks) empty lines are kept,
  so a program with blank lines can be pasted as-is: the entry then ends at the first empty line
  or marker line after the closing fence;
* empty lines before the first character are skipped, so a stray Enter does not submit an empty
  action; to submit an empty action on purpose, type the end marker on the first line.

If the input stream is already exhausted when an action is needed, :class:`EOFError` is raised:
a closed terminal means the player has left, and the caller decides how to stop.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from llm_envs.agents.base import ActRequest, Agent, AgentOutput
from llm_envs.core.writing import for_terminal

_FENCE = "```"


class HumanAgent(Agent):
    """Shows each observation on ``output_stream`` and reads the action from ``input_stream``.

    Args:
        input_stream: Where actions are read from (default: ``sys.stdin`` at call time).
        output_stream: Where observations are shown (default: ``sys.stdout`` at call time).
        end_marker: A line that ends an entry (not included in the action).
        show_instruction: ``"first"`` shows an agent's role instruction the first time it acts
            and whenever it changes; ``"always"`` shows it at every decision.
    """

    name = "human"

    def __init__(
        self,
        input_stream: TextIO | None = None,
        output_stream: TextIO | None = None,
        *,
        end_marker: str = "EOF",
        show_instruction: str = "first",
    ) -> None:
        if show_instruction not in ("first", "always"):
            raise ValueError(f"show_instruction must be 'first' or 'always', got {show_instruction!r}")
        if not end_marker.strip():
            raise ValueError("end_marker must be a visible string")
        self._input = input_stream
        self._output = output_stream
        self.end_marker = end_marker
        self.show_instruction = show_instruction
        self._last_instruction: dict[str, str] = {}

    @property
    def input_stream(self) -> TextIO:
        return self._input if self._input is not None else sys.stdin

    @property
    def output_stream(self) -> TextIO:
        return self._output if self._output is not None else sys.stdout

    def act_batch(self, requests: Sequence[ActRequest]) -> list[AgentOutput]:
        return [self._act_one(request) for request in requests]

    def _act_one(self, request: ActRequest) -> AgentOutput:
        out = self.output_stream
        observation = request.observation
        instruction = observation.get("instruction", "")
        role = request.env.role_of(request.agent) if request.env is not None else request.agent
        header = f"you play {request.agent}" + (f" ({role})" if role != request.agent else "")
        out.write(f"\n==================== {header} ====================\n")
        if instruction and (
            self.show_instruction == "always" or self._last_instruction.get(request.agent) != instruction
        ):
            out.write(f"[instruction]\n{for_terminal(instruction)}\n")
            self._last_instruction[request.agent] = instruction
        # (a prompt quotes what other agents, models among them, wrote: their escape sequences
        # are shown as escapes, never acted on by this terminal)
        out.write(f"[prompt]\n{for_terminal(observation.get('prompt', ''))}\n")
        out.write(
            f"[your action: end with an empty line or a line '{self.end_marker}'; "
            f"blank lines inside ``` fences are kept]\n> "
        )
        out.flush()
        return AgentOutput(text=self.read_entry())

    def read_entry(self) -> str:
        """Read one action by the entry rules in the module docstring."""
        stream = self.input_stream
        lines: list[str] = []
        in_fence = False
        while True:
            raw = stream.readline()
            if raw == "":  # end of stream
                if not lines:
                    raise EOFError("the input stream ended: no more actions can be read")
                break
            line = raw.rstrip("\r\n")
            if line.strip() == self.end_marker:
                break
            if not line.strip():
                if not lines:
                    continue  # skip leading empty lines
                if not in_fence:
                    break
            if line.lstrip().startswith(_FENCE):
                in_fence = not in_fence
            lines.append(line)
        return "\n".join(lines)
