#!/usr/bin/python3
"""The PyTorch side of the differential test (README.md): reads what torch_diff wrote, recomputes
every case in torch.float64 from the same inputs (and, for layers, the same weights, copied by
name), the loss L = sum_k sum(R_k * y_k) with tapegrad's projections R_k, its gradients, and
prints, per case, the largest absolute and relative difference of the outputs and of the
gradients, then a table. Exit status 1 when a case differs by more than --tol (default 1e-10).

    /usr/bin/python3 bench/torch_diff/torch_diff.py /tmp/torch_diff/torch_diff.txt
"""
import argparse
import math
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
warnings.filterwarnings("ignore", message="reduction: .mean. divides")
RED = ["mean", "sum", "none", "batchmean"]


NOTES = [
    "smooth_l1 beta = 0: reference is F.l1_loss, PyTorch >= 2.0's definition (1.13's kernel "
    "gives input and target gradient -1 each at d = 0; tapegrad and 2.x give 0)",
    "kl_div log_target=False: target gradient where target = 0 is NaN in torch 1.13 (xlogy's "
    "0/0), 0 in tapegrad and in torch <= 1.12 (kl_div_target_backward's mask); not compared",
]
NOTE_COUNT = [0, 0]


def parse(path):
    cases, cur = [], None
    with open(path) as f:
        lines = iter(f.read().split("\n"))
        for line in lines:
            if line.startswith("case "):
                cur = {"name": line[5:], "a": {}, "t": {}}
            elif line.startswith("a "):
                _, k, v = line.split()
                cur["a"][k] = float(v)
            elif line.startswith("t "):
                p = line.split()
                shape = [int(s) for s in p[3:3 + int(p[2])]]
                vals = next(lines).split()
                cur["t"][p[1]] = np.array([float(v) for v in vals], dtype=np.float64).reshape(shape)
            elif line == "end":
                cases.append(cur)
    return cases


def group(c, kind):
    n = len(kind) + 1
    return {k[n:]: v for k, v in c["t"].items() if k.startswith(kind + ":")}


# ---- the cases: each returns (outputs {name: tensor}, extra {C name: tensor whose .grad is
# compared}, backward?) from the inputs X (leaves; requires_grad where C wrote a gradient) ----

def op_case(name, a, X, I):
    x = X.get("x")
    if name == "abs":
        return {"y": torch.abs(x)}
    if name == "log1p":
        return {"y": torch.log1p(x)}
    if name == "silu":
        return {"y": F.silu(x)}
    if name == "leaky_relu":
        return {"y": F.leaky_relu(x, a["slope"])}
    if name == "elu":
        return {"y": F.elu(x, a["alpha"])}
    if name.startswith("softplus"):
        return {"y": F.softplus(x, a["beta"], a["threshold"])}
    if name.startswith("pow_scalar"):
        return {"y": torch.pow(x, a["p"])}
    if name.startswith("pow_tensor"):
        return {"y": torch.pow(X["a"], X["b"])}
    if name.startswith("clamp"):
        lo = None if a["min"] == -math.inf else a["min"]
        hi = None if a["max"] == math.inf else a["max"]
        return {"y": torch.clamp(x, lo, hi)}
    if name.startswith("maximum"):
        return {"y": torch.maximum(X["a"], X["b"])}
    if name.startswith("minimum"):
        return {"y": torch.minimum(X["a"], X["b"])}
    if name == "where":
        return {"y": torch.where(X["cond"] != 0, X["a"], X["b"])}
    if name == "masked_fill":
        return {"y": x.masked_fill(X["mask"] != 0, a["value"])}
    ax = int(a.get("axis", 0))
    dims = None if ax == -100 else ax
    if name.startswith("logsumexp"):
        kd = bool(a["keepdim"])
        if dims is None:
            y = torch.logsumexp(x.reshape(-1), 0)
            return {"y": y.reshape([1] * x.dim()) if kd else y}
        return {"y": torch.logsumexp(x, dims, keepdim=kd)}
    if name.startswith("max_dim") or name.startswith("min_dim"):
        f = torch.max if name.startswith("max") else torch.min
        v, i = f(x, 1, keepdim=bool(a["keepdim"]))
        return {"y": v, "idx:indices": i.reshape(-1)}
    if name.startswith("amax") or name.startswith("amin"):
        f = torch.amax if name.startswith("amax") else torch.amin
        return {"y": f(x) if dims is None else f(x, dims)}
    if name.startswith("var") or name.startswith("std"):
        sd = name.startswith("std")
        corr = int(a["correction"])
        f = torch.std if sd else torch.var
        if dims is None:
            y = f(x.reshape(-1), 0, correction=corr)
            return {"y": y.reshape(1, 1) if sd else y}  # std was asked with keepdim
        return {"y": f(x, dims, correction=corr, keepdim=sd)}
    if name.startswith("stack"):
        return {"y": torch.stack([X["x0"], X["x1"], X["x2"]], int(a["axis"]))}
    if name.startswith("index_select"):
        return {"y": torch.index_select(x, int(name[-1]), I["index"])}
    if name.startswith("gather"):
        return {"y": torch.gather(x, int(name[-1]), I["index"])}
    red = RED[int(a.get("reduction", 0))]
    if name.startswith("l1_loss"):
        return {"y": F.l1_loss(x, X["y"], reduction=red)}
    if name.startswith("smooth_l1"):
        if a["beta"] == 0:  # PyTorch >= 2.0's definition (NOTES[0]); 1.13's kernel differs at d = 0
            return {"y": F.l1_loss(x, X["y"], reduction=red)}
        return {"y": F.smooth_l1_loss(x, X["y"], reduction=red, beta=a["beta"])}
    if name.startswith("huber"):
        return {"y": F.huber_loss(x, X["y"], reduction=red, delta=a["delta"])}
    if name.startswith("kl_div"):
        return {"y": F.kl_div(x, X["t"], reduction=red, log_target=bool(a["log_target"]))}
    return None


