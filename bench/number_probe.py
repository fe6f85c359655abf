#!/usr/bin/env python3
"""number_probe.py -- does a translator copy the numbers it is given?

fra.txt holds few numbers (about 1,100 of its 167,130 lines have a digit), so the held-out
splits have a dozen sentences with one, too few to measure. This probe writes English
sentences in the corpus's style whose numbers French writes the same way (years, ages,
counts, prices, room and bus numbers: integers, no decimals, no times of day), translates them
with `transformer_nmt translate`, and counts, per sentence, by the digit strings of the output:

  copied  the output's digit strings are the source's (as a multiset)
  wrong   the output has a digit string the source does not, or more often (a number changed)
  dropped else: a source number missing, none made up (spelled out in words, or lost)

usage: bench/number_probe.py BINARY CHECKPOINT [N [SEED]] [--two] [-- translate flags...]
  N sentences (default 300) from SEED (default 1); prints the three counts and the first wrong
  and dropped translations. --two: sentences with two different numbers, both to be kept
  (copied: the output's digit strings are exactly the two). Deterministic for N and SEED.
"""
import random
from collections import Counter
import re
import subprocess
import sys

TEMPLATES = [
    ("I was born in {year}.", "year"),
    ("She was born in {year}.", "year"),
    ("Tom moved to Boston in {year}.", "year"),
    ("This house was built in {year}.", "year"),
    ("The war ended in {year}.", "year"),
    ("He is {age} years old.", "age"),
    ("My father is {age} years old.", "age"),
    ("Tom died at the age of {age}.", "age"),
    ("I have {count} books.", "count"),
    ("There are {count} students in this class.", "count"),
    ("We sold {count} cars last year.", "count"),
    ("It costs {count} dollars.", "count"),
    ("I paid {count} euros for this bag.", "count"),
    ("He lives in room {room}.", "room"),
    ("Take bus number {bus}.", "bus"),
    ("The train leaves from platform {bus}.", "bus"),
]

# --two: two numbers a sentence, which the output must both keep (in any order)
TEMPLATES_TWO = [
    ("I was born in {year} and my sister in {year2}.", "year", "year2"),
    ("Tom was {age} years old in {year}.", "age", "year"),
    ("He lives in room {room} and I live in room {room2}.", "room", "room2"),
    ("I have {count} books and {count2} records.", "count", "count2"),
    ("Take bus number {bus}, then bus number {bus2}.", "bus", "bus2"),
    ("We sold {count} cars in {year}.", "count", "year"),
    ("My father is {age} and my mother is {age2}.", "age", "age2"),
    ("This house was built in {year} and sold in {year2}.", "year", "year2"),
]

RANGES = {"year": (1900, 2030), "age": (21, 99), "count": (21, 999), "room": (100, 999),
          "bus": (10, 99)}


def sentences(n, seed, two=False):
    """n (sentence, [its numbers]) pairs; two: from TEMPLATES_TWO, two different numbers each."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text, *kinds = (TEMPLATES_TWO if two else TEMPLATES)[
            rng.randrange(len(TEMPLATES_TWO if two else TEMPLATES))]
        values = {}
        for kind in kinds:
            lo, hi = RANGES[kind.rstrip("2")]
            value = rng.randint(lo, hi)
            while value in values.values():
                value = rng.randint(lo, hi)
            values[kind] = value
        out.append((text.format(**values), sorted(str(v) for v in values.values())))
    return out


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        k = args.index("--")
        args, extra = args[:k], args[k + 1:]
    two = "--two" in args
    args = [a for a in args if a != "--two"]
    if len(args) < 2:
        sys.exit(__doc__)
    binary, ckpt = args[0], args[1]
    n = int(args[2]) if len(args) > 2 else 300
    seed = int(args[3]) if len(args) > 3 else 1
    probe = sentences(n, seed, two)
    run = subprocess.run([binary, "translate", "--checkpoint", ckpt] + extra,
                         input="".join(s + "\n" for s, _ in probe), capture_output=True,
                         text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"{binary} translate failed:\n{run.stderr}")
    outputs = run.stdout.split("\n")[:n]
    if len(outputs) != n:
        sys.exit(f"expected {n} translations, got {len(outputs)}")
    copied, wrong, dropped = 0, [], []
    for (src, numbers), hyp in zip(probe, outputs):
        found = Counter(re.findall(r"\d+", hyp))
        if found == Counter(numbers):
            copied += 1
        elif found - Counter(numbers):  # a digit string the source lacks, or once too often
            wrong.append((src, hyp))
        else:
            dropped.append((src, hyp))
    print(f"{n} sentences: copied {copied} ({100 * copied / n:.1f}%), wrong {len(wrong)} "
          f"({100 * len(wrong) / n:.1f}%), dropped {len(dropped)} "
          f"({100 * len(dropped) / n:.1f}%)")
    for kind, cases in (("wrong", wrong), ("dropped", dropped)):
        for src, hyp in cases[:5]:
            print(f"  {kind}: {src} => {hyp}")


if __name__ == "__main__":
    main()
