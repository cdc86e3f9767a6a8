"""Tensor-parallel inference: a Llama-style decoder (random weights, nothing
downloaded) sharded over the ranks Megatron-style -- attention heads and the
MLP's hidden units split by rank, an all-reduce after the attention output
and after the MLP of every layer -- generating tokens one at a time with a
KV cache, as a TP-2 inference server decodes. Prints one JSON line per rank:
tokens per second and the p50/p99 token latency.

  torchrun --nproc_per_node=2 tp_infer.py [--tokens 256] [--layers 16]"""
import argparse
import time

import torch
import torch.distributed as dist

from common import emit, setup

ap = argparse.ArgumentParser()
ap.add_argument("--tokens", type=int, default=256)
ap.add_argument("--layers", type=int, default=16)
ap.add_argument("--hidden", type=int, default=4096)
ap.add_argument("--heads", type=int, default=32)
ap.add_argument("--ffn", type=int, default=11008)
ap.add_argument("--batch", type=int, default=4)
args = ap.parse_args()
rank, world, dev = setup()
torch.manual_seed(7 + rank)
dt = torch.bfloat16
H, NH, F = args.hidden, args.heads // world, args.ffn // world
HD = H // args.heads
CTX = args.tokens + 8


def w(*shape):
    return torch.randn(*shape, device=dev, dtype=dt) * 0.02


layers = [dict(qkv=w(H, 3 * NH * HD), o=w(NH * HD, H), up=w(H, 2 * F), down=w(F, H),
               k=torch.zeros(args.batch, NH, CTX, HD, device=dev, dtype=dt),
               v=torch.zeros(args.batch, NH, CTX, HD, device=dev, dtype=dt)) for _ in range(args.layers)]
emb, head = w(32000, H), w(H, 32000)


def rms(x):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(dt)


@torch.no_grad()
def step(tok, pos):
    x = emb[tok]  # (batch, H)
    for L in layers:
        q, k, v = (rms(x) @ L["qkv"]).view(args.batch, 3, NH, HD).unbind(1)
        L["k"][:, :, pos] = k
        L["v"][:, :, pos] = v
        att = torch.softmax((q.unsqueeze(2) @ L["k"][:, :, :pos + 1].transpose(-1, -2)) / HD ** 0.5, -1)
        a = (att @ L["v"][:, :, :pos + 1]).reshape(args.batch, NH * HD) @ L["o"]
        dist.all_reduce(a)
        x = x + a
        g, u = (rms(x) @ L["up"]).chunk(2, -1)
        m = (torch.nn.functional.silu(g) * u) @ L["down"]
        dist.all_reduce(m)
        x = x + m
    logits = rms(x) @ head
    dist.all_reduce(logits)
    return logits.argmax(-1)


tok = torch.zeros(args.batch, dtype=torch.long, device=dev)
for pos in range(8):  # warm-up
    tok = step(tok, pos)
torch.cuda.synchronize()
lat = []
t0 = time.perf_counter()
for pos in range(8, CTX):
    t = time.perf_counter()
    tok = step(tok, pos)
    tok.cpu()  # the sampled token goes back to the host, as a server streams it
    lat.append(time.perf_counter() - t)
secs = time.perf_counter() - t0
lat.sort()
emit(rank, test="tp_infer", tokens_per_s=len(lat) * args.batch / secs, p50_ms=lat[len(lat) // 2] * 1e3,
     p99_ms=lat[int(len(lat) * 0.99)] * 1e3)
