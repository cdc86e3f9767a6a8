#!/usr/bin/env python3
"""Drives paths_check (paths_check.c) on a real GPU, once under the
interposer with a 1 GiB limit and once without it, and prints what each
memory path took, measured device-wide with nvidia-smi (which runs outside
the interposer, so it sees the real usage).

usage: paths_check.py <paths_check binary> <libgpuslice.so> <state dir>"""
import os
import subprocess
import sys

MIB = 1 << 20
LIMIT = "1GiB"


def used_mib():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def one_run(binary, env, label):
    base = used_mib()
    exporter = subprocess.Popen([binary, "export", str(2048 * MIB)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    first = exporter.stdout.readline().split()
    fields = dict(t.split("=", 1) for t in first[1:] if "=" in t)
    print(f"## {label}\n\n{base} MiB in use before the run; then the exporter "
          f"(another container, no limit) holds 2048 MiB for the VMM import (rc={fields.get('rc')})\n")
    print("| step | MiB in use on the GPU | MiB taken since the context existed |\n|---|---|---|")
    results = []
    runner = subprocess.Popen([binary, "run", fields["pid"], fields["fd"]], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    exp_base = None
    for line in runner.stdout:
        words = line.split()
        if not words:
            continue
        if words[0] == "measure":
            now = used_mib()
            if exp_base is None:
                exp_base = now
            print(f"| {words[1]} | {now} | {now - exp_base} |")
            runner.stdin.write("\n")
            runner.stdin.flush()
        elif words[0] == "release":
            exporter.stdin.write("\n")
            exporter.stdin.flush()
            exporter.stdout.readline()
        elif words[0] == "result":
            results.append(" ".join(words[1:]))
        elif words[0] == "done":
            break
    rc = runner.wait()
    if rc:
        results.append(f"paths_check exited with {rc}")
    exporter.stdin.close()
    exporter.wait()
    print("\n" + "\n".join(f"- {r}" for r in results) + "\n")


def main():
    binary, lib, state = sys.argv[1:4]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSLICE_", "CUDA_DEVICE_"))}
    limited = {**env, "LD_PRELOAD": lib, "CUDA_DEVICE_MEMORY_LIMIT": LIMIT,
               "GPUSLICE_REGION": os.path.join(state, "paths.region")}
    one_run(binary, limited, f"under the interposer, limit {LIMIT}")
    one_run(binary, env, "native (no interposer)")


if __name__ == "__main__":
    main()
