"""One tenant of bench/compute/gputime.py: runs a load for --secs after
--warm seconds; prints one JSON line: units per second and the latency of
each unit (p50/p99, ms). With --sync DIR it announces that it is warm
(DIR/ready-PID) and keeps warming until DIR/go exists, so that tenants run
side by side measure the same span (a transformers decoder takes ~15 s to
start, a matmul loop ~3 s)."""
import argparse
import json
import os
import time

import torch


BIN_S = 0.25  # the span of each rate_bins entry


def announce_ready(d):
    """A file of its own in d saying this tenant is warm: named by more than
    the pid, which is 1 for every tenant in a pid namespace of its own."""
    open(os.path.join(d, f"ready-{os.getpid()}-{os.urandom(4).hex()}"), "w").close()


def decoder(dev, heavy=False):
    """A Llama-style decoder generating 16 tokens a step. heavy: a larger
    model (hidden 2048, 16 layers) on a batch of 32 prompts, busy enough on
    the GPU to contend with a neighbour rather than wait on its host."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
        hidden, inter, layers, batch = (2048, 5632, 16, 32) if heavy else (1024, 2816, 8, 1)
        cfg = LlamaConfig(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=16,
                          num_key_value_heads=16, vocab_size=32000, max_position_embeddings=512)
        m = LlamaForCausalLM(cfg).to(dev, torch.bfloat16).eval()
        ids = torch.randint(0, 32000, (batch, 16), device=dev)

        def step():
            with torch.no_grad():
                m.generate(ids, max_new_tokens=16, min_new_tokens=16, do_sample=False, pad_token_id=0)
        return step, "transformers", 16
    except ImportError:
        ws = [torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16) for _ in range(32)]
        x = torch.randn(1, 1024, device=dev, dtype=torch.bfloat16)

        def step():
            for _ in range(16):
                h = x
                for w in ws:
                    h = torch.nn.functional.silu(h @ w)
                h.sum().item()
        return step, "fallback", 16


def jax_train():
    """A jitted JAX training step (a 4096-wide MLP on a batch of 1024, SGD),
    waiting for its loss each step. JAX preallocates most of the GPU's
    memory unless told not to, which would refuse the neighbours'."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    k = jax.random.split(jax.random.PRNGKey(0), 4)
    params = [jax.random.normal(k[i], (4096, 4096), jnp.float32) * 0.01 for i in range(3)]
    xb = jax.random.normal(k[3], (1024, 4096), jnp.float32)

    def loss(ps, x):
        for w in ps:
            x = jax.nn.gelu(x @ w)
        return jnp.mean(x * x)

    @jax.jit
    def update(ps, x):
        val, g = jax.value_and_grad(loss)(ps, x)
        return [w - 1e-3 * gw for w, gw in zip(ps, g)], val

    state = {"p": params}

    def step():
        state["p"], val = update(state["p"], xb)
        val.block_until_ready()
    return step, "jax", 1


def cupy_infer():
    """A CuPy loop of 20 fp16 2048^2 matmuls with an activation between
    them, reading one value back each step (as inference reads its output)."""
    import cupy as cp
    ws = [cp.random.standard_normal((2048, 2048), dtype=cp.float32).astype(cp.float16) * 0.02 for _ in range(4)]
    x = cp.random.standard_normal((2048, 2048), dtype=cp.float32).astype(cp.float16)

    def step():
        h = x
        for i in range(20):
            h = cp.tanh(h @ ws[i % 4])
        float(h[0, 0])
    return step, "cupy", 20


