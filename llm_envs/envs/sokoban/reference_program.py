"""Reference tool-agent program for Sokoban: breadth-first search over (player, boxes).

Submitted as text by the reference tool agent and run in the sandbox with the level on
standard input (format: 'rows cols', then one line per row using '#' wall, '_' floor,
'.' target, '$' box, '*' box on target, '@' player, '+' player on target). Prints a shortest
move list on its last line as a bracketed list, '#### ["U", "R", ...]' (the form
every ``answer_format`` accepts). Standard library only.
"""

import sys
from collections import deque

MOVES = (("U", -1, 0), ("D", 1, 0), ("L", 0, -1), ("R", 0, 1))


def parse(text):
    lines = [line for line in text.strip("\n").splitlines() if line.strip()]
    rows, cols = map(int, lines[0].split())
    walls, targets, boxes = set(), set(), set()
    player = None
    for r, line in enumerate(lines[1 : 1 + rows]):
        for c, ch in enumerate(line):
            if ch == "#":
                walls.add((r, c))
            if ch in ".*+":
                targets.add((r, c))
            if ch in "$*":
                boxes.add((r, c))
            if ch in "@+":
                player = (r, c)
    return rows, cols, walls, targets, frozenset(boxes), player


def solve(text):
    rows, cols, walls, targets, boxes, player = parse(text)

    def open_cell(cell):
        return 0 <= cell[0] < rows and 0 <= cell[1] < cols and cell not in walls

    # Dead cells: a box there can never reach a target. Pull a box back from every target.
    live = set(targets)
    queue = deque(targets)
    while queue:
        box = queue.popleft()
        for _, dr, dc in MOVES:
            prev = (box[0] - dr, box[1] - dc)
            pusher = (prev[0] - dr, prev[1] - dc)
            if prev not in live and open_cell(prev) and open_cell(pusher):
                live.add(prev)
                queue.append(prev)

    start = (player, boxes)
    if boxes <= targets:
        return []
    parent = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        (pr, pc), bxs = state
        for name, dr, dc in MOVES:
            ahead = (pr + dr, pc + dc)
            if not open_cell(ahead):
                continue
            new_boxes = bxs
            if ahead in bxs:
                beyond = (ahead[0] + dr, ahead[1] + dc)
                if not open_cell(beyond) or beyond in bxs or beyond not in live:
                    continue
                new_boxes = (bxs - {ahead}) | {beyond}
            nxt = (ahead, new_boxes)
            if nxt in parent:
                continue
            parent[nxt] = (state, name)
            if new_boxes <= targets:
                moves = []
                while parent[nxt] is not None:
                    nxt, step = parent[nxt]
                    moves.append(step)
                return moves[::-1]
            queue.append(nxt)
    return None


def main():
    moves = solve(sys.stdin.read())
    if moves is None:
        print("no solution")
    else:
        print("#### [" + ", ".join('"' + move + '"' for move in moves) + "]")


if __name__ == "__main__":
    main()
