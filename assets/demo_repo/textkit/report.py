"""A word-count report: `python3 -m textkit.report [FILE]`."""

import sys
from collections import Counter


def counts(text: str) -> Counter:
    return Counter(text.split())


def main(argv: list[str]) -> int:
    text = open(argv[0]).read() if argv else "the quick brown fox jumps over the lazy dog"
    for word, n in counts(text).most_common(5):
        print(f"{n:4d} {word}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
