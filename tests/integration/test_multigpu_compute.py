"""A rank throttled by a compute cap while its peer, on the other device of
the same container, runs long kernels (standing in for an NCCL kernel that
spins waiting for it) neither hangs nor is charged the peer's device time
(HAMi-core #142: vLLM with tensor parallelism 2 stuck under a core limit).

Wall-clock ratios, as in test_compute.py; the bounds are wide because only
the absence of a hang and of cross-device charging is asserted here."""
import threading

CAP = 40


def test_a_throttled_rank_beside_a_peer_in_a_long_kernel_neither_hangs_nor_pays_for_it(world):
    w = world(limit=None, extra={"GPUSLICE_CORES": str(CAP), "GPUSLICE_SIM_DEVICES": "2"})
    rank, peer = w.client(), w.client()
    rank.ok("init 0")
    peer.ok("init 1")
    rank.ok("kernel 2000")       # 2 ms steps on device 0
    peer.ok("kernel 500000")     # 0.5 s kernels on device 1, back to back
    out = {}

    def go(name, client, line):
        out[name] = client.ok(line)

    ts = [threading.Thread(target=go, args=("peer", peer, "run kernel 3.0 0 1")),
          threading.Thread(target=go, args=("rank", rank, "run kernel 2.0 0.5 4"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts), "a rank hung"
    ratio = out["rank"]["ratio_ppm"] / 1e6
    # Charged the peer's device-1 time, the rank would fall far below its cap.
    assert CAP / 100 - 0.10 <= ratio <= CAP / 100 + 0.05, ratio
    assert out["peer"]["launches"] >= 1
    rank.close()
    peer.close()
