import sys
from collections import deque

words = sys.stdin.read().split()
rows, cols = int(words[0]), int(words[1])
grid = words[2:2 + rows]
start = next((r, c) for r in range(rows) for c in range(cols) if grid[r][c] == "S")
came_from = {start: None}
queue = deque([start])
while queue:
    cell = queue.popleft()
    r, c = cell
    if grid[r][c] == "G":
        moves = []
        while came_from[cell] is not None:
            cell, move = came_from[cell]
            moves.append(move)
        print("#### [" + ", ".join('"' + move + '"' for move in reversed(moves)) + "]")
        break
    for move, dr, dc in (("U", -1, 0), ("D", 1, 0), ("L", 0, -1), ("R", 0, 1)):
        nr, nc = r + dr, c + dc
        if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] != "#" and (nr, nc) not in came_from:
            came_from[(nr, nc)] = (cell, move)
            queue.append((nr, nc))
else:
    print("no path")
