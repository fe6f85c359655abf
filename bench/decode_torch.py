"""decode_torch.py -- greedy decoding of one of tapegrad's trained Transformer checkpoints by
PyTorch, with a per-layer key/value cache: the PyTorch side of the decoding comparison of
docs/benchmarks.md ("Decoding a trained model against PyTorch's KV-cached decoder").

Usage (PyTorch 1.13 of Debian's python3-torch; no other package):

    /usr/bin/python3 bench/decode_torch.py prepare FRA_TXT FIRST COUNT SRC_OUT REF_OUT
    /usr/bin/python3 bench/decode_torch.py decode CHECKPOINT SRC [--threads N] [--batch B]
                                           [--by-length] [--out FILE]
    /usr/bin/python3 bench/decode_torch.py compare HYP_A HYP_B [--refs REF]
    /usr/bin/python3 bench/decode_torch.py normalize < TEXT > NORMALIZED

prepare: pairs FIRST .. FIRST+COUNT-1 (0-based) of the English-French data file, put in the
  form of the word-level model's data (d2l's preprocessing: no-break spaces made spaces,
  lowercased, a space before each , . ! ? not preceded by one): the English side to SRC_OUT,
  the French side (the references) to REF_OUT, one sentence a line. A checkpoint trained with
  --num-examples N has seen only pairs 0 .. N-1, so pairs from N on are held out.
decode: the checkpoint's model (its vocabularies are the metadata keys vocab.src and vocab.tgt,
  one token a line) translates every line of SRC: for a word-level checkpoint, lines in the form
  `prepare` writes; for a subword checkpoint (metadata vocab.src_model), lines of SentencePiece
  pieces separated by spaces, as `spm_encode --output_format=piece` writes them with the model
  that `transformer_nmt export --src-spm FILE` exports (the output is pieces too, which
  `spm_decode --input_format=piece` turns into text). It translates greedily, up to the checkpoint's data.num_steps tokens, B
  sentences per batch (default: all of them); rows that say <eos> leave the batch. With
  --by-length the batches take the sentences by valid length, longest first, each batch cut to
  its longest source (what transformer_nmt's decoding does; the same outputs, in the input's
  order, with less padding encoded and attended). Prints the
  sentences/s of the decoding alone (weights loaded, sources encoded to ids, before the clock
  starts) and the process's peak RSS (getrusage); the output tokens, one sentence a line (the
  form of `transformer_nmt translate --raw-output`), go to --out (default: not written).
normalize: every line of stdin through the typed-text normalization a subword model applies
  before SentencePiece (datasets/text.h ds_text_normalize: typographic apostrophes and quotes
  made plain, guillemets made quotes with their inner blanks removed, the ellipsis made "...",
  zero-width characters and soft hyphens removed, blanks made single spaces, none at either
  end), to stdout: the input of spm_encode for a subword checkpoint's sources (the English
  column of `transformer_nmt eval --out FILE`).
compare: the agreement of two token files line by line (identical sentences, identical tokens
  at the same position over the longer one's tokens), and with --refs the corpus BLEU-4 of
  each against the references (uniform weights, brevity penalty, one reference; the tokenized
  score that `transformer_nmt eval` prints as corpus BLEU-4).

The model is d2l's Transformer as zoo/models/transformer.c computes it: embeddings scaled by
sqrt(d_model), sinusoidal positions (the decoder's step t at position t), multi-head attention
without biases whose masked keys score -1e6, AddNorm post-LN (LayerNorm(x + sublayer(x)), eps
1e-5), position-wise FFN with ReLU, a dense output layer. The source is cut to num_steps
tokens, <eos> appended when there is room, <pad> after it; its valid length counts the tokens
and <eos> even past num_steps (as datasets/fra_batches.c ds_encode_sentence does).
"""
import argparse
import json
import math
import re
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = {"F32": np.float32, "F64": np.float64}


def preprocess(text):
    """d2l's preprocessing of a sentence (datasets/text.c ds_preprocess)."""
    text = text.replace("\u202f", " ").replace("\xa0", " ").lower()
    out = []
    for i, ch in enumerate(text):
        if ch in ",.!?" and i > 0 and text[i - 1] != " ":
            out.append(" ")
        out.append(ch)
    return "".join(out)


def normalize(text):
    """datasets/text.c ds_text_normalize."""
    for a in "\u2019\u2018\u201b\u02bc":
        text = text.replace(a, "'")
    for q in "\u201c\u201d\u201e\u201f":
        text = text.replace(q, '"')
    text = re.sub(r"\u00ab\s*", '"', text)
    text = re.sub(r"\s*\u00bb", '"', text)
    text = text.replace("\u2026", "...")
    for z in "\u200b\u2060\ufeff\u00ad":
        text = text.replace(z, "")
    return " ".join(text.split())


