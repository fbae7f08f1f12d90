"""Write a search's results: Pareto front and all trials as CSV/JSON, and a scatter plot.

Files (each written atomically): ``front.csv``, ``front.json``, ``trials.csv`` and
``pareto.png`` (accuracy against the first cost objective, front highlighted).
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Dict, List, Sequence, Union

from sgl.fileio import atomic_write
from sgl.search.objectives import OBJECTIVES, pareto_front
from sgl.search.study import SearchResult

__all__ = ["write_results", "format_front"]

_DESIGN_COLUMNS = ("graph_op", "k", "message", "base_model", "num_layers", "hidden", "dropout", "post_steps",
                   "post_graph_op", "post_message")
_METRIC_COLUMNS = ("accuracy", "epoch_time", "train_time", "latency", "memory", "params")


def _rows(trials: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    rows = []
    for t in trials:
        row = {"trial": t["number"], "on_front": t["on_front"]}
        row.update({k: t["metrics"].get(k) for k in _METRIC_COLUMNS})
        design = dict(t["design"])
        if design.get("post_steps", 0) == 0:
            design["post_graph_op"] = design["post_message"] = ""
        row.update({k: design.get(k) for k in _DESIGN_COLUMNS} if "model" not in design else design)
        rows.append(row)
    return rows


def _csv(rows: List[Dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["trial"])
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def format_front(result: SearchResult, all_trials: bool = False) -> str:
    """A readable table of the front (sorted by accuracy, best first)."""
    trials = result.trials if all_trials else result.front
    trials = sorted(trials, key=lambda t: -t["metrics"].get("accuracy", 0.0))
    names = [o.name for o in result.objectives]
    header = f"{'trial':>5}  " + "  ".join(f"{n:>10}" for n in names) + "  design"
    lines = [header]
    for t in trials:
        d = t["design"]
        if "model" in d:  # a heterogeneous design (sgl.search.hetero): every knob by name
            values = "  ".join(f"{t['metrics'][n]:>10.4f}" for n in names)
            lines.append(f"{t['number']:>5}  {values}  " + " ".join(f"{k}={v}" for k, v in d.items() if v is not None))
            continue
        post = (f" post {d['post_steps']}x{d['post_graph_op']}/{d['post_message']}" if d["post_steps"] else "")
        text = (f"{d['graph_op']} k={d['k']} {d['message']} {d['base_model']}({d['num_layers']}x{d['hidden']}, "
                f"p={d['dropout']}){post}")
        values = "  ".join(f"{t['metrics'][n]:>10.4f}" for n in names)
        lines.append(f"{t['number']:>5}  {values}  {text}")
    return "\n".join(lines)


def _plot(result: SearchResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [o.name for o in result.objectives]
    y_name = "accuracy" if "accuracy" in names else names[0]
    x_name = next(n for n in names if n != y_name)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    rest = [t for t in result.trials if not t["on_front"]]
    ax.scatter([t["metrics"][x_name] for t in rest], [t["metrics"][y_name] for t in rest], s=18, c="0.65",
               label="trials")
    front = result.front
    label = "Pareto front" if len(names) == 2 else f"Pareto front ({', '.join(names)})"
    ax.scatter([t["metrics"][x_name] for t in front], [t["metrics"][y_name] for t in front], s=36, c="tab:red",
               label=label, zorder=3)
    # the 2-D front of the plotted pair, as a staircase
    pair = [(t["metrics"][x_name], t["metrics"][y_name]) for t in result.trials]
    directions = [OBJECTIVES[x_name].direction, OBJECTIVES[y_name].direction]
    stairs = sorted(pair[i] for i in pareto_front(pair, directions))
    if len(names) > 2 and stairs:
        ax.step([p[0] for p in stairs], [p[1] for p in stairs], where="post", c="tab:red", lw=1,
                label=f"front of {y_name} vs {x_name}")
    elif stairs:
        ax.plot([p[0] for p in stairs], [p[1] for p in stairs], c="tab:red", lw=1)
    unit = {"epoch_time": " (s)", "train_time": " (s)", "latency": " (s)", "memory": " (MB)"}
    ax.set_xlabel(x_name + unit.get(x_name, ""))
    ax.set_ylabel("validation " + y_name if y_name == "accuracy" else y_name)
    if x_name in ("latency", "epoch_time", "train_time"):
        ax.set_xscale("log")
    ax.set_title(f"sgl search: {result.study.study_name} ({len(result.trials)} trials)")
    ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    with atomic_write(path, "wb") as handle:
        handle.write(buffer.getvalue())


def write_results(result: SearchResult, out_dir: Union[str, Path], plot: bool = True) -> Dict[str, Path]:
    """Write front/trials tables (and the plot); returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"front_csv": out / "front.csv", "front_json": out / "front.json", "trials_csv": out / "trials.csv"}
    with atomic_write(paths["front_csv"], "w") as handle:
        handle.write(_csv(_rows(result.front)))
    with atomic_write(paths["trials_csv"], "w") as handle:
        handle.write(_csv(_rows(result.trials)))
    with atomic_write(paths["front_json"], "w") as handle:
        json.dump({"study": result.study.study_name, "objectives": [o.name for o in result.objectives],
                   "front": result.front}, handle, indent=2, default=str)
    if plot and result.trials:
        paths["plot"] = out / "pareto.png"
        _plot(result, paths["plot"])
    return paths
