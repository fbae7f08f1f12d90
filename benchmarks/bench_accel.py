"""GNN acceleration side by side: distillation, int8/1-bit inference, pruning, condensation (docs/acceleration.md).

One run prints every section with ratios against our own teachers (GAMLP and GCN presets):

* distillation: graph-free MLP students of GAMLP and GCN on Cora (transductive accuracy) and
  per-node inference latency on inductive nodes (20% of the test nodes hidden from training) on
  Cora and CSBM graphs (``--sizes``, default 100k; 1M runs with ``--sizes 100000,1000000``, too
  heavy for a shared 2-core machine);
* int8: GAMLP (Cora preset) and a 512-wide graph-free MLP, fp32 vs int8 linear layers
  (accuracy, throughput of the trained part over all nodes), int8 hop storage (bytes,
  accuracy), and a 1-bit binarised SGC trained quantisation-aware;
* pruning: 50% of the weights by magnitude and lottery ticket (GCN, Cora), and UGS;
* condensation: Cora -> 70 nodes by k-means (training-free), DosCond and GCond; a GCN (preset)
  trained on each, validated and tested on Cora's split; the condensation time.

    SGL_TEST_DATA=/work/shared/datasets python benchmarks/bench_accel.py --seeds 2 --gcond-epochs 30

``OMP_WAIT_POLICY=PASSIVE`` is set before numba loads: numba's OpenMP workers otherwise spin
for seconds after each propagation and, on a busy machine, slow the small torch ops that
follow by orders of magnitude (measured, see sgl/tasks/condense_hops.py); both sides of every
ratio run under the same setting.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402


def _mean(values):
    return statistics.mean(values) if values else float("nan")


def cora(root):
    import sgl

    return sgl.datasets.load("cora", root=root)


def distillation(dataset, root, options, seeds, teachers, inductive, epochs=None):
    from sgl.tasks import RunConfig, run

    rows = []
    for teacher in teachers:
        config = {"model": "mlp", "dataset": dataset, "root": root, "dataset_options": options, "seeds": seeds,
                  "distill": {"teacher": teacher, "inductive": inductive}}
        if epochs:
            config["train"] = {"epochs": epochs}
        start = time.perf_counter()
        record = run(RunConfig.from_dict(config), progress=False)
        rows.append({"teacher": teacher, "student_acc": record["test_acc"]["mean"],
                     "teacher_acc": record["teacher_test_acc"]["mean"],
                     **({"student_ind_acc": record["ind_test_acc"]["mean"],
                         "teacher_ind_acc": record["teacher_ind_test_acc"]["mean"]} if inductive else {}),
                     "student_us_per_node": record["student_latency_us_per_node"]["mean"],
                     "teacher_us_per_node": record["teacher_latency_us_per_node"]["mean"],
                     "speedup": record["latency_speedup"]["mean"], "wall_s": time.perf_counter() - start})
    return rows


def _throughput(model, features, rows, repeats=3):
    with torch.no_grad():
        model(features[rows])
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            for i in range(0, rows.numel(), 4096):
                model(features[rows[i:i + 4096]])
            best = min(best, time.perf_counter() - start)
    return rows.numel() / best


def int8_section(graph, seeds):
    from sgl.models import build_model, default_train_config, model_config
    from sgl.models.accel import Int8NodeFeatures, binarize, binary_bytes, model_bytes, quantize_int8
    from sgl.tasks import TrainConfig, Trainer
    from sgl.tasks.metrics import accuracy

    test = graph.test_mask.nonzero().flatten()
    out = {"fp32_acc": [], "int8_acc": [], "int8_hops_acc": [], "speedup": [], "hop_ratio": [],
           "bytes_ratio": [], "binary_acc": [], "binary_fp32_acc": [], "binary_bytes_ratio": [], "mlp_fp32_acc": [],
           "mlp_int8_acc": [], "mlp_speedup": []}
    model = build_model("gamlp", graph.num_features, graph.num_classes, model_config("gamlp", preset="cora"))
    features = model.precompute(graph)
    hops8 = Int8NodeFeatures.quantize(features)
    fp32_bytes = sum(h.numel() * h.element_size() for h in features.data)
    train = TrainConfig(**{**default_train_config("gamlp", "cora"), "progress": False})
    all_rows = torch.arange(graph.num_nodes)
    for seed in seeds:
        Trainer(train).fit(model, features, graph, seed=seed)
        model.eval()
        q = quantize_int8(model)
        with torch.no_grad():
            out["fp32_acc"].append(accuracy(model(features[test]), graph.y[test]))
            out["int8_acc"].append(accuracy(q(features[test]), graph.y[test]))
            out["int8_hops_acc"].append(accuracy(q(hops8[test]), graph.y[test]))
        out["speedup"].append(_throughput(q, features, all_rows) / _throughput(model, features, all_rows))
        out["hop_ratio"].append(fp32_bytes / hops8.nbytes)
        out["bytes_ratio"].append(model_bytes(model) / model_bytes(q))
        sgc_cfg = model_config("sgc", preset="cora")
        sgc_train = TrainConfig(**{**default_train_config("sgc", "cora"), "progress": False})
        sgc = build_model("sgc", graph.num_features, graph.num_classes, sgc_cfg)
        sgc_feats = sgc.precompute(graph)
        out["binary_fp32_acc"].append(Trainer(sgc_train).fit(sgc, sgc_feats, graph, seed=seed)["test_acc"])
        binary = binarize(sgc)  # still an SGC, with 1-bit linear layers: trained quantisation-aware
        mlp = build_model("mlp", graph.num_features, graph.num_classes, model_config("mlp", hidden=512))
        mlp_feats = mlp.precompute(graph)
        mlp_train = TrainConfig(**{**default_train_config("mlp"), "progress": False})
        out["mlp_fp32_acc"].append(Trainer(mlp_train).fit(mlp, mlp_feats, graph, seed=seed)["test_acc"])
        mlp.eval()
        q_mlp = quantize_int8(mlp)
        with torch.no_grad():
            out["mlp_int8_acc"].append(accuracy(q_mlp(mlp_feats[test]), graph.y[test]))
        out["mlp_speedup"].append(_throughput(q_mlp, mlp_feats, all_rows) / _throughput(mlp, mlp_feats, all_rows))
        out["binary_acc"].append(Trainer(sgc_train).fit(binary, sgc_feats, graph, seed=seed)["test_acc"])
        out["binary_bytes_ratio"].append(model_bytes(sgc) / binary_bytes(binary))
    return {k: _mean(v) for k, v in out.items()}


def pruning_section(graph, seeds, sparsity=0.5):
    from sgl.models import build_model, default_train_config, model_config
    from sgl.tasks import TrainConfig
    from sgl.tasks.prune import prune_model
    from sgl.tasks.ugs import ugs

    rows = []
    train = TrainConfig(**{**default_train_config("gcn", "cora"), "progress": False})
    factory = lambda: build_model("gcn", graph.num_features, graph.num_classes,  # noqa: E731
                                  model_config("gcn", preset="cora"))
    for method in ("magnitude", "lottery"):
        runs = [prune_model(factory, graph, sparsity, train, method=method, seed=s) for s in seeds]
        rows.append({"method": method, "dense_acc": _mean([r["dense_test_acc"] for r in runs]),
                     "pruned_acc": _mean([r["test_acc"] for r in runs]),
                     "weight_sparsity": _mean([r["weight_sparsity"] for r in runs])})
    for rounds in (1, 3):
        runs = [ugs(factory, graph, train, rounds=rounds, seed=s) for s in seeds]
        rows.append({"method": f"ugs x{rounds}", "pruned_acc": _mean([r["test_acc"] for r in runs]),
                     "weight_sparsity": _mean([r["weight_sparsity"] for r in runs]),
                     "graph_sparsity": _mean([r["graph_sparsity"] for r in runs])})
    return rows


def condensation_section(graph, seeds, gcond_epochs, doscond_epochs):
    from sgl.models import build_model, default_train_config, model_config
    from sgl.tasks import TrainConfig
    from sgl.tasks.condense import CondenseConfig, condense
    from sgl.tasks.condense_eval import run_condensed

    train = TrainConfig(**{**default_train_config("gcn", "cora"), "progress": False})
    factory = lambda: build_model("gcn", graph.num_features, graph.num_classes,  # noqa: E731
                                  model_config("gcn", preset="cora"))
    rows = []
    for method, epochs in (("kmeans", 1), ("doscond", doscond_epochs), ("gcond", gcond_epochs)):
        start = time.perf_counter()
        small = condense(graph, 70, seed=0, config=CondenseConfig(method=method, epochs=epochs),
                         source={"dataset": "cora"})
        elapsed = time.perf_counter() - start
        record = run_condensed(factory, small, graph, seeds, train)
        rows.append({"method": method, "epochs": epochs if method != "kmeans" else None, "edges": small.num_edges,
                     "gcn_test_acc": record["test_acc"]["mean"], "gcn_test_std": record["test_acc"]["std"],
                     "val_acc": record["val_acc"]["mean"], "condense_s": elapsed})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--sizes", default="100000", help="CSBM sizes for the latency rows (1000000 is heavy)")
    parser.add_argument("--gcond-epochs", type=int, default=30)
    parser.add_argument("--doscond-epochs", type=int, default=200)
    parser.add_argument("--sections", default="distill,int8,prune,condense,csbm")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="write the results as JSON")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = os.environ.get("SGL_TEST_DATA")
    root = str(Path(data) / "planetoid") if data else None
    seeds = list(range(args.seeds))
    sections = set(args.sections.split(","))
    results = {}
    if root is None or not Path(root).is_dir():
        print("SGL_TEST_DATA is not set: skipping the Cora sections")
        sections -= {"distill", "int8", "prune", "condense"}
    graph = cora(root) if sections & {"int8", "prune", "condense"} else None

    def show(title, value):
        results[title] = value
        print(f"\n== {title}")
        for row in value if isinstance(value, list) else [value]:
            print("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))

    if "distill" in sections:
        show("distillation, Cora (inductive 20% of test hidden)",
             distillation("cora", root, {}, seeds, ["gamlp", "gcn"], inductive=0.2))
        show("distillation, Cora (transductive)", distillation("cora", root, {}, seeds, ["gamlp", "gcn"], 0.0))
    if "int8" in sections:
        show("int8 and 1-bit, Cora", int8_section(graph, seeds))
    if "prune" in sections:
        show("pruning, Cora GCN", pruning_section(graph, seeds))
    if "condense" in sections:
        show("condensation, Cora -> 70 nodes, GCN trained on it",
             condensation_section(graph, seeds, args.gcond_epochs, args.doscond_epochs))
    if "csbm" in sections:
        for size in (int(s) for s in args.sizes.split(",")):
            options = {"num_nodes": size, "num_classes": 5, "avg_degree": 10, "num_features": 128,
                       "homophily": 0.8, "feature_signal": 0.5, "seed": 0}
            show(f"distillation latency, CSBM {size:,} nodes (inductive 20% of test hidden)",
                 distillation("synthetic", None, options, [0], ["gamlp", "gcn"], inductive=0.2, epochs=50))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