def take_turns(a, step, per, kind, settle=0.3):
    """Runs only while DIR/turn names one of --names; DIR/ready-PID says it is
    warm, DIR/stop ends it. Steps begun in the first `settle` seconds of a
    turn (the previous turn's last step may still run) are not measured.
    Prints, per name, units per second over the measured steps and their
    latency (p50/p99, ms): tenants measured in alternating turns of a few
    seconds see the same host, whose speed drifted by 20-40 % between
    20-second runs on the device machines."""
    names = set(a.names.split(","))
    announce_ready(a.turns)
    lat = {n: [] for n in names}
    cur, since = None, time.time()
    while not os.path.exists(os.path.join(a.turns, "stop")):
        try:
            with open(os.path.join(a.turns, "turn")) as f:
                t = f.read().strip()
        except OSError:
            t = ""
        if t != cur:
            cur, since = t, time.time()
        if t not in names:
            time.sleep(0.002)
            continue
        s = time.time()
        step()
        if s - since >= settle:
            lat[t].append(time.time() - s)
    out = {"load": a.load, "kind": kind}
    for n, v in lat.items():
        v.sort()
        out[n] = {"rate": len(v) * per / sum(v) if v else 0, "steps": len(v),
                  "p50_ms": 1e3 * v[len(v) // 2] / per if v else 0,
                  "p99_ms": 1e3 * v[int(len(v) * 0.99)] / per if v else 0}
    print(json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--load", required=True)
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--warm", type=float, default=3)
    ap.add_argument("--sync", default=None)
    ap.add_argument("--turns", default=None, help="DIR: run only in the turns named in --names (see take_turns)")
    ap.add_argument("--names", default="")
    a = ap.parse_args()
    dev = torch.device("cuda")
    kind, per = a.load, 1
    if a.load in ("matmul", "matmul1", "matmul-dense", "small"):
        # matmul1: the same 4096^2 training loop waiting for every matmul
        # (one kernel queued at a time); matmul-dense: waiting every 50, so
        # the GPU idles ~0.3 % of the time alone where matmul idles 1-3 %
        n = 1024 if a.load == "small" else 4096
        x = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        y = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        out = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
        per = {"matmul": 10, "matmul1": 1, "matmul-dense": 50, "small": 200}[a.load]

        def step():
            for _ in range(per):
                torch.matmul(x, y, out=out)
            torch.cuda.synchronize()
    elif a.load in ("decoder", "decoder-heavy"):
        step, kind, per = decoder(dev, heavy=a.load == "decoder-heavy")
    elif a.load in ("train", "graphinf"):
        m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
        xb = torch.randn(64, 1024, device=dev)
        if a.load == "train":
            opt = torch.optim.SGD(m.parameters(), lr=1e-3)
            f = torch.compile(lambda v: m(v).square().mean())

            def step():
                opt.zero_grad(set_to_none=True)
                f(xb).backward()
                opt.step()
                torch.cuda.synchronize()
        else:
            f = torch.compile(m, mode="reduce-overhead")

            def step():
                with torch.no_grad():
                    f(xb).sum().item()
    elif a.load == "jax":
        step, kind, per = jax_train()
    elif a.load == "cupy":
        step, kind, per = cupy_infer()
    elif a.load == "notebook":
        # a notebook that sits mostly idle: one small kernel every 50 ms
        z = torch.zeros(1, device=dev)

        def step():
            z.add_(1)
            torch.cuda.synchronize()
            time.sleep(0.05)
    elif a.load == "launch":
        z = torch.zeros(1, device=dev)
        per = 1000

        def step():
            for _ in range(per):
                z.add_(1)
            torch.cuda.synchronize()
    t0 = time.time()
    while time.time() - t0 < a.warm:
        step()
    if a.turns:
        return take_turns(a, step, per, kind)
    if a.sync:
        announce_ready(a.sync)
        go = os.path.join(a.sync, "go")
        while not os.path.exists(go):
            step()
    lat, ends, t0 = [], [], time.time()
    start = t0
    while time.time() - t0 < a.secs:
        s = time.time()
        step()
        ends.append(time.time())
        lat.append(ends[-1] - s)
    el = time.time() - t0
    lat.sort()
    # the rate in each whole BIN_S from t0: how a new tenant's first second
    # compares with the rest (gputime.py's fresh scenario)
    bins = [0] * int(el / BIN_S)
    for e in ends:
        i = int((e - t0) / BIN_S)
        if i < len(bins):
            bins[i] += per
    print(json.dumps({"load": a.load, "kind": kind, "rate": len(lat) * per / el, "t0": start, "t1": start + el,
                      "p50_ms": 1e3 * lat[len(lat) // 2] / per, "p99_ms": 1e3 * lat[int(len(lat) * 0.99)] / per,
                      "bin_s": BIN_S, "rate_bins": [n / BIN_S for n in bins]}),
          flush=True)


if __name__ == "__main__":
    main()
