#!/usr/bin/env python3
"""Batched greedy decoding of the big Transformer in PyTorch, to compare with
tests/zoo/bench_decode (same model shape, same sentences, same worst case).

    /usr/bin/python3 decode_big.py FRA_TXT [--batch 2000] [--threads 1] [--num-steps 10]

The model is d2l's Transformer (docs/spec.md section 3): d_model 256, FFN 1024, 8 heads, 3 + 3
layers, vocabularies of bench_decode's sizes (9,973 source, 17,754 target tokens), randomly
initialised, in eval mode under torch.no_grad(). A random model never emits <eos>, so every
sentence runs all num_steps steps, as in bench_decode. The sources are 2,000 English sentences of
fra.txt (every 83rd line: the same lengths as a seeded test split, not the same sentences), each
token mapped to an id by a hash: decoding cost depends on the lengths, not on the ids.

PyTorch is given its best decoder, not d2l's predict_seq2seq (one sentence at a time, the whole
prefix re-projected at each step): batched over sentences, with a key/value cache per layer, so
a step projects only the new token, as tapegrad's step does. Prints sentences/s and the peak
resident memory of the process (ru_maxrss), like bench_decode.
"""
import argparse
import math
import resource
import time
import zlib

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("data")
ap.add_argument("--batch", type=int, default=2000)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--num-steps", type=int, default=10)
args = ap.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(42)
D, FFN, HEADS, LAYERS, SV, TV, T, N = 256, 1024, 8, 3, 9973, 17754, args.num_steps, 2000
BOS, EOS, PAD = 2, 3, 1


def sources():
    with open(args.data, encoding="utf-8") as f:
        lines = f.read().split("\n")
    src = torch.full((N, T), PAD, dtype=torch.long)
    lens = torch.zeros(N, dtype=torch.long)
    for i in range(N):
        toks = lines[i * 83].split("\t")[0].lower().split(" ")
        ids = [4 + zlib.crc32(t.encode()) % (SV - 4) for t in toks][: T - 1] + [EOS]
        src[i, : len(ids)] = torch.tensor(ids)
        lens[i] = len(ids)
    return src, lens


def masked_softmax(scores, valid):  # scores (B*H, q, k); valid (B*H,) or None
    if valid is not None:
        k = scores.shape[-1]
        mask = torch.arange(k, device=scores.device)[None, None, :] >= valid[:, None, None]
        scores = scores.masked_fill(mask, -1e6)
    return torch.softmax(scores, dim=-1)


class MHA(nn.Module):
    def __init__(self):
        super().__init__()
        self.W_q, self.W_k, self.W_v, self.W_o = (nn.Linear(D, D, bias=False) for _ in range(4))

    def split(self, x):  # (B, L, D) -> (B*H, L, D/H)
        B, L, _ = x.shape
        return x.reshape(B, L, HEADS, D // HEADS).transpose(1, 2).reshape(B * HEADS, L, D // HEADS)

    def forward(self, q, k, v, valid):  # k, v already split
        B = q.shape[0]
        qh = self.split(self.W_q(q))
        w = masked_softmax(qh @ k.transpose(1, 2) / math.sqrt(D // HEADS),
                           None if valid is None else valid.repeat_interleave(HEADS))
        o = (w @ v).reshape(B, HEADS, -1, D // HEADS).transpose(1, 2).reshape(B, -1, D)
        return self.W_o(o)


class FFNBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense1, self.dense2 = nn.Linear(D, FFN), nn.Linear(FFN, D)

    def forward(self, x):
        return self.dense2(torch.relu(self.dense1(x)))


class EncBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention, self.ffn = MHA(), FFNBlock()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)

    def forward(self, x, valid):
        a = self.attention
        x = self.ln1(x + a(x, a.split(a.W_k(x)), a.split(a.W_v(x)), valid))
        return self.ln2(x + self.ffn(x))


class DecBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention1, self.attention2, self.ffn = MHA(), MHA(), FFNBlock()
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)

    def step(self, x, cache, enc_kv, enc_valid):  # x (B, 1, D); cache: [K, V] or None
        a = self.attention1
        k, v = a.split(a.W_k(x)), a.split(a.W_v(x))
        if cache[0] is not None:
            k, v = torch.cat([cache[0], k], 1), torch.cat([cache[1], v], 1)
        cache[0], cache[1] = k, v
        y = self.ln1(x + a(x, k, v, None))
        y2 = self.ln2(y + self.attention2(y, enc_kv[0], enc_kv[1], enc_valid))
        return self.ln3(y2 + self.ffn(y2))


P = torch.zeros(1, 1000, D)
pos = torch.arange(1000, dtype=torch.float32).reshape(-1, 1) / torch.pow(
    10000, torch.arange(0, D, 2, dtype=torch.float32) / D)
P[:, :, 0::2], P[:, :, 1::2] = torch.sin(pos), torch.cos(pos)

emb_src, emb_tgt = nn.Embedding(SV, D), nn.Embedding(TV, D)
enc = nn.ModuleList(EncBlock() for _ in range(LAYERS))
dec = nn.ModuleList(DecBlock() for _ in range(LAYERS))
dense = nn.Linear(D, TV)
for m in (emb_src, emb_tgt, enc, dec, dense):
    m.eval()


@torch.no_grad()
def greedy(src, lens):
    B = src.shape[0]
    x = emb_src(src) * math.sqrt(D) + P[:, :T]
    for blk in enc:
        x = blk(x, lens)
    enc_kv = [(b.attention2.split(b.attention2.W_k(x)), b.attention2.split(b.attention2.W_v(x)))
              for b in dec]
    caches = [[None, None] for _ in dec]
    tok = torch.full((B,), BOS, dtype=torch.long)
    out = torch.empty((B, T), dtype=torch.long)
    alive = torch.ones(B, dtype=torch.bool)
    for t in range(T):
        y = emb_tgt(tok)[:, None] * math.sqrt(D) + P[:, t:t + 1]
        for blk, c, kv in zip(dec, caches, enc_kv):
            y = blk.step(y, c, kv, lens)
        tok = dense(y[:, 0]).argmax(-1)
        out[:, t] = tok
        alive &= tok != EOS
        if not alive.any():
            break
    return out


src, lens = sources()
t0 = time.perf_counter()
outs = [greedy(src[i:i + args.batch], lens[i:i + args.batch]) for i in range(0, N, args.batch)]
dt = time.perf_counter() - t0
print(f"greedy, batch {args.batch}, {args.threads} thread(s): {N / dt:.1f} sentences/s "
      f"({dt:.2f} s), peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB, "
      f"{sum(int((o != EOS).all(1).sum()) for o in outs)} of {N} ran all {T} steps")
