"""GNN acceleration side by side: distillation, int8/1-bit inference, pruning, condensation (docs/acceleration.md).

One run prints every section with ratios against our own teachers (GAMLP and GCN presets):

* distillation: graph-free MLP students of GAMLP and GCN on Cora (transductive accuracy) and
  per-node inference latency on inductive nodes (20% of the test nodes hidden from training) on
  Cora and CSBM graphs (``--sizes``, default 100k; 1M with ``--sizes 100000,1000000 --csbm-epochs 10``:
  ~8 GB peak RSS, ~8 min of CPU; ``--csbm-epochs`` caps teacher and student training there, the
  rows are for latency);
* int8: GAMLP, SGC, SIGN (Cora presets): fp32 as built and fused, dynamic int8, static int8
  reading the int8 hops (accuracy, throughput of the trained part over all nodes, hop bytes),
  a 512-wide graph-free MLP (dynamic int8), and a 1-bit binarised SGC trained quantisation-aware;
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
    """Teacher -> graph-free student rows. ``epochs`` caps teacher AND student training (latency-only rows:
    the teacher then trains from a run record with its preset model and those epochs)."""
    import tempfile

    from sgl.tasks import RunConfig, run

    rows = []
    scratch = tempfile.TemporaryDirectory()
    for teacher in teachers:
        source = teacher
        if epochs:  # the teacher's run record: its preset model, trained for `epochs` only
            source = str(Path(scratch.name) / f"{teacher}.json")
            Path(source).write_text(json.dumps({"config": {"model": teacher, "dataset": dataset, "root": root,
                                                           "dataset_options": options,
                                                           "train": {"epochs": epochs}}}))
        config = {"model": "mlp", "dataset": dataset, "root": root, "dataset_options": options, "seeds": seeds,
                  "distill": {"teacher": source, "inductive": inductive}}
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
                     "speedup": record["latency_speedup"]["mean"], "wall_s": time.perf_counter() - start,
                     "peak_rss_mb": record.get("peak_rss_mb")})
    scratch.cleanup()
    return rows


def _throughput(models, rows, repeats=7, batch=4096, min_pass_s=0.1):
    """Nodes per second of each ``name: (model, take)`` (``take(index)`` gives the model's input rows,
    the gather included), over ``rows`` in batches of ``batch``. A timed pass repeats the sweep
    until it lasts ``min_pass_s`` (fast models are otherwise timer noise); the models take turns
    in every one of ``repeats`` rounds (same load for all) and each keeps its best pass."""
    def sweep(model, take):
        for i in range(0, rows.numel(), batch):
            model(take(rows[i:i + batch]))

    best, inner = {name: float("inf") for name in models}, {}
    with torch.no_grad():
        for name, (model, take) in models.items():
            sweep(model, take)  # warm-up, and the sweeps per timed pass
            start = time.perf_counter()
            sweep(model, take)
            inner[name] = max(1, int(min_pass_s / max(time.perf_counter() - start, 1e-6)))
        for _ in range(repeats):
            for name, (model, take) in models.items():
                start = time.perf_counter()
                for _ in range(inner[name]):
                    sweep(model, take)
                best[name] = min(best[name], (time.perf_counter() - start) / inner[name])
    return {name: rows.numel() / seconds for name, seconds in best.items()}


def _int8_row(name, graph, seeds, test, all_rows):
    """fp32 (as built, and fused like the static plan) vs dynamic int8 vs static int8 reading int8 hops
    (split_weights auto / always / never); ``lost`` is fp32 minus static int8 (auto) test accuracy."""
    from sgl.models import build_model, default_train_config, model_config
    from sgl.models.accel import Int8NodeFeatures, fuse_fp32, model_bytes, quantize_int8, quantize_static_int8
    from sgl.tasks import TrainConfig, Trainer
    from sgl.tasks.metrics import accuracy

    out = {}
    model = build_model(name, graph.num_features, graph.num_classes, model_config(name, preset="cora"))
    features = model.precompute(graph)
    hops8 = Int8NodeFeatures.quantize(features)
    data = features.data if features.is_hops else [features.data]
    train = TrainConfig(**{**default_train_config(name, "cora"), "progress": False})
    for seed in seeds:
        Trainer(train).fit(model, features, graph, seed=seed)
        model.eval()
        plans = {"fp32": (model, features.__getitem__), "fp32_fused": (fuse_fp32(model), features.__getitem__),
                 "int8_dynamic": (quantize_int8(model), features.__getitem__),
                 "int8_static": (quantize_static_int8(model, hops8), hops8.codes_at),  # split_weights="auto"
                 "int8_static_split": (quantize_static_int8(model, hops8, split_weights=True), hops8.codes_at),
                 "int8_static_1x": (quantize_static_int8(model, hops8, split_weights=False), hops8.codes_at)}
        folded = [m for m in plans["int8_static"][0].modules() if getattr(m, "single_error", None) is not None]
        out.setdefault("auto_split_layers", []).append(sum(m.split for m in folded) / len(folded))
        out.setdefault("single_code_error", []).append(max(m.single_error for m in folded))
        with torch.no_grad():
            for key, (plan, take) in plans.items():
                out.setdefault(f"{key}_acc", []).append(accuracy(plan(take(test)), graph.y[test]))
        speed = _throughput(plans, all_rows)
        fp32_best = max(speed["fp32"], speed["fp32_fused"])
        for key, value in speed.items():
            out.setdefault(f"{key}_nodes_s", []).append(value)
        out.setdefault("speedup", []).append(speed["int8_static"] / fp32_best)
        out.setdefault("speedup_split", []).append(speed["int8_static_split"] / fp32_best)
        out.setdefault("speedup_1x", []).append(speed["int8_static_1x"] / fp32_best)
        out.setdefault("dynamic_speedup", []).append(speed["int8_dynamic"] / speed["fp32"])
        out.setdefault("lost", []).append(out["fp32_acc"][-1] - out["int8_static_acc"][-1])
        out.setdefault("bytes_ratio", []).append(model_bytes(model) / model_bytes(plans["int8_static"][0]))
    out["hop_ratio"] = [sum(h.numel() * h.element_size() for h in data) / hops8.nbytes]
    return {"model": name, **{k: _mean(v) for k, v in out.items()}}


def int8_section(graph, seeds, models=("gamlp", "sgc", "sign")):
    """int8 rows per SGAP model (:func:`_int8_row`; ``speedup`` = static int8 over the faster fp32
    plan, same batch and threads), then a 1-bit SGC and a 512-wide graph-free MLP (dynamic int8)."""
    from sgl.models import build_model, default_train_config, model_config
    from sgl.models.accel import binarize, binary_bytes, model_bytes, quantize_int8
    from sgl.tasks import TrainConfig, Trainer
    from sgl.tasks.metrics import accuracy

    test = graph.test_mask.nonzero().flatten()
    all_rows = torch.arange(graph.num_nodes)
    rows = [_int8_row(name, graph, seeds, test, all_rows) for name in models]
    out = {"binary_acc": [], "binary_fp32_acc": [], "binary_bytes_ratio": [], "mlp_fp32_acc": [],
           "mlp_int8_acc": [], "mlp_speedup": []}
    for seed in seeds:
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
        speed = _throughput({"fp32": (mlp, mlp_feats.__getitem__), "int8": (q_mlp, mlp_feats.__getitem__)}, all_rows)
        out["mlp_speedup"].append(speed["int8"] / speed["fp32"])
        out["binary_acc"].append(Trainer(sgc_train).fit(binary, sgc_feats, graph, seed=seed)["test_acc"])
        out["binary_bytes_ratio"].append(model_bytes(sgc) / binary_bytes(binary))
    return rows + [{"model": "sgc 1-bit + mlp-512 dynamic int8", **{k: _mean(v) for k, v in out.items()}}]


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


def condensation_section(graph, seeds, gcond_epochs, doscond_epochs, gcond_loops=(20, 15)):
    """Cora -> 70 nodes per method, condensed once per seed (seed s condenses and trains the GCN of
    run s). Two evaluations of every graph, both picking the epoch on Cora's validation split:
    ``gcn_*`` the zoo GCN's Cora preset (16 hidden, 200 epochs), ``gcond_eval_*`` GCond's own
    protocol (256 hidden, 600 epochs, a fresh Adam at lr/10 from epoch 300)."""
    from sgl.models import build_model, default_train_config, model_config
    from sgl.tasks import TrainConfig
    from sgl.tasks.condense import CondenseConfig, condense
    from sgl.tasks.condense_eval import run_condensed

    preset = TrainConfig(**{**default_train_config("gcn", "cora"), "progress": False})
    protocol = TrainConfig(**{**default_train_config("gcn", "cora"), "epochs": 600, "progress": False})
    evaluations = {
        "gcn": (lambda: build_model("gcn", graph.num_features, graph.num_classes,  # noqa: E731
                                    model_config("gcn", preset="cora")), preset, None),
        "gcond_eval": (lambda: build_model("gcn", graph.num_features, graph.num_classes,  # noqa: E731
                                           model_config("gcn", preset="cora", hidden=256)), protocol, 300)}
    outer, inner = gcond_loops
    methods = (("kmeans", CondenseConfig(method="kmeans")),
               ("doscond", CondenseConfig(method="doscond", epochs=doscond_epochs)),
               ("gcond", CondenseConfig(method="gcond", epochs=gcond_epochs, outer=outer, inner=inner)))
    rows = []
    for method, config in methods:
        out = {}
        for seed in seeds:
            start = time.perf_counter()
            small = condense(graph, 70, seed=seed, config=config, source={"dataset": "cora"})
            out.setdefault("condense_s", []).append(time.perf_counter() - start)
            out.setdefault("edges", []).append(small.num_edges)
            for name, (factory, train, drop) in evaluations.items():
                record = run_condensed(factory, small, graph, [seed], train, lr_drop_epoch=drop)
                out.setdefault(f"{name}_val_acc", []).append(record["val_acc"]["mean"])
                out.setdefault(f"{name}_test_acc", []).append(record["test_acc"]["mean"])
        row = {"method": method, "epochs": config.epochs if method != "kmeans" else None,
               "outer_inner": f"{config.outer}/{config.inner}" if method != "kmeans" else None}
        for key, values in out.items():
            row[key] = _mean(values)
            if key.endswith("test_acc"):
                row[key.replace("_acc", "_std")] = float(torch.tensor(values).std()) if len(values) > 1 else 0.0
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--sizes", default="100000", help="CSBM sizes for the latency rows (1000000 is heavy: "
                                                          "use --csbm-epochs 10)")
    parser.add_argument("--csbm-epochs", type=int, default=50,
                        help="training epochs of teachers and students on CSBM (latency rows: accuracy not meaningful)")
    parser.add_argument("--gcond-epochs", type=int, default=30, help="GCond's Cora script: 600 (minutes per seed)")
    parser.add_argument("--gcond-loops", default="20,15", help="GCond's outer,inner matching loops (Cora: 20,15)")
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
             condensation_section(graph, seeds, args.gcond_epochs, args.doscond_epochs,
                                  tuple(int(v) for v in args.gcond_loops.split(","))))
    if "csbm" in sections:
        for size in (int(s) for s in args.sizes.split(",")):
            options = {"num_nodes": size, "num_classes": 5, "avg_degree": 10, "num_features": 128,
                       "homophily": 0.8, "feature_signal": 0.5, "seed": 0}
            show(f"distillation latency, CSBM {size:,} nodes (inductive 20% of test hidden)",
                 distillation("synthetic", None, options, [0], ["gamlp", "gcn"], inductive=0.2,
                              epochs=args.csbm_epochs))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