def load_checkpoint(path):
    """(tensors, metadata) of a safetensors file: only the model's tensors (not optim.*), each
    read from its byte range. safetensors: an 8-byte little-endian header length, a JSON header
    (name -> dtype, shape, data_offsets; "__metadata__" -> string pairs), then the raw data."""
    tensors = {}
    with open(path, "rb") as f:
        head = f.read(8)
        size = f.seek(0, 2)
        (n,) = struct.unpack("<Q", head) if len(head) == 8 else (size,)
        if n + 8 > size:
            sys.exit(f"{path}: not a safetensors file (header length {n}, file {size} bytes)")
        f.seek(8)
        header = json.loads(f.read(n))
        meta = header.pop("__metadata__", {})
        for name, info in header.items():
            if name.startswith("optim."):
                continue
            if info["dtype"] not in DTYPES:
                sys.exit(f"{path}: tensor {name}: dtype {info['dtype']}, expected F32 or F64")
            a, b = info["data_offsets"]
            f.seek(8 + n + a)
            arr = np.frombuffer(f.read(b - a), dtype=DTYPES[info["dtype"]])
            tensors[name] = torch.from_numpy(arr.reshape(info["shape"]).astype(np.float32))
    return tensors, meta


class Model:
    """The checkpoint's Transformer, inference only, on plain tensors."""

    def __init__(self, path):
        w, meta = load_checkpoint(path)
        if meta.get("tapegrad.model") != "transformer":
            sys.exit(f"{path}: model {meta.get('tapegrad.model')!r}, expected 'transformer'")
        if "vocab.src" not in meta or "vocab.tgt" not in meta:
            sys.exit(f"{path}: no vocab.src/vocab.tgt metadata")
        self.subword = "vocab.src_model" in meta  # SRC lines are pieces, kept as they are
        if meta.get("config.share-embeddings") == "1":  # one matrix: both embeddings, output
            w["decoder.embedding.weight"] = w["decoder.dense.weight"] = w["encoder.embedding.weight"]
        self.w = w
        self.d = int(meta["config.hiddens"])
        self.heads = int(meta["config.heads"])
        self.layers = int(meta["config.layers"])
        self.dec_layers = int(meta.get("config.dec-layers", "0")) or self.layers
        self.steps = int(meta.get("data.num_steps", 10))
        if meta.get("config.d2l-step-positions", "0") != "0":
            sys.exit(f"{path}: d2l-step-positions 1 is not ported")
        self.src_tok = meta["vocab.src"].split("\n")
        self.tgt_tok = meta["vocab.tgt"].split("\n")
        self.src_id = {t: i for i, t in enumerate(self.src_tok)}
        self.unk, self.pad = self.src_id["<unk>"], self.src_id["<pad>"]
        self.bos = self.tgt_tok.index("<bos>")
        self.eos = self.tgt_tok.index("<eos>")
        max_len = int(meta.get("config.max-len", 1000))
        # P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(...), in float64 then float32
        i = torch.arange(max_len, dtype=torch.float64)[:, None]
        x = i / torch.pow(10000.0, torch.arange(0, self.d, 2, dtype=torch.float64) / self.d)
        P = torch.zeros(max_len, self.d, dtype=torch.float64)
        P[:, 0::2] = torch.sin(x)
        P[:, 1::2] = torch.cos(x[:, : self.d // 2])
        self.P = P.float()
        self.scale = math.sqrt(self.d)

    def encode_ids(self, line):
        """(ids padded to num_steps, valid length): ds_encode_sentence's form."""
        toks = line.split(" ") if self.subword else line.lower().split(" ")
        T = self.steps
        ids = [self.src_id.get(t, self.unk) for t in toks[:T]]
        if len(ids) < T:
            ids.append(self.src_id["<eos>"])
        ids += [self.pad] * (T - len(ids))
        return ids, len(toks) + 1

    def lin(self, x, name, bias=True):
        return F.linear(x, self.w[name + ".weight"], self.w[name + ".bias"] if bias else None)

    def ln(self, x, name):
        return F.layer_norm(x, (self.d,), self.w[name + ".weight"], self.w[name + ".bias"], 1e-5)

    def split(self, x):  # (B, T, d) -> (B, h, T, d/h)
        B, T, _ = x.shape
        return x.view(B, T, self.heads, self.d // self.heads).transpose(1, 2)

    def attend(self, q, k, v, mask, name):
        """q (B,h,Tq,dh), k/v (B,h,Tk,dh), mask (B,1,1,Tk) True where masked -> (B,Tq,d)."""
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s.masked_fill(mask, -1e6)
        o = torch.matmul(torch.softmax(s, dim=-1), v)
        B, _, Tq, _ = o.shape
        return self.lin(o.transpose(1, 2).reshape(B, Tq, self.d), name + ".W_o", False)

    def ffn(self, x, name):
        return self.lin(F.relu(self.lin(x, name + ".dense1")), name + ".dense2")

    def encode(self, src, valid):
        """src (B, Ts) ids, valid (B,) -> encoder outputs (B, Ts, d), key mask (B,1,1,Ts)."""
        Ts = src.shape[1]
        x = F.embedding(src, self.w["encoder.embedding.weight"]) * self.scale + self.P[:Ts]
        mask = (torch.arange(Ts)[None, :] >= valid[:, None])[:, None, None, :]
        for i in range(self.layers):
            p = f"encoder.blks.block{i}"
            a = p + ".attention"
            y = self.attend(self.split(self.lin(x, a + ".W_q", False)),
                            self.split(self.lin(x, a + ".W_k", False)),
                            self.split(self.lin(x, a + ".W_v", False)), mask, a)
            x = self.ln(x + y, p + ".addnorm1.ln")
            x = self.ln(x + self.ffn(x, p + ".ffn"), p + ".addnorm2.ln")
        return x, mask

    def greedy(self, src, valid):
        """Batched greedy decoding with a key/value cache per decoder layer: the self-attention
        keys/values of the tokens so far (preallocated for num_steps positions) and the
        cross-attention keys/values of the encoder outputs, computed once. Rows that say <eos>
        leave the batch. Returns one list of token ids per sentence."""
        B, T = src.shape[0], self.steps
        enc, mask = self.encode(src, valid)
        h, dh = self.heads, self.d // self.heads
        cross = []
        for i in range(self.dec_layers):
            a = f"decoder.blks.block{i}.attention2"
            cross.append((self.split(self.lin(enc, a + ".W_k", False)),
                          self.split(self.lin(enc, a + ".W_v", False))))
        selfk = [torch.empty(B, h, T, dh) for _ in range(self.dec_layers)]
        selfv = [torch.empty(B, h, T, dh) for _ in range(self.dec_layers)]
        out = [[] for _ in range(B)]
        rows = torch.arange(B)  # sentence of each live row
        tok = torch.full((B,), self.bos, dtype=torch.long)
        for t in range(T):
            x = (F.embedding(tok, self.w["decoder.embedding.weight"]) * self.scale
                 + self.P[t])[:, None, :]
            for i in range(self.dec_layers):
                p = f"decoder.blks.block{i}"
                a = p + ".attention1"
                selfk[i][:, :, t:t + 1] = self.split(self.lin(x, a + ".W_k", False))
                selfv[i][:, :, t:t + 1] = self.split(self.lin(x, a + ".W_v", False))
                y = self.attend(self.split(self.lin(x, a + ".W_q", False)),
                                selfk[i][:, :, : t + 1], selfv[i][:, :, : t + 1], None, a)
                x = self.ln(x + y, p + ".addnorm1.ln")
                a = p + ".attention2"
                y = self.attend(self.split(self.lin(x, a + ".W_q", False)), cross[i][0],
                                cross[i][1], mask, a)
                x = self.ln(x + y, p + ".addnorm2.ln")
                x = self.ln(x + self.ffn(x, p + ".ffn"), p + ".addnorm3.ln")
            tok = self.lin(x[:, 0], "decoder.dense").argmax(dim=-1)
            live = tok != self.eos
            for r, k in zip(rows[live].tolist(), tok[live].tolist()):
                out[r].append(k)
            if not bool(live.all()):
                keep = live.nonzero()[:, 0]
                if keep.numel() == 0:
                    break
                rows, tok, mask = rows[keep], tok[keep], mask[keep]
                cross = [(k[keep], v[keep]) for k, v in cross]
                selfk = [k[keep] for k in selfk]
                selfv = [v[keep] for v in selfv]
        return out


def cmd_prepare(a):
    src, ref = [], []
    with open(a.fra_txt, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n >= a.first + a.count:
                break
            if n >= a.first:
                cols = line.rstrip("\n").split("\t")
                if len(cols) < 2:
                    sys.exit(f"{a.fra_txt}:{n + 1}: expected English<TAB>French")
                src.append(preprocess(cols[0]))
                ref.append(preprocess(cols[1]))
    if len(src) < a.count:
        sys.exit(f"{a.fra_txt}: only {len(src)} pairs from pair {a.first}")
    for path, lines in ((a.src_out, src), (a.ref_out, ref)):
        with open(path, "w", encoding="utf-8") as f:
            f.write("".join(s + "\n" for s in lines))


def cmd_decode(a):
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    m = Model(a.checkpoint)
    with open(a.src, encoding="utf-8") as f:
        lines = [s.rstrip("\n") for s in f]
    if not lines:
        sys.exit(f"decode_torch.py decode: {a.src} has no sentence")
    if a.batch < 0 or a.threads < 1:
        sys.exit("decode_torch.py decode: --batch must be >= 0 (0: all) and --threads >= 1")
    enc = [m.encode_ids(s) for s in lines]
    src = torch.tensor([e[0] for e in enc], dtype=torch.long)
    valid = torch.tensor([e[1] for e in enc], dtype=torch.long)
    batch = a.batch or len(lines)
    order = list(range(len(lines)))
    if a.by_length:  # longest first, ties in input order
        order.sort(key=lambda i: -min(int(valid[i]), m.steps))
    perm = torch.tensor(order, dtype=torch.long)
    outs = [None] * len(lines)
    start = time.perf_counter()
    with torch.no_grad():
        for b in range(0, len(lines), batch):
            rows = perm[b:b + batch]
            s, v = src[rows], valid[rows]
            if a.by_length:
                s = s[:, : max(1, min(int(v.max()), m.steps))]
            for i, o in zip(rows.tolist(), m.greedy(s, v)):
                outs[i] = o
    secs = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"pytorch {torch.__version__}: {len(lines)} sentences in {secs:.3f} s, "
          f"{len(lines) / secs:.1f} sentences/s, {a.threads} thread(s), batch {batch}, "
          f"peak RSS {peak:.1f} MiB")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write("".join(" ".join(m.tgt_tok[k] for k in o) + "\n" for o in outs))


def bleu4(hyps, refs):
    """Corpus BLEU-4 in percent: clipped n-gram precisions n = 1..4, their geometric mean,
    the brevity penalty exp(1 - r/c) when c < r."""
    match, total, c, r = [0] * 4, [0] * 4, 0, 0
    for h, ref in zip(hyps, refs):
        h, ref = h.split(), ref.split()
        c, r = c + len(h), r + len(ref)
        for n in range(4):
            hg, rg = {}, {}
            for i in range(len(h) - n):
                g = tuple(h[i:i + n + 1])
                hg[g] = hg.get(g, 0) + 1
            for i in range(len(ref) - n):
                g = tuple(ref[i:i + n + 1])
                rg[g] = rg.get(g, 0) + 1
            match[n] += sum(min(k, rg.get(g, 0)) for g, k in hg.items())
            total[n] += max(len(h) - n, 0)
    if c == 0 or min(match) == 0:
        return 0.0
    logp = sum(math.log(match[n] / total[n]) for n in range(4)) / 4
    return 100 * math.exp(logp + min(0.0, 1 - r / c))


def cmd_compare(a):
    def read(p):
        with open(p, encoding="utf-8") as f:
            return [s.rstrip("\n") for s in f]
    x, y = read(a.a), read(a.b)
    if len(x) != len(y):
        sys.exit(f"{a.a} has {len(x)} lines, {a.b} {len(y)}")
    same = sum(s == t for s, t in zip(x, y))
    agree = tot = 0
    for s, t in zip(x, y):
        s, t = s.split(), t.split()
        tot += max(len(s), len(t))
        agree += sum(p == q for p, q in zip(s, t))
    print(f"{same}/{len(x)} sentences identical ({100 * same / len(x):.2f}%), "
          f"{agree}/{tot} tokens agree ({100 * agree / max(tot, 1):.2f}%)")
    if a.refs:
        refs = read(a.refs)
        if len(refs) != len(x):
            sys.exit(f"{a.refs} has {len(refs)} lines, expected {len(x)}")
        print(f"corpus BLEU-4: {a.a} {bleu4(x, refs):.2f}, {a.b} {bleu4(y, refs):.2f}")


def cmd_normalize(_):
    for line in sys.stdin:
        print(normalize(line.rstrip("\n")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("fra_txt")
    p.add_argument("first", type=int)
    p.add_argument("count", type=int)
    p.add_argument("src_out")
    p.add_argument("ref_out")
    p = sub.add_parser("decode")
    p.add_argument("checkpoint")
    p.add_argument("src")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--by-length", action="store_true")
    p.add_argument("--out")
    p = sub.add_parser("compare")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--refs")
    sub.add_parser("normalize")
    a = ap.parse_args()
    try:
        {"prepare": cmd_prepare, "decode": cmd_decode, "compare": cmd_compare,
         "normalize": cmd_normalize}[a.cmd](a)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, struct.error) as e:
        sys.exit(f"decode_torch.py {a.cmd}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
