#!/usr/bin/env python3
"""Independent (stdlib only) computation of the numbers pinned in the datasets tests.

Written from docs/spec.md section 1 and 5, not from the C code: it reads fra.txt the
way d2l does (Python text mode, so universal newlines, strict UTF-8), applies
d2l's preprocessing, tokenisation, Vocab and build_array_nmt, and prints the
figures the CUnit tests pin (vocabulary sizes, first tokens and ids, array
checksums), the documented RNG / shuffle / split, the metric values and the
Unicode lowercasing checksums.

Rerun from the repository root (about 15 s, mostly the Unicode sweeps):
    python3 tests/datasets/ref_numbers.py [path/to/fra.txt] > /tmp/ref.txt
and compare with the constants in tests/datasets/test_*.c (each constant there
names the key printed here).
"""
import collections
import math
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT = os.path.join(HERE, '..', '..', '..', 'shared', 'data', 'fra-eng', 'fra.txt')
M64 = (1 << 64) - 1


def out(key, value):
    print('%s = %s' % (key, value))


# ----------------------------------------------------------------- checksums
def fnv1a(data, h=0xcbf29ce484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & M64
    return h


def fnv_ints(values):
    return fnv1a(b''.join(struct.pack('<i', v) for v in values))


# ---------------------------------------------------------------- d2l pipeline
def preprocess(text):
    text = text.replace('\u202f', ' ').replace('\xa0', ' ').lower()
    res = []
    prev = None
    for i, ch in enumerate(text):
        if i > 0 and ch in ',.!?' and prev != ' ':
            res.append(' ')
        res.append(ch)
        prev = ch
    return ''.join(res)


def tokenize(text, num_examples):
    src, tgt, lines = [], [], []
    for i, line in enumerate(text.split('\n')):
        if num_examples and i > num_examples:
            break
        fields = line.split('\t')
        if len(fields) != 2:
            continue
        src.append(fields[0].split(' '))
        tgt.append(fields[1].split(' '))
        lines.append(i)
    return src, tgt, lines


RESERVED = ['<unk>', '<pad>', '<bos>', '<eos>']


def build_vocab(sentences, min_freq=2):
    counts = {}
    order = []
    for s in sentences:
        for t in s:
            if t not in counts:
                counts[t] = 0
                order.append(t)
            counts[t] += 1
    # descending frequency, ties by first occurrence (explicit key, no reliance
    # on sort stability)
    ranked = sorted(range(len(order)), key=lambda k: (-counts[order[k]], k))
    itos = list(RESERVED)
    stoi = {t: i for i, t in enumerate(itos)}
    for k in ranked:
        t = order[k]
        if counts[t] >= min_freq and t not in stoi:
            stoi[t] = len(itos)
            itos.append(t)
    return itos, stoi


def build_array(sentences, stoi, num_steps):
    ids, lens, truncated = [], [], 0
    for s in sentences:
        row = [stoi.get(t, 0) for t in s] + [3]
        if len(row) > num_steps:
            truncated += 1
            row = row[:num_steps]
        row = row + [1] * (num_steps - len(row))
        ids.extend(row)
        lens.append(sum(1 for v in row if v != 1))
    return ids, lens, truncated


# ------------------------------------------------------------ RNG (documented)
class Rng:
    """splitmix64-seeded xoshiro256**, as autograd/ag_base.h documents (ag_rng)."""

    def __init__(self, seed, stream):
        y = stream & M64
        y, mixed = self._sm(y)
        x = (seed ^ mixed) & M64
        self.s = []
        for _ in range(4):
            x, v = self._sm(x)
            self.s.append(v)

    @staticmethod
    def _sm(x):
        x = (x + 0x9E3779B97F4A7C15) & M64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return x, z ^ (z >> 31)

    def next(self):
        s = self.s
        rotl = lambda v, k: ((v << k) | (v >> (64 - k))) & M64
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        threshold = ((1 << 64) - n) % n
        while True:
            x = self.next()
            if x >= threshold:
                return x % n


def permutation(n, seed, stream):
    rng = Rng(seed, stream)
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        p[i], p[j] = p[j], p[i]
    return p


SPLIT_STREAM = 0x53504C4954  # "SPLIT"


def split(n, valid_frac, test_frac, seed):
    p = permutation(n, seed, SPLIT_STREAM)
    n_test = int(math.floor(test_frac * n))
    n_valid = int(math.floor(valid_frac * n))
    test = sorted(p[:n_test])
    valid = sorted(p[n_test:n_test + n_valid])
    train = sorted(p[n_test + n_valid:])
    return train, valid, test


# ------------------------------------------------------------------- metrics
def bleu_d2l(pred, label, k):
    if pred == '':
        return 0.0
    p, l = pred.split(' '), label.split(' ')
    score = math.exp(min(0, 1 - len(l) / len(p)))
    for n in range(1, k + 1):
        if len(p) - n + 1 <= 0:
            return 0.0
        ref = collections.Counter(tuple(l[i:i + n]) for i in range(len(l) - n + 1))
        m = 0
        for i in range(len(p) - n + 1):
            g = tuple(p[i:i + n])
            if ref[g] > 0:
                m += 1
                ref[g] -= 1
        score *= (m / (len(p) - n + 1)) ** (0.5 ** n)
    return score


def corpus_bleu(hyps, refsets):
    """sacreBLEU 2.x BLEU, tokenize='none', smooth 'exp', multi-reference."""
    correct, total = [0] * 4, [0] * 4
    sys_len = ref_len = 0
    for h, refs in zip(hyps, refsets):
        ht = h.split()
        rts = [r.split() for r in refs]
        sys_len += len(ht)
        best = None
        for rt in rts:
            d = abs(len(ht) - len(rt))
            if best is None or d < best[0] or (d == best[0] and len(rt) < best[1]):
                best = (d, len(rt))
        ref_len += best[1]
        for n in range(1, 5):
            hc = collections.Counter(tuple(ht[i:i + n]) for i in range(len(ht) - n + 1))
            rmax = collections.Counter()
            for rt in rts:
                rc = collections.Counter(tuple(rt[i:i + n]) for i in range(len(rt) - n + 1))
                for g, c in rc.items():
                    rmax[g] = max(rmax[g], c)
            total[n - 1] += sum(hc.values())
            correct[n - 1] += sum(min(c, rmax[g]) for g, c in hc.items())
    bp = 1.0 if sys_len >= ref_len else (math.exp(1 - ref_len / sys_len) if sys_len else 0.0)
    prec = [0.0] * 4
    if not any(correct):
        return 0.0, prec, bp, sys_len, ref_len
    smooth = 1.0
    for n in range(4):
        if total[n] == 0:
            break
        if correct[n] == 0:
            smooth *= 2
            prec[n] = 100.0 / (smooth * total[n])
        else:
            prec[n] = 100.0 * correct[n] / total[n]
    logs = [math.log(p) if p > 0 else -9999999999 for p in prec]
    return bp * math.exp(sum(logs) / 4), prec, bp, sys_len, ref_len


def chrf(hyps, refs, order=6, beta=2):
    """sacreBLEU 2.x chrF defaults: char order 6, word order 0, beta 2,
    whitespace removed, effective-order averaging (eps_smoothing=False)."""
    stats = [[0, 0, 0] for _ in range(order)]
    for h, r in zip(hyps, refs):
        h = ''.join(h.split())
        r = ''.join(r.split())
        for n in range(1, order + 1):
            hc = collections.Counter(h[i:i + n] for i in range(len(h) - n + 1))
            rc = collections.Counter(r[i:i + n] for i in range(len(r) - n + 1))
            st = stats[n - 1]
            st[0] += sum(hc.values()) if rc else 0
            st[1] += sum(rc.values())
            st[2] += sum(min(c, rc[g]) for g, c in hc.items() if g in rc)
    ap = ar = 0.0
    eff = 0
    for nh, nr, nm in stats:
        if nh > 0 and nr > 0:
            ap += nm / nh
            ar += nm / nr
            eff += 1
    if eff == 0:
        return 0.0
    ap /= eff
    ar /= eff
    if ap + ar == 0:
        return 0.0
    f = beta * beta
    return 100 * (1 + f) * ap * ar / (f * ap + ar)


# ------------------------------------------------------- synthetic quirk corpus
# Snippets concatenated at random (the same list, in the same order, is in test_fra.c):
# separators, punctuation, ASCII and non-ASCII letters of every casing kind, the no-break
# spaces, Greek sigma contexts, case-ignorable marks, reserved tokens.
SNIPPETS = ['\t', '\n', '\r', '\r\n', ' ', '  ', ',', '.', '!', '?', 'a', 'B', 'go', 'Tom',
            '\u00c9', '\u00e9t\u00e9', '\u00c7A', '\u0152', '\u03a3', '\u039f\u03a3', '\u0391',
            '\u0130', '\u00a0', '\u202f', '\u2009', '\u01c5', '\u1e9e', "'", '\u00b7', '\u0345',
            '\u02b0', '<pad>', '<unk>', '\u023a', '\u212a', '\u0421', '\u00ff', '\u0178', '\ufeff',
            '\U0001d400', '\u10a0', '\u2c2f', 'x\u0307']


def synthetic(seed, count):
    rng = Rng(seed, 0x53594E5448)  # "SYNTH"
    return ''.join(SNIPPETS[rng.below(len(SNIPPETS))] for _ in range(count))


def report_synthetic(seed, count, num_steps=6, min_freq=2):
    raw = synthetic(seed, count)
    data = raw.encode('utf-8')
    out('synth.bytes', len(data))
    out('synth.bytes_fnv', '0x%016x' % fnv1a(data))
    # Python text mode: universal newlines
    text = preprocess(raw.replace('\r\n', '\n').replace('\r', '\n'))
    src, tgt, lines = tokenize(text, 0)
    out('synth.pairs', len(src))
    out('synth.lines', text.count('\n') + (0 if text.endswith('\n') else 1))
    h = 0xcbf29ce484222325
    for a, b in zip(src, tgt):
        h = fnv1a((' '.join(a) + '\t' + ' '.join(b) + '\n').encode('utf-8'), h)
    out('synth.text_fnv', '0x%016x' % h)
    for side, sents in (('src', src), ('tgt', tgt)):
        itos, stoi = build_vocab(sents, min_freq)
        ids, lens, trunc = build_array(sents, stoi, num_steps)
        out('synth.%s.vocab_size' % side, len(itos))
        out('synth.%s.vocab_fnv' % side, '0x%016x' % fnv1a('\n'.join(itos).encode('utf-8')))
        out('synth.%s.ids_fnv' % side, '0x%016x' % fnv_ints(ids))
        out('synth.%s.valid_len_fnv' % side, '0x%016x' % fnv_ints(lens))
        out('synth.%s.truncated' % side, trunc)


# ------------------------------------------------------------------- reports
def report_run(tag, text, num_examples, num_steps=10, min_freq=2):
    src, tgt, lines = tokenize(text, num_examples)
    out(tag + '.pairs', len(src))
    for side, sents in (('src', src), ('tgt', tgt)):
        itos, stoi = build_vocab(sents, min_freq)
        ids, lens, trunc = build_array(sents, stoi, num_steps)
        out('%s.%s.vocab_size' % (tag, side), len(itos))
        out('%s.%s.first_tokens' % (tag, side), itos[4:16])
        out('%s.%s.tokens_total' % (tag, side), sum(len(s) for s in sents))
        out('%s.%s.truncated' % (tag, side), trunc)
        out('%s.%s.rows0-2' % (tag, side), [ids[i * num_steps:(i + 1) * num_steps] for i in range(3)])
        out('%s.%s.valid_len0-9' % (tag, side), lens[:10])
        out('%s.%s.ids_fnv' % (tag, side), '0x%016x' % fnv_ints(ids))
        out('%s.%s.valid_len_fnv' % (tag, side), '0x%016x' % fnv_ints(lens))
        out('%s.%s.last_token' % (tag, side), repr(itos[-1]))
        out('%s.%s.empty_token_id' % (tag, side), stoi.get('', 0))
    return src, tgt, lines


def unicode_sweeps():
    """FNV-1a over the UTF-8 of s.lower() for every code point s, then over the
    three Final_Sigma probes of every code point (0xFF separates results)."""
    h = 0xcbf29ce484222325
    for c in range(0x110000):
        if 0xD800 <= c < 0xE000:
            continue
        h = fnv1a(chr(c).lower().encode('utf-8') + b'\xff', h)
    out('unicode.lower_fnv', '0x%016x' % h)
    h = 0xcbf29ce484222325
    for c in range(0x110000):
        if 0xD800 <= c < 0xE000:
            continue
        ch = chr(c)
        for probe in ('A' + ch + '\u03a3', '1' + ch + '\u03a3', 'A\u03a3' + ch):
            h = fnv1a(probe.lower().encode('utf-8') + b'\xff', h)
    out('unicode.sigma_fnv', '0x%016x' % h)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    path = args[0] if args else DEFAULT
    with open(path, 'r', encoding='utf-8') as f:
        raw = f.read()
    text = preprocess(raw)
    out('file.lines', text.count('\n') + (0 if text.endswith('\n') else 1))
    src, tgt, _ = report_run('d600', text, 600)
    report_run('d600_steps5', text, 600, num_steps=5)
    report_run('all', text, 0)
    # predict-side encoding of the book's sentences against the default vocab
    itos, stoi = build_vocab(src)
    for s in ('go .', 'i lost .', "he's calm .", "i'm home .", 'Go Away Now .'):
        ids = [stoi.get(t, 0) for t in s.lower().split(' ')] + [3]
        out('predict.%r' % s, ids)
    # RNG and shuffles
    r = Rng(42, 0)
    out('rng.seed42.stream0.first3', [hex(r.next()) for _ in range(3)])
    out('perm.d600.seed0.epoch0.first10', permutation(len(src), 0, 0)[:10])
    out('perm.d600.seed0.epoch1.first10', permutation(len(src), 0, 1)[:10])
    out('perm.d600.seed7.epoch0.first10', permutation(len(src), 7, 0)[:10])
    # split of the whole corpus: 10 % validation, 10 % test, seed 1234
    s_all, t_all, lines_all = tokenize(text, 0)
    train, valid, test = split(len(s_all), 0.1, 0.1, 1234)
    out('split.all.sizes', (len(train), len(valid), len(test)))
    out('split.all.test.first5', test[:5])
    out('split.all.valid.first5', valid[:5])
    itos_s, _ = build_vocab([s_all[i] for i in train])
    itos_t, _ = build_vocab([t_all[i] for i in train])
    out('split.all.train_vocab_sizes', (len(itos_s), len(itos_t)))
    out('split.all.train_src_first_tokens', itos_s[4:10])
    # metrics
    book = [('go .', 'va !'), ('i lost .', "j'ai perdu ."), ("he's calm .", 'il est calme .'),
            ("i'm home .", 'je suis chez moi .')]
    for p, l in [('va !', 'va !'), ("j'ai perdu .", "j'ai perdu ."), ('il est mouillé .', 'il est calme .'),
                 ('je suis chez moi .', 'je suis chez moi .'), ('je suis calme .', 'il est calme .'),
                 ('il .', 'il est calme .'), ('a', 'a b c'), ('a b c d', 'a b'), ('', 'a'),
                 ('the the the the', 'the cat'), ('a b a b a', 'a b a c')]:
        for k in (2, 4):
            out('bleu_d2l(%r,%r,%d)' % (p, l, k), repr(bleu_d2l(p, l, k)))
    sysl = ['The dog bit the man .', "It wasn't surprising .", 'The man had just bitten him .']
    refs1 = ['The dog bit the man .', 'It was not unexpected .', 'The man bit him first .']
    refs2 = ['The dog had bit the man .', 'No one was surprised .', 'The man had bitten the dog .']
    out('corpus_bleu.readme.2refs', corpus_bleu(sysl, list(zip(refs1, refs2))))
    out('corpus_bleu.readme.1ref', corpus_bleu(sysl, [(r,) for r in refs1]))
    out('corpus_bleu.book', corpus_bleu([l for _, l in book], [(l,) for _, l in book]))
    out('corpus_bleu.nomatch', corpus_bleu(['x y z'], [('a b c',)]))
    out('corpus_bleu.short', corpus_bleu(['a b', 'c'], [('a b',), ('c',)]))
    out('corpus_bleu.mixed', corpus_bleu(['il est mouillé .', 'je suis calme .'],
                                         [('il est calme .',), ('je suis chez moi .',)]))
    out('chrf.hf', repr(chrf(['The relationship between Obama and Netanyahu is not exactly friendly.'],
                             ['The ties between Obama and Netanyahu are not particularly friendly.'])))
    out('chrf.mixed', repr(chrf(['il est mouillé .', 'je suis calme .'],
                                ['il est calme .', 'je suis chez moi .'])))
    out('chrf.short', repr(chrf(['ab', 'abc d'], ['abc', 'ab'])))
    out('chrf.same', repr(chrf(['le chat'], ['le chat'])))
    out('chrf.empty_hyp', repr(chrf([''], ['abc'])))
    report_synthetic(2024, 40000)
    if '--no-unicode' not in sys.argv:
        unicode_sweeps()


if __name__ == '__main__':
    main()
