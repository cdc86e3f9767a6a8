"""bench/compute/summarize.py, the reader of what run_gpu.sh brings back: a
capturns line's goal, work a busy second and busy time a unit of work, and
a debug log's counts and event records an interval, from made-up lines
whose figures are worked out here."""
import json
import os
import subprocess
import sys
import tarfile

SUMMARIZE = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "compute", "summarize.py")


def summarize(*args):
    return subprocess.run([sys.executable, SUMMARIZE, *map(str, args)], capture_output=True, text=True,
                          timeout=60, check=True).stdout


def nvml(util):
    return {"0.3-1.3s": {"sm_mhz": 1980, "power_w": 200.0, "power_capped": 0.0, "util": 99.0},
            "1.3-2.5s": {"sm_mhz": 1980, "power_w": 200.0, "power_capped": 0.0, "util": util}}


def cost(n, what, ms):
    return (f"gpuslice[7] debug: compute limiter cost: {n} {what} (why), {ms:.3f} ms in all "
            f"({1000 * ms / n:.2f} us each, longest 9.00 us)\n")


def test_a_capped_line_and_its_log(tmp_path):
    # alone: 50 % busy at 5000 steps/s, 100 us a step; capped at 30: 30 %
    # busy at 2500 steps/s, 120 us a step, half alone's steps: ratio 0.5
    line = {"scenario": "capturns30", "load": "graphinf", "lib": "cap30-0", "ratio": 0.5, "ratio_refs": 0.5,
            "refs": 2, "capped": {"rate": 2500.0}, "alone": {"rate": 5000.0},
            "nvml": {"capped": nvml(30.0), "alone": nvml(50.0)}, "tag": "t"}
    jsonl = tmp_path / "gputime.jsonl"
    jsonl.write_text(json.dumps(line) + "\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    outer = "gpuslice[7] debug: outer GPU-x: occupancy 1 ppm -> c {} s 1, use 1 ppm, wanted 3 ms ago\n"
    (logs / "01-graphinf.region.log").write_text(
        outer.format("0 (not learnt)") +  # a new process's first run: counts
        outer.format("1") +
        "gpuslice[7] debug: GPU-x: running free at device 1 ppm\n" +
        outer.format("0 (not learnt)") * 3 +  # free, c forgotten as it began: not
        "gpuslice[7] debug: GPU-x: back to windows at device 9 ppm\n" +  # ends on the third: counts
        outer.format("0 (not learnt)") +  # under windows: counts
        outer.format("1") +
        "gpuslice[7] debug: GPU-x: running free at device 1 ppm\n" +
        cost(1000, "interval closes of the probes that found the work drained", 5.0) +
        cost(1000, "start events of the intervals those closes began", 2.0) +
        cost(3000, "progress markers", 6.0) +
        cost(800, "markers at the tenant's waits for its work", 1.6))
    (logs / "02-plain.log").write_text("no limiter here\n")
    out = summarize(jsonl, "--logs", logs)
    check_capped_line_and_log(out)
    # the same as bench/compute/table.sh leaves it: OUT/PART-N/gputime.jsonl
    # and the logs packed beside it, as run_gpu.sh packs them
    part = tmp_path / "out" / "single-2"
    part.mkdir(parents=True)
    (part / "gputime.jsonl").write_text(jsonl.read_text())
    with tarfile.open(part / "logs.tgz", "w:gz") as tar:
        tar.add(logs, arcname=".")
    again = summarize(tmp_path / "out")
    check_capped_line_and_log(again)
    assert again == out


def check_capped_line_and_log(out):
    # goal min(1, 0.3 / 0.5) - 0.05 = 0.55, missed; 0.5 x 0.5 / 0.3 = 0.83 of
    # alone's work a busy second; 0.30 / 2500 = 120 us, 0.50 / 5000 = 100 us
    assert "u 0.500 p/u 0.600 goal 0.550 MISSED" in out, out
    assert "OVER" not in out, out  # busy 0.30 under cap 30
    assert "a busy s 0.83" in out, out
    assert "busy us a unit 120.0 (alone 100.0)" in out, out
    # (1000 start events + 3000 markers) / 1000 closes
    assert "records an interval 4.0" in out, out
    assert "markers at the tenant's waits for its work 800 (2 ms, 2.00 us each)" in out, out
    assert "free runs 2 begun (0 while held), 1 ended" in out, out
    assert "outer runs under windows with c not learnt 3;" in out, out
    assert "02-plain" not in out, out


def test_a_line_without_readings_prints_no_figures(tmp_path):
    line = {"scenario": "capturns10", "load": "matmul", "lib": "cap10-0", "ratio": 0.1, "capped": {"rate": 10.0},
            "alone": {"rate": 100.0}}
    jsonl = tmp_path / "gputime.jsonl"
    jsonl.write_text(json.dumps(line) + "\n")
    out = summarize(jsonl)
    assert "ratio 0.100" in out and "goal" not in out and "busy us" not in out, out


def test_a_cap_that_let_the_gpu_be_busier_than_p_is_marked(tmp_path):
    # GPU-bound: alone 0.92 busy; under cap 30 busy 0.34 over the turns'
    # rest, past 0.33, though its ratio (0.36) meets min(1, 0.3 / 0.92) - 0.05
    line = {"scenario": "capturns30", "load": "matmul", "lib": "cap30-0", "ratio": 0.36, "ratio_refs": 0.36,
            "refs": 2, "capped": {"rate": 360.0}, "alone": {"rate": 1000.0},
            "nvml": {"capped": nvml(34.0), "alone": nvml(92.0)}}
    jsonl = tmp_path / "gputime.jsonl"
    jsonl.write_text(json.dumps(line) + "\n")
    out = summarize(jsonl)
    assert "u 0.920 p/u 0.326 goal 0.276 met  BUSY 0.340 OVER p + 0.03" in out, out


def test_the_other_scenarios_get_a_line_each(tmp_path):
    lines = [{"scenario": "fresh30", "load": "matmul", "copy": 1, "first_s": 0.3431, "after": 0.3047},
             {"scenario": "two-agent-caps30/70", "a": 0.2921, "b": 0.6962},
             {"scenario": "four-shares10:20:30:40", "parts": [0.09, 0.197, 0.3, 0.398], "device_busy": 0.967},
             {"scenario": "launch-rate-c-paired", "nolimit_vs_native": 0.9971, "cap99_vs_native": 0.9815},
             {"scenario": "coloc-cap70/30", "round": 1, "inf_ratio": 0.878, "inf_p99_vs_alone": 1.62,
              "train_ratio": 0.26},
             {"scenario": "turns-D-share", "inf_ratio": 0.7, "inf_p99_vs_alone": 1.3},
             {"scenario": "turns", "error": ["no GPU"]},
             {"scenario": "device", "idle_power_w": 80}]
    jsonl = tmp_path / "gputime.jsonl"
    jsonl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = summarize(jsonl)
    assert "fresh30 matmul copy 1: first second 0.343, after 0.305" in out, out
    assert "two-agent-caps30/70: 0.292 / 0.696" in out, out
    assert "four-shares10:20:30:40: 0.090 / 0.197 / 0.300 / 0.398 (device 0.967 busy)" in out, out
    assert "launch-rate-c-paired: no limit 0.9971, cap 99 0.9815 of native" in out, out
    assert "coloc-cap70/30 round 1: inference 0.878 (p99 1.62 x alone), training 0.260" in out, out
    assert "turns-D-share: inference 0.700 (p99 1.30 x alone)\n" in out, out
    assert 'turns: error ["no GPU"]' in out, out
    assert "device" not in out.replace("(device", ""), out