def layer_case(name, a, X, I):
    x = X.get("x")
    if name.startswith("conv1d"):
        return {"y": F.conv1d(x, X["conv.weight"], X["conv.bias"], int(a["stride"]),
                              int(a["padding"]), int(a["dilation"]), int(a["groups"]))}
    if name.startswith("conv2d"):
        p = lambda k: (int(a[k + "0"]), int(a[k + "1"]))
        return {"y": F.conv2d(x, X["conv.weight"], X["conv.bias"], p("stride"), p("padding"),
                              p("dilation"), int(a["groups"]))}
    if "_pool" in name:
        k, s, p = int(a["kernel"]), int(a["stride"]) or None, int(a["padding"])
        f = {"max_pool1d": F.max_pool1d, "max_pool2d": F.max_pool2d,
             "avg_pool1d": F.avg_pool1d, "avg_pool2d": F.avg_pool2d}[name[:10]]
        return {"y": f(x, k, s, p)}
    return None


def rnn_case(name, a, X, I):
    gru = name.startswith("gru")
    bf, bi = bool(a["batch_first"]), bool(a["bidirectional"])
    cls = torch.nn.GRU if gru else torch.nn.LSTM
    m = cls(3, 4, num_layers=2, batch_first=bf, bidirectional=bi)
    with torch.no_grad():
        for n, p in m.named_parameters():
            p.copy_(torch.from_numpy(X["rnn." + n].detach().numpy()))
    extra = {"rnn." + n: p for n, p in m.named_parameters()}
    x = X["x"]
    T = x.shape[1] if bf else x.shape[0]
    state = None
    if a["h0"]:
        state = X["h0"] if gru else (X["h0"], X["c0"])
    if a["lengths"]:
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, I["lengths"], batch_first=bf,
                                                         enforce_sorted=False)
        y, st = m(packed, state)
        y, _ = torch.nn.utils.rnn.pad_packed_sequence(y, batch_first=bf, total_length=T)
    else:
        y, st = m(x, state)
    if gru:
        return {"y": y, "h_n": st}, extra
    return {"y": y, "h_n": st[0], "c_n": st[1]}, extra


def batchnorm_case(name, a, X, I):
    m = torch.nn.BatchNorm1d(3, eps=1e-5, momentum=0.1)
    with torch.no_grad():
        for n in ["weight", "bias", "running_mean", "running_var"]:
            getattr(m, n).copy_(torch.from_numpy(X["bn." + n if n in ("weight", "bias") else n]
                                                 .detach().numpy()))
    outs = {}
    for k in range(3):
        m.train(k < 2)
        outs["y%d" % k] = m(X["x%d" % k])
    outs["running_mean"] = m.running_mean.clone()
    outs["running_var"] = m.running_var.clone()
    outs["num_batches_tracked"] = m.num_batches_tracked.to(torch.float64)
    return outs, {"bn.weight": m.weight, "bn.bias": m.bias}


def optim_case(name, X, R):
    P = {n: X[n].detach().clone().requires_grad_(n != "c.weight")
         for n in ["a.weight", "a.bias", "b.weight", "c.weight"]}
    g0 = {"params": [P["a.weight"], P["a.bias"], P["c.weight"]]}
    g1 = {"params": [P["b.weight"]]}
    if name == "sgd_groups":
        g1.update(lr=0.03, weight_decay=0.05, momentum=0.5, dampening=0.1, nesterov=False)
        opt = torch.optim.SGD([g0, g1], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
    else:
        g1.update(lr=0.02, weight_decay=0.1, betas=(0.8, 0.99), eps=1e-6)
        cls = torch.optim.AdamW if name == "adamw_groups" else torch.optim.Adam
        opt = cls([g0, g1], lr=0.05, betas=(0.9, 0.999), eps=1e-8,
                  weight_decay=0.01 if name == "adamw_groups" else 0.02)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0 / (1.0 + 0.5 * e))
    outs = {}
    for s in range(1, 4):
        opt.zero_grad()
        loss = sum((torch.from_numpy(R["step%d:%s" % (s, n)]) * p * p * p).sum()
                   for n, p in P.items())
        loss.backward()
        opt.step()
        sched.step()
        for n, p in P.items():
            outs["step%d:%s" % (s, n)] = p.detach().clone()
    return outs


