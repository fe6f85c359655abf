"""valid_curve.py -- the validation curve of a finished run, in the standard score, from the
copies of its checkpoint that `train --keep-checkpoints N` kept: docs/benchmarks.md ("The hour
of `--preset full` with subwords").

Usage (python3, standard library only):

    python3 bench/valid_curve.py PROGRAM CSV_OUT SVG_OUT CHECKPOINT... [-- EVAL_FLAGS...]

For every CHECKPOINT (in the order of its training time), runs
`PROGRAM eval --checkpoint CHECKPOINT --split valid --beam 1 EVAL_FLAGS...` (greedy, as the
validations during training decode; `--data FILE` among EVAL_FLAGS when the data file is not
found by default) and reads its two score lines. The training time of a checkpoint is the sum of
the seconds its metadata records (`train.history`: loss, tokens, seconds per finished epoch;
`train.epoch_partial`: batches, loss, tokens, seconds of the epoch under way): the time spent in
training steps, without data loading, validations and saves. Writes CSV_OUT (step, training
minutes, sacreBLEU, chrF, the book's BLEU-4) and SVG_OUT, sacreBLEU against training minutes.
"""
import json
import os
import re
import struct
import subprocess
import sys


def metadata(path):
    """The __metadata__ of a safetensors file (8-byte little-endian header length, JSON)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {})


def training_seconds(meta, path):
    secs = 0.0
    for line in meta.get("train.history", "").splitlines():
        if line.strip():
            secs += float(line.split()[2])
    partial = meta.get("train.epoch_partial", "").split()
    if len(partial) != 4:
        sys.exit(f"{path}: metadata train.epoch_partial: expected 4 numbers, got {partial}")
    return secs + float(partial[3])


def score(program, path, flags):
    cmd = [program, "eval", "--checkpoint", path, "--split", "valid", "--beam", "1"] + flags
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
    book = re.search(r"^corpus BLEU-4 ([0-9.]+)", out.stdout, re.M)
    std = re.search(r"^sacreBLEU ([0-9.]+) \(.*\), chrF ([0-9.]+)", out.stdout, re.M)
    if not book or not std:
        sys.exit(f"{' '.join(cmd)}: no score lines in its output:\n{out.stdout}")
    return float(std.group(1)), float(std.group(2)), float(book.group(1))


def svg(points, path):
    """A line of (minutes, sacreBLEU) on axes from 0, ticks every 10 minutes and 10 points."""
    W, H, L, B = 640, 400, 50, 40
    xmax = max(10, 10 * -(-max(p[0] for p in points) // 10))
    ymax = max(10, 10 * -(-max(p[1] for p in points) // 10))
    X = lambda x: L + (W - L - 20) * x / xmax
    Y = lambda y: H - B - (H - B - 20) * y / ymax
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
         'font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>']
    for t in range(0, int(xmax) + 1, 10):
        s.append(f'<line x1="{X(t)}" y1="{Y(0)}" x2="{X(t)}" y2="{Y(ymax)}" stroke="#ddd"/>')
        s.append(f'<text x="{X(t)}" y="{H - B + 16}" text-anchor="middle">{t}</text>')
    for v in range(0, int(ymax) + 1, 10):
        s.append(f'<line x1="{X(0)}" y1="{Y(v)}" x2="{X(xmax)}" y2="{Y(v)}" stroke="#ddd"/>')
        s.append(f'<text x="{L - 6}" y="{Y(v) + 4}" text-anchor="end">{v}</text>')
    s.append(f'<text x="{(W + L) / 2}" y="{H - 6}" text-anchor="middle">training minutes</text>')
    s.append(f'<text x="14" y="{(H - B) / 2}" text-anchor="middle" '
             f'transform="rotate(-90 14 {(H - B) / 2})">validation sacreBLEU (greedy)</text>')
    pts = " ".join(f"{X(m):.1f},{Y(b):.1f}" for m, b in points)
    s.append(f'<polyline points="{pts}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    for m, b in points:
        s.append(f'<circle cx="{X(m):.1f}" cy="{Y(b):.1f}" r="3" fill="#1f77b4"/>')
    s.append("</svg>")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(s) + "\n")
    os.replace(path + ".tmp", path)


def main():
    args = sys.argv[1:]
    flags = []
    if "--" in args:
        flags = args[args.index("--") + 1:]
        args = args[: args.index("--")]
    if len(args) < 4:
        sys.exit(__doc__)
    program, csv_out, svg_out, paths = args[0], args[1], args[2], args[3:]
    rows = []
    for p in paths:
        meta = metadata(p)
        rows.append((int(meta.get("train.steps", 0)), training_seconds(meta, p) / 60, p))
    rows.sort()
    lines, points = ["step,training_minutes,sacrebleu,chrf,bleu4_d2l"], []
    for step, minutes, p in rows:
        sb, chrf, b4 = score(program, p, flags)
        lines.append(f"{step},{minutes:.2f},{sb:.2f},{chrf:.2f},{b4:.2f}")
        points.append((minutes, sb))
        print(lines[-1], flush=True)
    with open(csv_out + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(csv_out + ".tmp", csv_out)
    svg(points, svg_out)


if __name__ == "__main__":
    main()
