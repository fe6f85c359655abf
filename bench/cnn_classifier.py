# cnn_classifier.py -- the program of docs/examples/cnn_classifier/main.c in PyTorch, for
# comparing the two (their lengths and speeds: docs/examples/cnn_classifier/README.md). Not run
# by CI. The same task, image generator, model, state_dict names and shapes, optimizer, batches,
# evaluation, confusion matrix, save and reload; the draws are not the same bits (other
# generators).
#     python3 bench/cnn_classifier.py [seed [checkpoint.safetensors]]
import math
import sys

import torch
from safetensors.torch import load_file, save_file
from torch import nn

S, CLASSES, N_TRAIN, N_TEST, BATCH, EPOCHS = 16, 4, 2400, 600, 32, 6
N = N_TRAIN + N_TEST
CLASS_NAMES = ["horizontal", "vertical", "diagonal", "anti-diagonal"]
DIRECTION = [(0, 1), (1, 0), (1, 1), (1, -1)]  # (row, column) step along the bar
SIDE = [(1, 0), (0, 1), (0, 1), (0, 1)]  # thickening step


def make_model():  # x (B, 1, 16, 16) -> logits (B, 4)
    return nn.Sequential(nn.Conv2d(1, 8, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(16 * (S // 4) * (S // 4), CLASSES))


# One image of class k: noise N(0, 0.3^2), then a bar of brightness 0.8-1.2 along the class's
# direction through a random point, 7 to 13 pixels long, 1 or 2 thick.
def draw(k, gen):
    img = 0.3 * torch.randn(S, S, generator=gen)
    u = torch.rand(5, generator=gen).tolist()
    length, thick, v = 7 + int(u[0] * 7), 1 + (u[1] < 0.5), 0.8 + 0.4 * u[2]
    r0, c0 = 2 + int(u[3] * (S - 4)), 2 + int(u[4] * (S - 4))
    for s in range(-(length // 2), length - length // 2):
        for w in range(thick):
            y = r0 + s * DIRECTION[k][0] + w * SIDE[k][0]
            x = c0 + s * DIRECTION[k][1] + w * SIDE[k][1]
            if 0 <= y < S and 0 <= x < S:
                img[y, x] += v
    return img


def make_data(seed):
    gen = torch.Generator().manual_seed(seed)
    y = torch.arange(N) % CLASSES
    x = torch.stack([draw(k, gen) for k in y.tolist()]).unsqueeze(1)
    return x, y


def show(a, b):  # two images side by side as text, ' ' to '#' by brightness
    shades = " .:-=+*#"
    for i in range(S):
        print("".join("    " + "".join(shades[min(7, max(0, int(v * 8)))] for v in img[i].tolist())
                      for img in (a, b)))


def evaluate(net, x, y):  # held-out accuracy in eval mode, nothing recorded; the predictions
    net.eval()
    with torch.no_grad():
        pred = net(x).argmax(-1)
    net.train()
    return (pred == y).float().mean().item(), pred


def main():
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    path = sys.argv[2] if len(sys.argv) > 2 else "cnn_classifier.safetensors"
    x, y = make_data(seed)
    print(f"a {CLASS_NAMES[y[0]]} bar and a {CLASS_NAMES[y[2]]} one (seed {seed}):")
    show(x[0, 0], x[2, 0])
    torch.manual_seed(seed)
    net, net2 = make_model(), make_model()
    n = sum(p.numel() for p in net.parameters())
    print(f"parameters: {n} (0.weight [8, 1, 3, 3] ... 7.bias [4])")
    opt = torch.optim.Adam(net.parameters(), lr=0.005)
    xt, yt = x[N_TRAIN:], y[N_TRAIN:]
    for epoch in range(EPOCHS):
        total, perm = 0.0, torch.randperm(N_TRAIN)
        for i in range(0, N_TRAIN, BATCH):
            rows = perm[i:i + BATCH]
            loss = nn.functional.cross_entropy(net(x[rows]), y[rows])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        acc, pred = evaluate(net, xt, yt)
        n = math.ceil(N_TRAIN / BATCH)
        print(f"epoch {epoch}  loss {total / n:.4f}  held-out accuracy {acc:.3f}")
    confusion = torch.zeros(CLASSES, CLASSES, dtype=torch.int64)
    for t, p in zip(yt.tolist(), pred.tolist()):
        confusion[t, p] += 1
    print("held-out confusion matrix (rows: true class, columns: predicted)")
    for k in range(CLASSES):
        print(f"  {CLASS_NAMES[k]:<13}" + "".join(f" {c:4d}" for c in confusion[k].tolist()))
    save_file(net.state_dict(), path)
    net2.load_state_dict(load_file(path))
    acc2, _ = evaluate(net2, xt, yt)
    print(f"reloaded from {path}: held-out accuracy {acc2:.3f}")
    sys.exit(0 if acc >= 0.95 and acc2 == acc else 1)


if __name__ == "__main__":
    main()
