"""train_big_torch.py -- PyTorch training of d2l's Transformer at the big shape on the whole
English-French corpus: the PyTorch side of docs/benchmarks.md, "Training the big Transformer
against PyTorch: FLOP/s and share of peak".

Usage (PyTorch 1.13 of Debian's python3-torch; no other package):

    /usr/bin/python3 bench/train_big_torch.py FRA_TXT [--threads N] [--warmup W] [--steps S]
        [--batch-size 128] [--num-steps 20] [--hiddens 256] [--ffn-hiddens 1024] [--heads 8]
        [--layers 3] [--seed 0]

It trains what `transformer_nmt train --num-examples 0 --num-steps 20 --batch-size 128
--hiddens 256 --ffn-hiddens 1024 --heads 8 --layers 3` trains, with that command's defaults
(docs/zoo.md): every pair of FRA_TXT, d2l's preprocessing (no-break spaces made spaces,
lowercased, a space before , . ! ? not preceded by one), words split on spaces, vocabularies of
the tokens seen at least twice (min_freq 2) after <unk> <pad> <bos> <eos>; each sentence's ids
then <eos> when there is room, cut or padded to num_steps; shuffled batches of 128 pairs.
The model is d2l's Transformer as zoo/models/transformer.c computes it: embeddings scaled by
sqrt(d_model), sinusoidal positions, dropout 0.1 (after the positions, on the attention
weights, on every sublayer's output before AddNorm), multi-head attention without biases whose
masked keys score -1e6 (the decoder's self-attention causal), post-LN AddNorm (eps 1e-5), a
ReLU FFN, a dense output layer. The step is d2l's train_seq2seq: the decoder input is <bos>
then the target shifted right; the loss is each sentence's masked softmax cross-entropy
averaged over its num_steps positions, summed over the batch; backward; the gradients clipped
to global norm 1 (d2l's grad_clipping); Adam, lr 0.005, betas 0.9 / 0.999.

Prints: the vocabulary sizes; the BLAS library the process mapped (from /proc/self/maps); the
loss of every step (d2l's running loss: the per-sentence losses so far / the valid target
tokens so far, transformer_nmt's progress-line loss; its own shuffle and initialisation, so
the values agree in range, not digit for digit); after W warm-up steps, S timed steps: valid
target tokens/s (a sentence's valid length is its tokens + <eos>, as datasets/fra_batches.c
counts it), ms/step, the process's CPU seconds per step (all threads), the peak RSS, and the
GFLOP/s of the step's products, whose multiply-adds it counts from the shapes first
(step_macs: every product of the forward pass, attention's and the output layer's included,
and twice that for the backward).
"""
import argparse
import collections
import math
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from decode_torch import preprocess


def read_pairs(path):
    """Token lists of every pair: d2l's read_data_nmt, preprocess_nmt, tokenize_nmt."""
    try:
        with open(path, encoding="utf-8") as f:
            text = preprocess(f.read())
    except OSError as e:
        sys.exit(f"{path}: {e.strerror}")
    src, tgt = [], []
    for line in text.split("\n"):
        parts = line.split("\t")
        if len(parts) >= 2:
            src.append(parts[0].split(" "))
            tgt.append(parts[1].split(" "))
    if not src:
        sys.exit(f"{path}: no tab-separated pairs")
    return src, tgt


class Vocab:
    """d2l's Vocab: <unk>, the reserved tokens, then by descending frequency (ties in order of
    first appearance) every token seen at least min_freq times."""

    def __init__(self, lines, min_freq=2):
        counts = collections.Counter(t for line in lines for t in line)
        self.itos = ["<unk>", "<pad>", "<bos>", "<eos>"]
        for tok, n in sorted(counts.items(), key=lambda kv: kv[1], reverse=True):
            if n >= min_freq and tok not in self.itos:
                self.itos.append(tok)
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    def arrays(self, lines, T):
        """(ids (n, T), valid lengths (n,)): tokens + <eos> cut or padded to T; the length
        counts the tokens and <eos> even past T (datasets/fra_batches.c)."""
        pad, eos, get = self.stoi["<pad>"], self.stoi["<eos>"], self.stoi.get
        rows = []
        for line in lines:
            row = [get(t, 0) for t in line[:T]] + [eos]
            rows.append(row[:T] + [pad] * (T - len(row)))
        lens = [len(line) + 1 for line in lines]
        return torch.tensor(rows, dtype=torch.long), torch.tensor(lens, dtype=torch.long)


