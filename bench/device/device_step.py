"""The Python side of scripts/device-check's comparison: the models, sizes and loop of
device_step.cpp, trained with accelerate.Accelerator(mixed_precision=...), or with --plain by PyTorch
alone (torch.autocast, torch.amp.GradScaler for fp16, no Accelerate): what a Python user without
Accelerate runs. Prints
  RESULT <ms per step> <first loss> <last loss> <device>
usage: device_step.py [--model lm|cnn] [--fused] [--plain] [bf16|fp16|no] [steps]
                      [lm: dim blocks batch seq | cnn: batch]
(--fused: AdamW(fused=True); without it torch's default, the foreach kernels on CUDA)"""
import contextlib
import math
import sys
import time

import torch
import torch.nn.functional as F

VOCAB = 8192


class Block(torch.nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.dim, self.heads = dim, heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
        self.out = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, hidden)
        self.down = torch.nn.Linear(hidden, dim)

    def forward(self, x):
        b, t, _ = x.shape
        parts = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, self.dim // self.heads).permute(2, 0, 3, 1, 4)
        scores = parts[0] @ parts[1].transpose(-2, -1) / math.sqrt(self.dim // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        attended = scores.masked_fill(mask, float("-inf")).softmax(-1) @ parts[2]
        x = x + self.out(attended.permute(0, 2, 1, 3).reshape(b, t, self.dim))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Lm(torch.nn.Module):
    def __init__(self, dim, blocks):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, dim // 64, 4 * dim) for _ in range(blocks))
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


class Cnn(torch.nn.Module):
    """step_models.h's Cnn: registered in the same order, so one seed gives the same weights."""

    def __init__(self):
        super().__init__()
        widths = [3, 64, 128, 256]
        for i in range(3):
            self.add_module(f"conv{i}", torch.nn.Conv2d(widths[i], widths[i + 1], 3, padding=1))
            self.add_module(f"norm{i}", torch.nn.BatchNorm2d(widths[i + 1]))
        self.head = torch.nn.Linear(256, 10)

    def forward(self, x):
        for i in range(3):
            x = F.relu(getattr(self, f"norm{i}")(getattr(self, f"conv{i}")(x)))
        return self.head(x.mean((2, 3)))


def workload(model_name, sizes, device):
    """The model and the one batch every step trains on (the loss must fall)."""
    torch.manual_seed(0)
    if model_name == "lm":
        dim, blocks, batch, seq = (sizes + [1024, 16, 8, 512][len(sizes):])[:4]
        model = Lm(dim, blocks)
        tokens = torch.randint(VOCAB, (batch, seq + 1), device=device)
        return model, tokens[:, :seq], tokens[:, 1:].reshape(-1)
    batch = sizes[0] if sizes else 256
    model = Cnn()
    images = torch.randn(batch, 3, 32, 32, device=device)
    labels = torch.randint(10, (batch,), device=device)
    return model, images, labels


def main(argv):
    flags = {a for a in argv if a.startswith("--") and a != "--model"}
    model_name = argv[argv.index("--model") + 1] if "--model" in argv else "lm"
    positional = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--model")]
    unknown = flags - {"--fused", "--plain"}
    if unknown or model_name not in ("lm", "cnn"):
        sys.exit(f"device_step.py: unknown flag or model: {sorted(unknown) or model_name}\n{__doc__}")
    fused, plain = "--fused" in flags, "--plain" in flags
    precision = positional[0] if positional else "bf16"
    steps = int(positional[1]) if len(positional) > 1 else 20
    sizes = [int(v) for v in positional[2:]]

    if plain:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        autocast = (lambda: torch.autocast(device.type, dtype=dtype)) if dtype else contextlib.nullcontext
        scaler = torch.amp.GradScaler(device.type) if precision == "fp16" and device.type == "cuda" else None
        backward = (lambda loss: scaler.scale(loss).backward()) if scaler else (lambda loss: loss.backward())
    else:
        from accelerate import Accelerator

        accelerator = Accelerator(mixed_precision=precision)
        device = accelerator.device
        autocast, backward = accelerator.autocast, accelerator.backward
    model, inputs, targets = workload(model_name, sizes, device)
    if plain:
        model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if fused else None)
    if plain:

        def step_optimizer():
            if scaler:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
    else:
        model, optimizer = accelerator.prepare(model, optimizer)
        step_optimizer = optimizer.step

    def loss_of():
        out = model(inputs)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), targets)

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    first = 0.0
    for i in range(steps + 3):
        if i == 3:
            sync()
            start = time.perf_counter()
        optimizer.zero_grad()
        with autocast():
            loss = loss_of()
        backward(loss)
        step_optimizer()
        if i == 0:
            first = loss.item()
    sync()
    ms = (time.perf_counter() - start) * 1000 / steps
    with torch.no_grad(), autocast():
        last = loss_of().item()
    print(f"RESULT {ms:.3f} {first:.4f} {last:.4f} {device}")


if __name__ == "__main__":
    main(sys.argv[1:])
