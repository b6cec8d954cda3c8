"""Python Accelerate's side of scripts/device-check's comparison: the model, sizes and loop of
bf16_step.cpp, trained with accelerate.Accelerator(mixed_precision=...). Prints
  RESULT <ms per step> <first loss> <last loss> <device>
usage: bf16_step.py [--fused] [bf16|fp16|no] [steps] [dim blocks batch seq]
(--fused: AdamW(fused=True); without it torch's default, the foreach kernels on CUDA)"""
import math
import sys
import time

import torch
import torch.nn.functional as F
from accelerate import Accelerator

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


def main(argv):
    fused = "--fused" in argv
    argv = [a for a in argv if a != "--fused"]
    precision = argv[0] if argv else "bf16"
    steps = int(argv[1]) if len(argv) > 1 else 20
    dim, blocks, batch, seq = (int(v) for v in argv[2:6]) if len(argv) >= 6 else (1024, 16, 8, 512)
    accelerator = Accelerator(mixed_precision=precision)
    torch.manual_seed(0)
    model = Lm(dim, blocks)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True if fused else None)
    model, optimizer = accelerator.prepare(model, optimizer)
    device = accelerator.device
    tokens = torch.randint(VOCAB, (batch, seq + 1), device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    first = 0.0
    for i in range(steps + 3):
        if i == 3:
            sync()
            start = time.perf_counter()
        optimizer.zero_grad()
        with accelerator.autocast():
            logits = model(tokens[:, :seq])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB).float(), tokens[:, 1:].reshape(-1))
        accelerator.backward(loss)
        optimizer.step()
        if i == 0:
            first = loss.item()
    sync()
    ms = (time.perf_counter() - start) * 1000 / steps
    with torch.no_grad(), accelerator.autocast():
        last = F.cross_entropy(model(tokens[:, :seq]).reshape(-1, VOCAB).float(), tokens[:, 1:].reshape(-1)).item()
    print(f"RESULT {ms:.3f} {first:.4f} {last:.4f} {device}")


if __name__ == "__main__":
    main(sys.argv[1:])