def positions(max_len, d):
    """P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(...): computed in float64."""
    i = torch.arange(max_len, dtype=torch.float64)[:, None]
    x = i / torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float64) / d)
    P = torch.zeros(max_len, d, dtype=torch.float64)
    P[:, 0::2] = torch.sin(x)
    P[:, 1::2] = torch.cos(x[:, : d // 2])
    return P.float()


class MHA(nn.Module):
    """d2l's MultiHeadAttention (no biases) over DotProductAttention with masked_softmax."""

    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.drop = nn.Dropout(dropout)

    def split(self, x):  # (B, T, d) -> (B, h, T, d/h)
        B, T, d = x.shape
        return x.view(B, T, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, q, k, v, mask):
        """mask (B or 1, 1, Tq or 1, Tk): True where a key is masked."""
        q, k, v = self.split(self.W_q(q)), self.split(self.W_k(k)), self.split(self.W_v(v))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        w = torch.softmax(s.masked_fill(mask, -1e6), dim=-1)
        o = torch.matmul(self.drop(w), v)
        B, _, T, _ = o.shape
        return self.W_o(o.transpose(1, 2).reshape(B, T, -1))


class AddNorm(nn.Module):
    def __init__(self, d, dropout):
        super().__init__()
        self.ln, self.drop = nn.LayerNorm(d, eps=1e-5), nn.Dropout(dropout)

    def forward(self, x, y):
        return self.ln(self.drop(y) + x)


class FFN(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.dense1, self.dense2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        return self.dense2(F.relu(self.dense1(x)))


class Block(nn.Module):
    """An encoder block (self-attention, FFN) or, with cross=True, a decoder block (causal
    self-attention, attention to the encoder's outputs, FFN)."""

    def __init__(self, d, ffn, heads, dropout, cross):
        super().__init__()
        self.att1, self.norm1 = MHA(d, heads, dropout), AddNorm(d, dropout)
        if cross:
            self.att2, self.norm2 = MHA(d, heads, dropout), AddNorm(d, dropout)
        self.cross = cross
        self.ffn, self.norm3 = FFN(d, ffn), AddNorm(d, dropout)

    def forward(self, x, mask, enc=None, enc_mask=None):
        x = self.norm1(x, self.att1(x, x, x, mask))
        if self.cross:
            x = self.norm2(x, self.att2(x, enc, enc, enc_mask))
        return self.norm3(x, self.ffn(x))


class Transformer(nn.Module):
    def __init__(self, vs, vt, d, ffn, heads, layers, dropout, max_len=1000):
        super().__init__()
        self.d = d
        self.enc_emb, self.dec_emb = nn.Embedding(vs, d), nn.Embedding(vt, d)
        self.enc = nn.ModuleList(Block(d, ffn, heads, dropout, False) for _ in range(layers))
        self.dec = nn.ModuleList(Block(d, ffn, heads, dropout, True) for _ in range(layers))
        self.dense = nn.Linear(d, vt)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("P", positions(max_len, d))
        for m in self.modules():  # tapegrad's Linear: Xavier-uniform weights (d2l's init)
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)

    def embed(self, emb, ids):
        return self.drop(emb(ids) * math.sqrt(self.d) + self.P[: ids.shape[1]])

    def forward(self, src, src_len, dec_in):
        Ts, T = src.shape[1], dec_in.shape[1]
        src_mask = (torch.arange(Ts)[None, :] >= src_len[:, None])[:, None, None, :]
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)[None, None]
        x = self.embed(self.enc_emb, src)
        for b in self.enc:
            x = b(x, src_mask)
        y = self.embed(self.dec_emb, dec_in)
        for b in self.dec:
            y = b(y, causal, x, src_mask)
        return self.dense(y)


def train_step(net, opt, batch, bos, clip):
    """d2l's train_seq2seq step; returns the sum of the batch's per-sentence losses."""
    src, src_len, tgt, tgt_len = batch
    dec_in = torch.cat([torch.full((tgt.shape[0], 1), bos, dtype=torch.long), tgt[:, :-1]], 1)
    logits = net(src, src_len, dec_in)
    ce = F.cross_entropy(logits.permute(0, 2, 1), tgt, reduction="none")
    mask = torch.arange(tgt.shape[1])[None, :] < tgt_len[:, None]
    loss = (ce * mask).mean(dim=1).sum()
    opt.zero_grad(set_to_none=False)
    loss.backward()
    params = [p for p in net.parameters() if p.grad is not None]
    norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
    if norm > clip:
        for p in params:
            p.grad.mul_(clip / norm)
    opt.step()
    return float(loss)


def step_macs(B, T, d, ffn, layers, V, heads):
    """Multiply-adds of the products of one training step, from the shapes (source and target
    both T steps, every position computed): {part: forward multiply-adds}. Each product's
    backward is two products of its size (the gradients of both operands; the embeddings'
    lookups are no product), so a step is 3x the forward sum. Not counted: softmax, LayerNorm,
    dropout, ReLU, the additions, the loss's exp/log, clipping and Adam (O(elements), not
    O(elements x width))."""
    R, dh = B * T, d // heads
    proj = R * d * d  # one d x d projection of every position
    att = B * heads * T * T * dh  # Q K^T, and the same again for weights x V
    return {
        "encoder attention projections (q k v o)": layers * 4 * proj,
        "decoder attention projections (2 x q k v o)": layers * 8 * proj,
        "attention scores and weighted values (3 attentions a layer pair)": layers * 3 * 2 * att,
        "FFN (two products a block)": 2 * layers * 2 * R * d * ffn,
        "output layer": R * d * V,
    }


def print_macs(a, V):
    parts = step_macs(a.batch_size, a.num_steps, a.hiddens, a.ffn_hiddens, a.layers, V, a.heads)
    fwd = sum(parts.values())
    for name, n in parts.items():
        print(f"  forward {name}: {n / 1e9:.3f} G multiply-adds")
    print(f"products of a step: forward {fwd / 1e9:.3f} G multiply-adds, forward + backward "
          f"{3 * fwd / 1e9:.2f} G = {6 * fwd / 1e9:.1f} GFLOP")
    return 6 * fwd


def blas_mapped():
    """The BLAS/LAPACK shared objects this process mapped (the answer to 'which BLAS ran')."""
    names = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if any(k in path for k in ("blas", "blis", "lapack", "mkl")):
                names.add(os.path.realpath(path))
    return sorted(names) or ["none"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fra_txt")
    for name, default in (("threads", 1), ("warmup", 5), ("steps", 20), ("batch-size", 128),
                          ("num-steps", 20), ("hiddens", 256), ("ffn-hiddens", 1024),
                          ("heads", 8), ("layers", 3), ("seed", 0)):
        ap.add_argument("--" + name, type=int, default=default)
    a = ap.parse_args()
    for name in ("threads", "steps", "batch_size", "num_steps", "hiddens", "heads", "layers",
                 "ffn_hiddens"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(a, name)}: expected an integer >= 1")
    if a.warmup < 0:
        ap.error(f"--warmup {a.warmup}: expected an integer >= 0")
    if a.hiddens % a.heads:
        ap.error(f"--hiddens {a.hiddens} is not a multiple of --heads {a.heads}")
    return a


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    src_lines, tgt_lines = read_pairs(a.fra_txt)
    need = (a.warmup + a.steps) * a.batch_size
    if len(src_lines) < need:
        sys.exit(f"{a.fra_txt}: {len(src_lines)} pairs, fewer than the {need} of "
                 f"{a.warmup + a.steps} steps of {a.batch_size} (one epoch is the most it runs)")
    vs, vt = Vocab(src_lines), Vocab(tgt_lines)
    src, src_len = vs.arrays(src_lines, a.num_steps)
    tgt, tgt_len = vt.arrays(tgt_lines, a.num_steps)
    print(f"pairs {len(src_lines)}, vocabularies {len(vs.itos)} source, {len(vt.itos)} target")
    net = Transformer(len(vs.itos), len(vt.itos), a.hiddens, a.ffn_hiddens, a.heads, a.layers, 0.1)
    net.train()
    print(f"parameters {sum(p.numel() for p in net.parameters()):,}")
    flops = print_macs(a, len(vt.itos))
    opt = torch.optim.Adam(net.parameters(), lr=0.005, betas=(0.9, 0.999))
    order = torch.randperm(len(src_lines))
    bos = vt.stoi["<bos>"]
    loss_sum = tokens = timed_tokens = 0
    for step in range(1, a.warmup + a.steps + 1):
        if step == a.warmup + 1:
            t0, c0 = time.perf_counter(), time.process_time()
        rows = order[(step - 1) * a.batch_size: step * a.batch_size]
        batch = (src[rows], src_len[rows], tgt[rows], tgt_len[rows])
        loss_sum += train_step(net, opt, batch, bos, 1.0)
        n = int(tgt_len[rows].sum())
        tokens += n
        if step > a.warmup:
            timed_tokens += n
        print(f"step {step} loss {loss_sum / tokens:.4f}", flush=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"blas: {', '.join(blas_mapped())}")
    print(f"threads {a.threads}: {a.steps} timed steps after {a.warmup}: "
          f"{timed_tokens / wall:.1f} valid target tokens/s, {1000 * wall / a.steps:.1f} ms/step, "
          f"CPU {cpu / a.steps:.3f} s/step, peak RSS {peak:.0f} MiB, "
          f"{flops * a.steps / wall / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
