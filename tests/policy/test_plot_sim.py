"""bench/sim/plot_sim.py, the plot `gpuslice sim --plot` draws: with one panel
or many, its title stays inside the figure and above every panel (a single
panel is narrower than the one-line title, which it used to clip)."""
import importlib.util
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
spec = importlib.util.spec_from_file_location("plot_sim", os.path.join(ROOT, "bench", "sim", "plot_sim.py"))
plot_sim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot_sim)


def curves(tmp_path, workloads, seeds):
    path = tmp_path / "curves.csv"
    rows = ["workload,policy,seed,arrived_pct,alloc_pct"]
    for w in range(workloads):
        for policy in ("binpack", "fraglook"):
            for seed in range(seeds):
                rows += [f"list{w},{policy},{seed},{pct},{min(pct, 90 + seed) * 1.0}" for pct in range(1, 131)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def title_problems(fig):
    """Where the title leaves the figure or runs into a panel (empty when fine)."""
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    box = fig.bbox
    problems = []
    if title.x0 < box.x0 or title.x1 > box.x1 or title.y1 > box.y1:
        problems.append(f"title {title.bounds} outside the figure {box.bounds}")
    for ax in fig.axes:
        if ax.axison and title.overlaps(ax.get_tightbbox(renderer)):
            problems.append(f"title over the panel '{ax.get_title()}'")
    return problems


@pytest.mark.parametrize("workloads,seeds", [(1, 1), (1, 10), (2, 10), (4, 3)])
def test_title_inside_the_frame(tmp_path, workloads, seeds):
    data, seed_sets = plot_sim.load(curves(tmp_path, workloads, seeds))
    fig = plot_sim.plot(data, seed_sets, str(tmp_path / "out.png"), seeds)
    assert (tmp_path / "out.png").stat().st_size > 0
    assert title_problems(fig) == []
    assert f"mean of {seeds} seed" in fig._suptitle.get_text()


def test_the_check_is_real(tmp_path):
    data, seed_sets = plot_sim.load(curves(tmp_path, 1, 10))
    fig = plot_sim.plot(data, seed_sets, str(tmp_path / "out.png"), 10)
    fig.suptitle("a title far wider than one panel of the figure, as the plot's own used to be", fontsize=11)
    assert "outside the figure" in title_problems(fig)[0]
