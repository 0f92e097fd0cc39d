"""Reference tool-agent program for Sudoku: backtracking search, fewest candidates first.

Submitted as text by the reference tool agent and run in the sandbox with the puzzle on
standard input (format: N, then N lines of N numbers, 0 = empty). Prints the solved grid on its
last line as '#### [[...], ...]'. Standard library only.
"""

import sys

BOX_SHAPES = {4: (2, 2), 6: (2, 3), 9: (3, 3)}


def solve(text):
    lines = [line.split() for line in text.strip().splitlines() if line.strip()]
    n = int(lines[0][0])
    grid = [[int(v) for v in row] for row in lines[1 : 1 + n]]
    box_rows, box_cols = BOX_SHAPES[n]

    def box(r, c):
        return (r // box_rows, c // box_cols)

    rows = [set(row) - {0} for row in grid]
    cols = [{grid[r][c] for r in range(n)} - {0} for c in range(n)]
    boxes = {}
    for r in range(n):
        for c in range(n):
            if grid[r][c]:
                boxes.setdefault(box(r, c), set()).add(grid[r][c])
    empty = [(r, c) for r in range(n) for c in range(n) if not grid[r][c]]

    def candidates(r, c):
        used = rows[r] | cols[c] | boxes.get(box(r, c), set())
        return [v for v in range(1, n + 1) if v not in used]

    def search():
        if not empty:
            return True
        # Fill the empty cell with the fewest candidates first.
        best = min(range(len(empty)), key=lambda k: len(candidates(*empty[k])))
        r, c = empty.pop(best)
        for v in candidates(r, c):
            grid[r][c] = v
            rows[r].add(v)
            cols[c].add(v)
            boxes.setdefault(box(r, c), set()).add(v)
            if search():
                return True
            rows[r].discard(v)
            cols[c].discard(v)
            boxes[box(r, c)].discard(v)
        grid[r][c] = 0
        empty.insert(best, (r, c))
        return False

    return grid if search() else None


def main():
    grid = solve(sys.stdin.read())
    if grid is None:
        print("no solution")
    else:
        print("#### [" + ",".join("[" + ",".join(map(str, row)) + "]" for row in grid) + "]")


if __name__ == "__main__":
    main()
