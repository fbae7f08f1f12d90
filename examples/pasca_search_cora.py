"""Check a finished `sgl search` study against hand-designed models, on the test split.

The search only ever saw validation accuracy. Here every design on the Pareto front is
retrained with 5 seeds (validation-selected epoch) and its *test* accuracy and time per
training epoch are compared with PaSca-V3 and GAMLP trained with their defaults:

    sgl search --dataset cora --root ../shared/datasets/planetoid --trials 60 --threads 1 \
        --objectives accuracy,latency,epoch_time --storage cora.db
    python examples/pasca_search_cora.py --storage cora.db --root ../shared/datasets/planetoid

Prints the table and whether the front holds (a) a design at least as accurate as
PaSca-V3 and (b) a design >= 3x faster per epoch than GAMLP within 2 points of its accuracy.
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, Dict

import torch

import sgl
from sgl.models import SGAPConfig, SGAPModel, build_model, default_train_config, model_config
from sgl.search import load_result
from sgl.tasks import TrainConfig, run_node_classification


def measure(factory: Callable[[], Any], graph, train: Dict[str, Any], seeds: int) -> Dict[str, float]:
    record = run_node_classification(factory, graph, range(seeds), TrainConfig(**train, progress=False))
    epochs = sum(r["epochs_run"] for r in record["runs"])
    return {"test": 100 * record["test_acc"]["mean"], "std": 100 * record["test_acc"]["std"],
            "val": 100 * record["val_acc"]["mean"], "epoch_ms": 1000 * record["train_time_s"] / epochs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", required=True)
    parser.add_argument("--study")
    parser.add_argument("--root")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    result = load_result(args.storage, args.study)
    meta = result.study.user_attrs["sgl_search"]
    graph = sgl.datasets.load(meta["dataset"], root=args.root or meta.get("root"), **meta.get("dataset_options", {}))
    n, c = graph.num_features, graph.num_classes

    rows = {}
    for name in ("pasca-v3", "gamlp"):
        train = {**default_train_config(name)}
        rows[name] = measure(lambda: build_model(name, n, c, model_config(name)), graph, train, args.seeds)
    for trial in sorted(result.front, key=lambda t: -t["metrics"]["accuracy"]):
        config = SGAPConfig(**trial["model_config"])
        rows[f"trial {trial['number']}"] = measure(lambda: SGAPModel(n, c, config), graph, dict(meta["train"]),
                                                   args.seeds)
        rows[f"trial {trial['number']}"]["design"] = trial["design"]

    print(f"{'model':<12} {'test acc':>13} {'val acc':>8} {'ms/epoch':>9}  design")
    for name, row in rows.items():
        d = row.get("design")
        text = "" if d is None else (f"{d['graph_op']} k={d['k']} {d['message']} {d['base_model']}"
                                     f"({d['num_layers']}x{d['hidden']})"
                                     + (f" post {d['post_steps']}x{d['post_graph_op']}/{d['post_message']}"
                                        if d["post_steps"] else ""))
        print(f"{name:<12} {row['test']:>6.2f} ± {row['std']:<4.2f} {row['val']:>8.2f} {row['epoch_ms']:>9.2f}  {text}")
    front = {k: v for k, v in rows.items() if k.startswith("trial")}
    v3, gamlp = rows["pasca-v3"], rows["gamlp"]
    accurate = [k for k, v in front.items() if v["test"] >= v3["test"]]
    fast = [k for k, v in front.items() if v["epoch_ms"] * 3 <= gamlp["epoch_ms"] and v["test"] >= gamlp["test"] - 2]
    print(f"\n(a) front designs with test accuracy >= PaSca-V3 ({v3['test']:.2f}): {accurate or 'none'}")
    print(f"(b) front designs >= 3x faster per epoch than GAMLP ({gamlp['epoch_ms']:.2f} ms) within 2 points of its "
          f"accuracy ({gamlp['test']:.2f}): "
          + (", ".join(f"{k} ({gamlp['epoch_ms'] / front[k]['epoch_ms']:.1f}x, {front[k]['test']:.2f})" for k in fast)
             or "none"))


if __name__ == "__main__":
    main()
