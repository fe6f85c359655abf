#!/usr/bin/env python3
"""Paired bootstrap resampling (Koehn, 2004) of sacreBLEU between two systems on one test set.

    bench/bleu_bootstrap.py A.tsv B.tsv [--samples 1000] [--seed 12345]

A.tsv and B.tsv are `eval --out` files of the same split (one line a sentence: source,
reference, translation, tab-separated; the same sources and references in the same order).
Prints each system's corpus BLEU (sacreBLEU's defaults: 13a tokenization, cased, one
reference, exponential smoothing; the same figure `eval` prints), B - A, and over the resampled
test sets (sentences drawn with replacement, the same draws for both systems) the 95% interval
of B - A and how often B scores above A: a difference whose interval holds 0 is within what
the test set's sampling explains.

Standard library and numpy only (no sacrebleu module needed): the tokenizer and the BLEU
below follow sacreBLEU 2.x (tokenizer_13a.py, metrics/bleu.py).
"""
import argparse
import math
import re
import sys

import numpy as np

_13A = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
]


def tok13a(line):
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        for a, b in (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">")):
            line = line.replace(a, b)
    line = f" {line} "
    for r, s in _13A:
        line = r.sub(s, line)
    return line.split()


def ngrams(words, n):
    counts = {}
    for i in range(len(words) - n + 1):
        g = tuple(words[i : i + n])
        counts[g] = counts.get(g, 0) + 1
    return counts


def sentence_stats(hyp, ref):
    """[hyp_len, ref_len, match_1..4, total_1..4] of one sentence."""
    h, r = tok13a(hyp), tok13a(ref)
    row = [len(h), len(r)]
    matches, totals = [], []
    for n in range(1, 5):
        hc, rc = ngrams(h, n), ngrams(r, n)
        matches.append(sum(min(c, rc.get(g, 0)) for g, c in hc.items()))
        totals.append(max(len(h) - n + 1, 0))
    return row + matches + totals


def corpus_bleu(s):
    """BLEU from summed stats (sacreBLEU: smooth 'exp', max order 4)."""
    hyp_len, ref_len, m, t = s[0], s[1], s[2:6], s[6:10]
    if hyp_len == 0:
        return 0.0
    log_p, k = 0.0, 1.0
    for n in range(4):
        if t[n] == 0:
            return 0.0  # sacreBLEU: fewer hypothesis words than the order
        if m[n] == 0:
            k *= 2
            log_p += math.log(100.0 / (k * t[n]))
        else:
            log_p += math.log(100.0 * m[n] / t[n])
    bp = 1.0 if hyp_len >= ref_len else math.exp(1 - ref_len / hyp_len)
    return bp * math.exp(log_p / 4)


def read(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                sys.exit(f"{path}:{i}: expected 3 tab-separated fields, got {len(parts)}")
            rows.append(parts)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=12345)
    args = ap.parse_args()
    a, b = read(args.a), read(args.b)
    if len(a) != len(b) or any(x[:2] != y[:2] for x, y in zip(a, b)):
        sys.exit(f"{args.a}, {args.b}: not the same sources and references in the same order")
    sa = np.array([sentence_stats(r[2], r[1]) for r in a], dtype=np.int64)
    sb = np.array([sentence_stats(r[2], r[1]) for r in b], dtype=np.int64)
    bleu_a, bleu_b = corpus_bleu(sa.sum(0)), corpus_bleu(sb.sum(0))
    rng = np.random.default_rng(args.seed)
    diffs = np.empty(args.samples)
    for k in range(args.samples):
        idx = rng.integers(0, len(a), len(a))
        diffs[k] = corpus_bleu(sb[idx].sum(0)) - corpus_bleu(sa[idx].sum(0))
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    print(f"A {args.a}: sacreBLEU {bleu_a:.2f}")
    print(f"B {args.b}: sacreBLEU {bleu_b:.2f}")
    print(
        f"B - A = {bleu_b - bleu_a:+.2f}; {args.samples} paired resamples of {len(a)} sentences: "
        f"95% interval [{lo:+.2f}, {hi:+.2f}], B above A in {np.mean(diffs > 0) * 100:.1f}%"
    )


if __name__ == "__main__":
    main()
