"""DDP training of a small transformer language model on random tokens with
a fixed seed, so a run under gpuslice and a native run must print the same
loss curve. Prints one JSON line per rank: the loss of every step, tokens
per second over the timed steps, and peak memory torch saw.

  torchrun --nproc_per_node=2 ddp_train.py [--steps 200] [--batch 32] [--gpu-bound]

--gpu-bound makes each step long (bigger batch and model) so that a compute
cap, not the host, sets the pace."""
import argparse
import time

import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from common import emit, setup

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--gpu-bound", action="store_true")
args = ap.parse_args()

rank, world, dev = setup()
torch.manual_seed(1234)  # the same initial weights on every rank and every run
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.deterministic = True
VOCAB, SEQ = 8192, 256
width, layers, batch = (1024, 8, args.batch * 4) if args.gpu_bound else (512, 4, args.batch)


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, width)
        layer = nn.TransformerEncoderLayer(width, 8, 4 * width, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(width, VOCAB)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
        return self.head(self.body(self.emb(x), mask=mask, is_causal=True))


model = DDP(LM().to(dev), device_ids=[dev.index])
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
gen = torch.Generator(device=dev).manual_seed(100 + rank)  # each rank its own shard, the same every run
losses = []
warm = min(10, args.steps // 4)
t0 = None
for step in range(args.steps):
    if step == warm:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
    tokens = torch.randint(0, VOCAB, (batch, SEQ + 1), device=dev, generator=gen)
    logits = model(tokens[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())
torch.cuda.synchronize()
secs = time.perf_counter() - t0
emit(rank, test="ddp", steps=args.steps, gpu_bound=args.gpu_bound, losses=losses,
     tokens_per_s=(args.steps - warm) * batch * SEQ / secs, torch_peak_bytes=torch.cuda.max_memory_reserved(dev))
