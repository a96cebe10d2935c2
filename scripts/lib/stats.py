#!/usr/bin/env python3
"""The one median of the benchmark scripts.

As a module (`sys.path.insert(0, "<repo>/scripts/lib"); from stats import median`):
`median(values)` is the middle value of the numbers given, the mean of the two middle ones for
an even count, and None when there are none.

As a command, for the shell scripts: `stats.py median [VALUE ...]` prints the median of its
arguments, or of the whitespace-separated numbers on standard input when none are given
(`nan` is a number, and sorts first, as `sort -g` sorts it). For an odd count it prints the middle value as written; for an even count
the mean of the two middle ones; for none, an empty line.
"""

import math
import statistics
import sys


def median(values):
    """The median of `values` (numbers), or None when there are none."""
    v = list(values)
    return statistics.median(v) if v else None


def _median_text(words):
    """The median of number texts, printed as the shell scripts print it."""
    if not words:
        return ""
    nums = sorted(((float(w), w) for w in words), key=lambda p: (not math.isnan(p[0]), p[0]))
    n = len(nums)
    if n % 2 == 1:
        return nums[n // 2][1]
    return format((nums[n // 2 - 1][0] + nums[n // 2][0]) / 2, ".15g")


def main(argv):
    if len(argv) < 2 or argv[1] != "median":
        sys.exit("usage: stats.py median [VALUE ...]  (no values: read them from standard input)")
    words = argv[2:] if len(argv) > 2 else sys.stdin.read().split()
    try:
        print(_median_text(words))
    except ValueError as e:
        sys.exit(f"stats.py median: not a number: {e}")


if __name__ == "__main__":
    main(sys.argv)
