# lstm_classifier.py -- the program of docs/examples/lstm_classifier/main.c in PyTorch, for
# comparing the two (their lengths: docs/examples/lstm_classifier/README.md). Not run by CI.
# The same task, model, state_dict names and shapes, optimizer groups,
# schedule and clipping; the data and the draws are not the same bits (other generators).
#     python3 bench/lstm_classifier.py [checkpoint.safetensors]
import math
import sys

import torch
from safetensors.torch import load_file, save_file
from torch import nn

T, SYMBOLS, N_TRAIN, N_TEST, BATCH, EPOCHS = 16, 5, 2048, 512, 64, 10


class LastStep(nn.Module):  # nn.LSTM returns (output, (h, c)): keep output[:, -1]
    def forward(self, x):
        return x[0][:, -1]


def make_model():
    return nn.Sequential(nn.Embedding(SYMBOLS, 16),
                         nn.LSTM(16, 64, 2, dropout=0.1, batch_first=True), LastStep(),
                         nn.BatchNorm1d(64), nn.GELU(), nn.Dropout(0.2), nn.Linear(64, SYMBOLS))


def make_data(n, gen):  # n sequences (n, T), their majority symbol; ties drawn again
    x = torch.randint(SYMBOLS, (4 * n, T), generator=gen)
    counts = nn.functional.one_hot(x, SYMBOLS).sum(1)
    top = counts.topk(2, dim=1).values
    keep = (top[:, 0] > top[:, 1]).nonzero().squeeze(1)[:n]
    return x[keep], counts[keep].argmax(1)


def accuracy(net, x, y):
    net.eval()
    with torch.no_grad():
        return (net(x).argmax(-1) == y).float().mean().item()


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "lstm_classifier.safetensors"
    torch.manual_seed(42)
    gen = torch.Generator().manual_seed(1)
    x, y = make_data(N_TRAIN, gen)
    xt, yt = make_data(N_TEST, gen)
    net = make_model()
    decay = [p for p in net.parameters() if p.dim() >= 2]
    no_decay = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=3e-3)
    steps, warmup = EPOCHS * math.ceil(N_TRAIN / BATCH), 30

    def lr_factor(s):  # update s + 1 as optim_lr_warmup_cosine(30, steps, 0.05) gives it
        if s + 1 <= warmup:
            return (s + 1) / warmup
        return 0.05 + 0.95 * (1 + math.cos(math.pi * (s + 1 - warmup) / (steps - warmup))) / 2

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    for epoch in range(EPOCHS):
        net.train()
        total, perm = 0.0, torch.randperm(N_TRAIN)
        for i in range(0, N_TRAIN, BATCH):
            rows = perm[i:i + BATCH]
            loss = nn.functional.cross_entropy(net(x[rows]), y[rows])
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            sched.step()
            total += loss.item()
        n = math.ceil(N_TRAIN / BATCH)
        print(f"epoch {epoch:2d}  loss {total / n:.4f}  lr {sched.get_last_lr()[0]:.5f}")
    acc = accuracy(net, xt, yt)
    save_file(net.state_dict(), path)
    net2 = make_model()
    net2.load_state_dict(load_file(path))
    acc2 = accuracy(net2, xt, yt)
    print(f"held-out accuracy {acc:.4f}; reloaded from {path}: {acc2:.4f}")
    sys.exit(0 if acc >= 0.9 and acc2 == acc else 1)


if __name__ == "__main__":
    main()
