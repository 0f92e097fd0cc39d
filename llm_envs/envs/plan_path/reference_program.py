"""Reference tool-agent program for Plan-Path: breadth-first search from S to G.

Submitted as text by the reference tool agent and run in the sandbox with the puzzle on
standard input (format: 'rows cols', then one line per row of '.', '#', 'S', 'G'). Prints a
shortest move list on its last line as a bracketed list, '#### ["U", "R", ...]' (the form
every ``answer_format`` accepts). Standard library only.
"""

import sys
from collections import deque

MOVES = (("U", -1, 0), ("D", 1, 0), ("L", 0, -1), ("R", 0, 1))


def solve(text):
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    rows, cols = map(int, lines[0].split())
    grid = lines[1 : 1 + rows]
    start = goal = None
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] == "S":
                start = (r, c)
            elif grid[r][c] == "G":
                goal = (r, c)
    if start is None:
        return []
    parent = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            break
        r, c = cell
        for name, dr, dc in MOVES:
            nr, nc = r + dr, c + dc
            if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] != "#" and (nr, nc) not in parent:
                parent[(nr, nc)] = (cell, name)
                queue.append((nr, nc))
    if goal not in parent:
        return None
    moves = []
    cell = goal
    while parent[cell] is not None:
        cell, name = parent[cell]
        moves.append(name)
    return moves[::-1]


def main():
    moves = solve(sys.stdin.read())
    if moves is None:
        print("no path")
    else:
        print("#### [" + ", ".join('"' + move + '"' for move in moves) + "]")


if __name__ == "__main__":
    main()
