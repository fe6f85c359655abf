#!/usr/bin/env python3
"""number_probe.py -- does a translator copy the numbers it is given?

fra.txt holds few numbers (about 1,100 of its 167,130 lines have a digit), so the held-out
splits have a dozen sentences with one, too few to measure. This probe writes English
sentences in the corpus's style whose numbers French writes the same way (years, ages,
counts, prices, room and bus numbers: integers, no decimals, no times of day), translates them
with `transformer_nmt translate`, and counts, per sentence, by the digit strings of the output:

  copied  the output's digit strings are the source's (as a multiset)
  wrong   the output has a digit string the source does not (a number changed)
  dropped no digit string at all (the number spelled out in words, or lost)

usage: bench/number_probe.py BINARY CHECKPOINT [N [SEED]] [-- translate flags...]
  N sentences (default 300) from SEED (default 1); prints the three counts and the first wrong
  translations. Deterministic for N and SEED.
"""
import random
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

RANGES = {"year": (1900, 2030), "age": (21, 99), "count": (21, 999), "room": (100, 999),
          "bus": (10, 99)}


def sentences(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text, kind = TEMPLATES[rng.randrange(len(TEMPLATES))]
        lo, hi = RANGES[kind]
        value = rng.randint(lo, hi)
        out.append((text.format(**{kind: value}), str(value)))
    return out


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        k = args.index("--")
        args, extra = args[:k], args[k + 1:]
    if len(args) < 2:
        sys.exit(__doc__)
    binary, ckpt = args[0], args[1]
    n = int(args[2]) if len(args) > 2 else 300
    seed = int(args[3]) if len(args) > 3 else 1
    probe = sentences(n, seed)
    run = subprocess.run([binary, "translate", "--checkpoint", ckpt] + extra,
                         input="".join(s + "\n" for s, _ in probe), capture_output=True,
                         text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"{binary} translate failed:\n{run.stderr}")
    outputs = run.stdout.split("\n")[:n]
    if len(outputs) != n:
        sys.exit(f"expected {n} translations, got {len(outputs)}")
    copied, wrong, dropped = 0, [], 0
    for (src, number), hyp in zip(probe, outputs):
        found = re.findall(r"\d+", hyp)
        if sorted(found) == [number]:
            copied += 1
        elif not found:
            dropped += 1
        else:
            wrong.append((src, hyp))
    print(f"{n} sentences: copied {copied} ({100 * copied / n:.1f}%), wrong {len(wrong)} "
          f"({100 * len(wrong) / n:.1f}%), dropped {dropped} ({100 * dropped / n:.1f}%)")
    for src, hyp in wrong[:10]:
        print(f"  {src} => {hyp}")


if __name__ == "__main__":
    main()