def diff(mine, ref):
    """(max |a - b|, max |a - b| / max(|b|, 1e-6)); NaNs at the same places are equal."""
    a, b = np.asarray(mine, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    if a.shape != b.shape:
        if a.size != b.size:
            return math.inf, math.inf
        a = a.reshape(b.shape)
    same = (np.isnan(a) & np.isnan(b)) | (a == b)
    d = np.where(same, 0.0, np.abs(a - b))
    d = np.where(np.isnan(d), math.inf, d)
    if d.size == 0:
        return 0.0, 0.0
    return float(d.max()), float((d / np.maximum(np.abs(np.nan_to_num(b)), 1e-6)).max())


def run_case(c):
    name, a, T = c["name"], c["a"], c["t"]
    ins, grads, outs_c, R = group(c, "in"), group(c, "grad"), group(c, "out"), group(c, "R")
    I = {k: torch.from_numpy(v.astype(np.int64)) for k, v in group(c, "idx").items()}
    X = {k: torch.tensor(v, requires_grad=k in grads) for k, v in ins.items()}
    extra = {}
    if name.endswith("_groups"):
        outs = optim_case(name, X, R)
        R = {}
    elif name.startswith(("lstm", "gru")):
        outs, extra = rnn_case(name, a, X, I)
    elif name.startswith("batchnorm"):
        outs, extra = batchnorm_case(name, a, X, I)
    else:
        outs = op_case(name, a, X, I) or layer_case(name, a, X, I)
        if outs is None:
            raise SystemExit("torch_diff.py: no reference for case " + name)
    if R:
        loss = sum((torch.from_numpy(R[k]) * outs[k]).sum() for k in R)
        loss.backward()
    if name.startswith("kl_div") and not a["log_target"] and X["t"].grad is not None:
        # NOTES[1]: torch's target gradient is 0/0 = NaN where target = 0 (xlogy's backward);
        # tapegrad's is 0 by definition. Compared elsewhere; counted.
        zero = X["t"].detach() == 0
        NOTE_COUNT[1] += int(zero.sum())
        X["t"].grad[zero] = 0.0
    rows = []  # (what, abs, rel)
    for k, v in outs_c.items():
        rows.append(("out:" + k,) + diff(v, outs[k].detach().numpy()))
    for k, v in group(c, "idx").items():
        if "idx:" + k in outs:
            rows.append(("idx:" + k,) + diff(v, outs["idx:" + k].numpy()))
    for k, v in grads.items():
        t = extra.get(k, X.get(k))
        g = t.grad if t is not None and t.grad is not None else torch.zeros(v.shape)
        rows.append(("grad:" + k,) + diff(v, g.numpy()))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--tol", type=float, default=1e-10, help="largest accepted abs difference")
    ap.add_argument("-v", "--verbose", action="store_true", help="every compared tensor")
    args = ap.parse_args()
    cases = parse(args.file)
    table, bad = [], []
    for c in cases:
        rows = run_case(c)
        fo = [r for r in rows if r[0].startswith(("out", "idx"))]
        fg = [r for r in rows if r[0].startswith("grad")]
        mo = max((r[1] for r in fo), default=0.0), max((r[2] for r in fo), default=0.0)
        mg = max((r[1] for r in fg), default=0.0), max((r[2] for r in fg), default=0.0)
        table.append((c["name"], mo, mg))
        worst = max(mo[0], mg[0])
        if worst > args.tol or args.verbose:
            for r in rows:
                if r[1] > args.tol or args.verbose:
                    print("%-32s %-28s abs %.3e rel %.3e" % (c["name"], r[0], r[1], r[2]))
        if worst > args.tol:
            bad.append(c["name"])
    print("\n%-34s %11s %11s %11s %11s" % ("case", "out abs", "out rel", "grad abs", "grad rel"))
    for n, mo, mg in table:
        print("%-34s %11.2e %11.2e %11.2e %11.2e%s" % (n, mo[0], mo[1], mg[0], mg[1],
                                                        "  <-- DIFFERS" if n in bad else ""))
    allo = max(t[1][0] for t in table), max(t[2][0] for t in table)
    print("\n%d cases (torch %s); largest abs difference: outputs %.2e, gradients %.2e; "
          "%d above %.0e%s" % (len(table), torch.__version__, allo[0], allo[1], len(bad), args.tol,
                               (": " + ", ".join(bad)) if bad else ""))
    print("notes: " + "; ".join("[%d] %s (%d positions)" % (i, n, NOTE_COUNT[i]) if i else
                                "[%d] %s" % (i, n) for i, n in enumerate(NOTES)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
