"""Motifs: exact counting against networkx, and motif embeddings against DeepWalk and GCMAE for link prediction.

1. **Counting** on SNAP ego-Facebook (4,039 nodes, 88,234 edges): per-vertex triangles (with
   edges and open wedges) by ``sgl.analytics.motifs.count_motifs`` (numba masked product, and
   the SciPy SpGEMM engine) against ``networkx.triangles`` on the same graph, best and median of
   ``--repeats`` runs after one warm-up, with the counts checked equal. ``--directed`` adds the 13
   directed motifs per vertex against ``networkx.triadic_census`` (graph totals only) on Facebook
   with every edge given a seeded random direction (10 % kept mutual).
2. **Link prediction**: one edge split per seed (``sgl.tasks.link_prediction.split_edges``, 5 %
   validation, 10 % test, as many sampled non-edges), every method trained on the training graph
   only and scored by the cosine of the endpoints' embeddings (``link_scores``/``link_metrics``):
   motif walks (DeepWalk on ``0.5 S + 0.5 W_triangle``), motif spectral, motif features, DeepWalk on
   the plain graph (same code, ``mix = 1``) and GCMAE through ``sgl.tasks.run_link_prediction``
   (same splits). Facebook has no node features: GCMAE gets seeded Gaussian features
   (``--gcmae-features`` wide; one-hot would be 4,039-wide); on Cora it gets the real ones.

    python benchmarks/bench_motifs.py                                  # Facebook + Cora from ../shared/datasets
    python benchmarks/bench_motifs.py --root ../shared/datasets --datasets facebook --seeds 0 1 2 --threads 2
    python benchmarks/bench_motifs.py --skip-auc --repeats 10 --directed    # counting only
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

METHODS = ("motif-walks", "motif-spectral", "motif-features", "deepwalk", "gcmae")


def _timed(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), out


def bench_counting(graph, args) -> dict:
    import networkx as nx
    import numpy as np

    from sgl.analytics.motifs import count_motifs

    nxg = nx.Graph()
    nxg.add_nodes_from(range(graph.num_nodes))
    nxg.add_edges_from(graph.edge_index.T.tolist())
    count_motifs(graph)  # warm-up: numba compiles (or loads its cache) once
    result = {}
    for engine in ("numba", "scipy"):
        best, median, counts = _timed(lambda: count_motifs(graph, engine=engine), args.repeats)
        result[engine] = {"best_s": best, "median_s": median}
    best, median, reference = _timed(lambda: nx.triangles(nxg), args.repeats)
    result["networkx"] = {"best_s": best, "median_s": median}
    assert counts["triangle"].tolist() == [reference[v] for v in range(graph.num_nodes)], "counts differ"
    print(f"\ncounting on {graph.name} ({graph.num_nodes:,} nodes, {graph.num_edges // 2:,} edges, "
          f"{counts.totals['triangle']:,} triangles; counts equal networkx), best / median of {args.repeats}:")
    nx_best = result["networkx"]["best_s"]
    for name, label in (("numba", "sgl count_motifs (numba)"), ("scipy", "sgl count_motifs (scipy)"),
                        ("networkx", "networkx.triangles")):
        r = result[name]
        print(f"  {label:<28} {1e3 * r['best_s']:9.1f} ms / {1e3 * r['median_s']:9.1f} ms   "
              f"networkx/this = {nx_best / r['best_s']:6.1f}x")
    if args.directed:
        rng = np.random.default_rng(0)
        src, dst = graph.edge_index.numpy()
        keep = src < dst
        src, dst = src[keep], dst[keep]
        flip = rng.random(src.size) < 0.5
        src, dst = np.where(flip, dst, src), np.where(flip, src, dst)
        mutual = rng.random(src.size) < 0.1
        import scipy.sparse as sp

        rows, cols = np.concatenate([src, dst[mutual]]), np.concatenate([dst, src[mutual]])
        directed = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(graph.num_nodes,) * 2)
        dig = nx.DiGraph()
        dig.add_nodes_from(range(graph.num_nodes))
        dig.add_edges_from(zip(rows.tolist(), cols.tolist()))
        count_motifs(directed, directed=True)
        ours_best, _, ours = _timed(lambda: count_motifs(directed, directed=True), args.repeats)
        nx_time, _, census = _timed(lambda: nx.triadic_census(dig), 1)
        from sgl.analytics.motifs import MAN_CODES

        assert all(ours.totals[m] == census[code] for m, code in MAN_CODES.items()), "directed totals differ"
        result["directed"] = {"sgl_best_s": ours_best, "networkx_census_s": nx_time}
        print(f"  directed (13 motifs per vertex) {1e3 * ours_best:9.1f} ms   networkx.triadic_census (totals "
              f"only) {nx_time:7.2f} s   ratio {nx_time / ours_best:6.1f}x")
    return result


def _gcmae_graph(graph, width, seed):
    import torch

    from sgl.data import Graph

    if graph.x is not None:
        return graph
    x = torch.randn(graph.num_nodes, width, generator=torch.Generator().manual_seed(seed))
    return Graph(graph.indptr, graph.indices, x=x, name=graph.name)


def bench_auc(graph, args) -> dict:
    from sgl.analytics.motifs import MotifEmbeddingConfig, motif_embedding
    from sgl.models.ssl import build_ssl_model
    from sgl.tasks.link_prediction import link_metrics, link_scores, run_link_prediction, split_edges
    from sgl.tasks.stats import summarize

    walk = dict(dim=args.dim, walk_length=args.walk_length, walks_per_node=args.walks_per_node,
                window=args.window, epochs=args.epochs)
    configs = {"motif-walks": MotifEmbeddingConfig(method="walks", **walk),
               "motif-spectral": MotifEmbeddingConfig(method="spectral", dim=args.dim),
               "motif-features": MotifEmbeddingConfig(method="features"),
               "deepwalk": MotifEmbeddingConfig(method="deepwalk", **walk)}
    rows = {}
    for method in args.methods:
        runs = []
        if method == "gcmae":
            base = _gcmae_graph(graph, args.gcmae_features, 0)
            record = run_link_prediction(lambda: build_ssl_model("gcmae", base.num_features, epochs=args.gcmae_epochs),
                                         base, seeds=args.seeds, val_ratio=0.05, test_ratio=0.1)
            runs = [{"test_auc": r["test_auc"], "test_ap": r["test_ap"], "val_auc": r["val_auc"],
                     "time_s": r["fit_time_s"]} for r in record["runs"]]
        else:
            for seed in args.seeds:
                split = split_edges(graph, 0.05, 0.1, seed=seed)
                config = MotifEmbeddingConfig(**{**configs[method].to_dict(), "seed": seed})
                start = time.perf_counter()
                emb = motif_embedding(split.train_graph, config)
                elapsed = time.perf_counter() - start
                test = link_metrics(link_scores(emb, split.test_pos), link_scores(emb, split.test_neg))
                val = link_metrics(link_scores(emb, split.val_pos), link_scores(emb, split.val_neg))
                runs.append({"test_auc": test["auc"], "test_ap": test["ap"], "val_auc": val["auc"],
                             "time_s": elapsed})
        rows[method] = {"runs": runs, **{k: summarize([r[k] for r in runs]) for k in ("test_auc", "test_ap",
                                                                                      "val_auc", "time_s")}}
        r = rows[method]
        print(f"  {method:<15} test AUC {100 * r['test_auc']['mean']:6.2f} ± {100 * r['test_auc']['std']:4.2f}   "
              f"AP {100 * r['test_ap']['mean']:6.2f}   val AUC {100 * r['val_auc']['mean']:6.2f}   "
              f"{r['time_s']['mean']:7.1f} s", flush=True)
    if "deepwalk" in rows:
        for method in ("motif-walks", "motif-spectral", "motif-features", "gcmae"):
            if method in rows:
                delta = rows[method]["test_auc"]["mean"] - rows["deepwalk"]["test_auc"]["mean"]
                print(f"  {method} - deepwalk: {100 * delta:+.2f} AUC points")
    return rows


def main() -> None:
    default_root = os.environ.get("SGL_TEST_DATA", str(HERE.parent.parent / "shared" / "datasets"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=default_root, help="folder with snap_facebook_combined/ and planetoid/")
    parser.add_argument("--datasets", nargs="+", default=["facebook", "cora"], choices=["facebook", "cora"])
    parser.add_argument("--repeats", type=int, default=5, help="timed counting runs (best and median reported)")
    parser.add_argument("--directed", action="store_true", help="also time the 13 directed motifs")
    parser.add_argument("--skip-count", action="store_true")
    parser.add_argument("--skip-auc", action="store_true")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--walk-length", type=int, default=20)
    parser.add_argument("--walks-per-node", type=int, default=10)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=1, help="skip-gram passes over the walks")
    parser.add_argument("--gcmae-epochs", type=int, default=300)
    parser.add_argument("--gcmae-features", type=int, default=128, help="random feature width for featureless graphs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="write all results as JSON")
    args = parser.parse_args()

    import torch

    import sgl

    torch.set_num_threads(args.threads)
    results = {}
    for name in args.datasets:
        graph = (sgl.datasets.load("facebook", root=Path(args.root)) if name == "facebook"
                 else sgl.datasets.load("cora", root=Path(args.root) / "planetoid"))
        graph.name = name
        results[name] = {}
        if name == "facebook" and not args.skip_count:
            results[name]["counting"] = bench_counting(graph, args)
        if not args.skip_auc:
            print(f"\nlink prediction on {name} ({graph.num_nodes:,} nodes; seeds {args.seeds}; cosine scores):",
                  flush=True)
            results[name]["link_prediction"] = bench_auc(graph, args)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=2, default=float)
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
