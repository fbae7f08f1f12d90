"""Embedding benchmarks for recommendation models, all in one run.

Part (a) — AUC vs compression ratio: CAFE, CAFE+, hashing trick (one shared table, and
per-field tables as in the CAFE artifact) and quotient-remainder at
*exactly equal bytes* (every backend's ``memory_bytes()`` equals ``round(N / ratio)`` float32
rows of ``dim``; the sketches are counted — except where a CAFE sketch's granularity cannot
fill a tiny budget, which leaves CAFE *fewer* bytes and is flagged) at 10x, 100x and 1000x, on synthetic CTR data
(>= 1M rows, Zipf ids, planted logistic model) and on MovieLens-100k as implicit CTR,
averaged over seeds. Target: CAFE >= hash AUC at every ratio. The same model (DeepFM),
optimiser, data order and epochs for every backend.

Parts (b) and (c) — HET cache traffic and HET-GMP partitioning — are separate functions
registered in ``PARTS``.

    python benchmarks/bench_embeddings.py --parts a --rows 1000000 --seeds 3
    python benchmarks/bench_embeddings.py --parts a --rows 1000000 --seeds 3 --jobs 15   # 15 processes
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sgl.datasets.ctr import CTRData, load_movielens_100k, make_synthetic_ctr  # noqa: E402
from sgl.embeddings import budget_bytes, build_embedding, paper_hyperparameters  # noqa: E402
from sgl.embeddings.tables import hash_ids  # noqa: E402
from sgl.errors import EmbeddingError  # noqa: E402
from sgl.models.ctr import build_ctr_model  # noqa: E402
from sgl.tasks.ctr import CTRTrainConfig, train_ctr  # noqa: E402
from sgl.tasks.node_classification import seed_everything  # noqa: E402

#: synthetic CTR fields: a few huge, a few medium, a few small vocabularies (~676k ids)
SYNTHETIC_FIELDS = [200_000, 200_000, 100_000, 100_000, 50_000, 20_000, 5_000, 1_000]
#: training rows of Criteo-Kaggle, which the CAFE artifact's thresholds were tuned on
CRITEO_ROWS = 45_840_617


def _mean_std(values: List[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4f} ± {std:.4f}"


class OracleHotEmbedding(torch.nn.Module):
    """Diagnostic upper bound for CAFE (``--methods ...,oracle``; not a library backend): the
    ``hot`` ids seen most often in the *training* split get their own rows -- perfect selection,
    no sketch bytes, known before training -- and every other id reads a shared hash table of the
    remaining rows. Equal bytes: ``(hot + hash rows) * 4 * dim`` = the budget."""

    def __init__(self, num_embeddings: int, dim: int, hot_ids: np.ndarray, hash_rows: int, seed: int) -> None:
        super().__init__()
        self.num_embeddings, self.dim, self.seed, self.hash_rows = num_embeddings, dim, seed, hash_rows
        slot = torch.full((num_embeddings,), -1, dtype=torch.long)
        slot[torch.as_tensor(hot_ids, dtype=torch.long)] = torch.arange(len(hot_ids))
        self.register_buffer("slot", slot)
        self.hot = torch.nn.Parameter(torch.randn(len(hot_ids), dim) * 0.01)
        self.cold = torch.nn.Parameter(torch.randn(hash_rows, dim) * 0.01)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        slot = self.slot[ids]
        cold = self.cold[hash_ids(ids, self.hash_rows, self.seed)]
        if not len(self.hot):
            return cold
        return torch.where((slot >= 0).unsqueeze(-1), self.hot[slot.clamp(min=0)], cold)

    def memory_bytes(self) -> int:
        return (self.hot.numel() + self.cold.numel()) * 4


def _oracle(data: CTRData, train: CTRData, ratio: float, dim: int, seed: int, hot_rate: float) -> OracleHotEmbedding:
    rows = budget_bytes(data.num_embeddings, dim, ratio) // (dim * 4)
    hot = min(int(rows * hot_rate), rows - 1)
    counts = np.bincount(train.global_ids().ravel(), minlength=data.num_embeddings)
    return OracleHotEmbedding(data.num_embeddings, dim, np.argsort(-counts, kind="stable")[:hot], rows - hot, seed)


def _train_one(method: str, data: CTRData, split, ratio: float, seed: int, train_cfg: CTRTrainConfig, dim: int,
               model: str, opts: Dict[str, Any]) -> Dict[str, Any]:
    train, val, test = split
    seed_everything(seed)
    opts = dict(opts)
    if method == "oracle":
        emb = _oracle(data, train, ratio, dim, seed, opts["hot_rate"])
        net = build_ctr_model(model, emb, data.num_fields, dim, data.num_dense, hidden=[64, 64])
        return train_ctr(net, train, val, test, train_cfg, seed)
    kind, _, layout = method.partition("/")  # "cafe/field": CAFE with the artifact's per-field cold tables
    if kind in ("hash", "cafe", "cafe+"):
        opts["seed"] = seed
    if layout == "field":
        opts["cold"] = "field"
    if kind == "hash-field" or layout == "field":
        opts["field_dims"] = data.field_dims
    emb = build_embedding(kind, data.num_embeddings, dim, ratio=ratio, **opts)
    net = build_ctr_model(model, emb, data.num_fields, dim, data.num_dense, hidden=[64, 64])
    return train_ctr(net, train, val, test, train_cfg, seed)


_CONTEXT: Dict[str, Any] = {}


def _ratio_method(task) -> tuple:
    """All runs of one (ratio, method): the hash_rate pilot (CAFE/CAFE+) and every seed."""
    ratio, method = task
    torch.set_num_threads(1)
    c = _CONTEXT
    data, splits, seeds = c["data"], c["splits"], c["seeds"]
    split = splits[seeds[0]]
    base: Dict[str, Any] = {}
    kind = method.partition("/")[0]
    if kind == "cafe":
        base["threshold"] = max(1.0, paper_hyperparameters(ratio)[0] * len(split[0]) / CRITEO_ROWS)
    candidates = [dict(base, hash_rate=r) for r in c["hash_rates"]] if kind in ("cafe", "cafe+") else \
        [{"hot_rate": 1 - r} for r in c["hash_rates"]] if kind == "oracle" else [base]
    args = (c["train_cfg"], c["dim"], c["model"])
    pilot, errors = [], []
    for cand in candidates:  # a candidate split that cannot fit the budget is skipped
        try:
            pilot.append((_train_one(method, data, split, ratio, seeds[0], *args, cand), cand))
        except EmbeddingError as exc:
            errors.append(str(exc))
    if not pilot:
        return f"{ratio:g}/{method}", None, f"  {ratio:>6g}x  {method:<10} does not fit: {errors[-1]}"
    budget = budget_bytes(data.num_embeddings, c["dim"], ratio)
    # every candidate spends at most the budget (split_budget never exceeds it); where the sketch's
    # granularity leaves a few bytes unused the method is handicapped, not helped, so validation AUC
    # alone picks the candidate and the table flags the unused bytes
    first, chosen = max(pilot, key=lambda rc: rc[0]["val_auc"])
    if first["embedding_bytes"] > budget:
        raise AssertionError(f"{method} at {ratio:g}x spends {first['embedding_bytes']} > {budget} bytes")
    runs = [first] + [_train_one(method, data, splits[s], ratio, s, *args, chosen) for s in seeds[1:]]
    aucs = [r["test_auc"] for r in runs]
    extra = f"  [{', '.join(f'{k}={v:g}' for k, v in chosen.items())}]" if chosen else ""
    if first["embedding_bytes"] != budget:
        extra += f"  (NOT exact: {first['embedding_bytes']} of {budget} bytes; the sketch's granularity leaves the rest unused)"
    line = (f"  {ratio:>6g}x  {method:<10} bytes {runs[0]['embedding_bytes']:>10,}  test AUC {_mean_std(aucs)}  "
            f"log-loss {_mean_std([r['test_logloss'] for r in runs])}  "
            f"({statistics.fmean([r['train_time_s'] for r in runs]):.1f} s/run){extra}")
    return f"{ratio:g}/{method}", {"options": chosen, "runs": runs,
                                   "pilot_val_auc": {str(cand): r["val_auc"] for r, cand in pilot}}, line


#: (CAFE variant, baseline, what the comparison is) -- the verdict lines of part (a)
CHECKS = [("cafe/field", "hash-field", "the paper's comparison: CAFE laid out as the artifact (per-field cold tables) "
                                       "vs the paper's Hash (per-field tables)"),
          ("cafe", "hash-field", "CAFE with one shared cold table vs the paper's Hash"),
          ("cafe", "hash", "shared-table variant: CAFE (shared cold table) vs one shared hash table"),
          ("cafe+", "hash", "CAFE+ (shared cold table) vs one shared hash table"),
          ("oracle", "hash", "diagnostic: the true top ids' own rows (no sketch bytes) + one shared hash table, "
                             "vs one shared hash table -- what any CAFE could gain over it")]


def _paired(results: Dict[str, Any], ratio: float, ours: str, baseline: str) -> str:
    """Mean of the per-seed AUC differences ``ours - baseline``, its 95% t-interval and the wins."""
    from scipy import stats

    diff = [a["test_auc"] - b["test_auc"] for a, b in zip(results[f"{ratio:g}/{ours}"]["runs"],
                                                          results[f"{ratio:g}/{baseline}"]["runs"])]
    mean = statistics.fmean(diff)
    if len(diff) < 2:
        return f"{mean:+.4f} (1 seed)"
    half = stats.t.ppf(0.975, len(diff) - 1) * statistics.stdev(diff) / len(diff) ** 0.5
    return f"{mean:+.4f} [{mean - half:+.4f}, {mean + half:+.4f}], {sum(d > 0 for d in diff)}/{len(diff)}"


def summarize(name: str, results: Dict[str, Any], methods: List[str], ratios: List[float]) -> List[str]:
    """Print (and return) the mean-AUC table and the verdict of every comparison in ``CHECKS``.

    A ratio counts for a comparison when the baseline fits the budget there; if the CAFE
    variant does not fit where the baseline does, it counts as a loss.
    """
    def mean_auc(ratio: float, method: str) -> float:
        key = f"{ratio:g}/{method}"
        return statistics.fmean(r["test_auc"] for r in results[key]["runs"]) if key in results else float("nan")

    lines = [f"  -- {name}: test AUC (mean over seeds), difference to the paper's Hash baseline (hash-field: "
             f"per-field id mod rows, fields of <= 2000/ratio ids whole) and ratio"]
    for ratio in ratios:
        base = mean_auc(ratio, "hash-field")
        cells = [f"{m} {mean_auc(ratio, m):.4f} ({mean_auc(ratio, m) - base:+.4f}, x{mean_auc(ratio, m) / base:.4f})"
                 for m in methods]
        lines.append(f"  {ratio:>6g}x  " + "; ".join(cells))
    for ours, baseline, what in CHECKS:
        if ours not in methods or baseline not in methods:
            continue
        marks, skipped = [], []
        for ratio in ratios:
            if f"{ratio:g}/{baseline}" not in results:
                skipped.append(f"{ratio:g}x")
            else:
                marks.append(mean_auc(ratio, ours) >= mean_auc(ratio, baseline))  # nan (does not fit) -> False
        note = f"; {', '.join(skipped)}: {baseline} does not fit the budget" if skipped else ""
        lines.append(f"  target {ours} >= {baseline} AUC at every ratio ({what}): "
                     f"{'met' if marks and all(marks) else 'NOT met'} ({sum(marks)}/{len(marks)} ratios{note})")
        paired = [f"{ratio:g}x {_paired(results, ratio, ours, baseline)}" for ratio in ratios
                  if f"{ratio:g}/{baseline}" in results and f"{ratio:g}/{ours}" in results]
        if paired:
            lines.append("      paired by seed (same split and model seed), mean difference [95% t-interval], "
                         "wins: " + "; ".join(paired))
    for line in lines:
        print(line)
    return lines


def auc_vs_ratio(name: str, data: CTRData, methods: List[str], ratios: List[float], seeds: List[int],
                 train_cfg: CTRTrainConfig, dim: int, model: str, hash_rates: List[float],
                 jobs: int = 1, split_per_seed: bool = False) -> Dict[str, Any]:
    """Train ``model`` over every (ratio, method, seed); print one table; return the raw results.

    CAFE and CAFE+ pick ``hash_rate`` (the share of bytes for hash rows) from ``hash_rates``
    by the validation AUC of seed 0 — never by test AUC — then run every seed with it. CAFE's
    threshold is the artifact's Criteo value for the ratio scaled by (training rows / 45.8M
    Criteo rows), at least 1; CAFE+ adjusts its threshold itself. With ``split_per_seed`` seed
    ``s`` also draws its own 80/10/10 split (``data.split(seed=s)``), so the mean covers the
    split's variance too; otherwise every seed trains on split 0.
    """
    splits = {s: data.split((0.8, 0.1, 0.1), seed=s if split_per_seed else 0) for s in seeds}
    train = splits[seeds[0]][0]
    print(f"\n== (a) {name}: {len(data):,} rows ({len(train):,} train), {data.num_fields} fields, "
          f"{data.num_embeddings:,} ids, CTR {data.labels.mean():.3f}; {model}, dim {dim}, "
          f"{train_cfg.epochs} epoch(s), batch {train_cfg.batch_size}, lr {train_cfg.lr}, seeds {seeds}"
          f"{' (each seed its own split)' if split_per_seed else ' (one split)'}")
    global _CONTEXT
    _CONTEXT = dict(data=data, splits=splits, seeds=seeds, train_cfg=train_cfg, dim=dim, model=model,
                    hash_rates=hash_rates)
    tasks = [(ratio, method) for ratio in ratios for method in methods]
    results: Dict[str, Any] = {}
    if jobs > 1:  # forked workers share the data; each trains on one thread
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(min(jobs, len(tasks))) as pool:
            for key, value, line in pool.imap_unordered(_ratio_method, tasks):
                print(line, flush=True)
                if value is not None:
                    results[key] = value
    else:
        for task in tasks:
            key, value, line = _ratio_method(task)
            print(line, flush=True)
            if value is not None:
                results[key] = value
    summarize(name, results, methods, ratios)
    return results


def part_a(args: argparse.Namespace) -> Dict[str, Any]:
    """(a) AUC vs compression ratio at equal bytes, synthetic CTR + MovieLens-100k."""
    methods = args.methods.split(",")
    ratios = [float(r) for r in args.ratios.split(",")]
    seeds = list(range(args.seeds))
    hash_rates = [float(r) for r in args.hash_rates.split(",")]
    out: Dict[str, Any] = {}
    datasets = args.datasets.split(",")
    if "synthetic" in datasets:
        t = time.perf_counter()
        synthetic = make_synthetic_ctr(args.rows, SYNTHETIC_FIELDS, num_dense=13, zipf_a=1.1, seed=0)
        print(f"synthetic data generated in {time.perf_counter() - t:.1f} s")
        cfg = CTRTrainConfig(epochs=args.epochs_synthetic, batch_size=1024, lr=2e-3, progress=False)
        out["synthetic"] = auc_vs_ratio("synthetic CTR", synthetic, methods, ratios, seeds, cfg, args.dim,
                                        args.model, hash_rates, args.jobs, args.split_per_seed)
        del synthetic
    ml_root = Path(args.ml_root)
    if "movielens-100k" not in datasets:
        pass
    elif (ml_root / "u.data").is_file():
        movielens = load_movielens_100k(ml_root, download=False)
        cfg = CTRTrainConfig(epochs=args.epochs_ml, batch_size=256, lr=3e-3, progress=False)
        out["movielens-100k"] = auc_vs_ratio("MovieLens-100k", movielens, methods, ratios, seeds, cfg, args.dim,
                                             args.model, hash_rates, args.jobs, args.split_per_seed)
    else:
        print(f"\n(a) MovieLens-100k skipped: {ml_root}/u.data not found (pass --ml-root)")
    return out


def part_b(args: argparse.Namespace) -> Any:
    """(b) HET cache bytes vs a unique-key no-cache PS, 4 workers (in-process simulator); see bench_het.py."""
    import bench_het  # benchmarks/ is on sys.path when this file runs as a script

    return bench_het.part_b(args)


def part_c(args: argparse.Namespace) -> Any:
    """(c) HET-GMP remote traffic vs random partition + id mod N, 4 workers (simulator); see bench_het.py."""
    import bench_het

    return bench_het.part_c(args)


def add_part_b_arguments(group: Any) -> None:
    """The --het-*/--gmp-* flags of parts (b) and (c)."""
    import bench_het

    bench_het.add_arguments(group)


#: part name -> function(args) -> JSON-serialisable results; run in the order given by --parts
PARTS: Dict[str, Callable[[argparse.Namespace], Dict[str, Any]]] = {"a": part_a, "b": part_b, "c": part_c}


def main(argv: List[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="a,b,c", help="comma-separated parts to run (default a,b,c)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", help="write all results as JSON")
    group = parser.add_argument_group("part (a)")
    group.add_argument("--rows", type=int, default=1_000_000, help="synthetic rows (default 1M)")
    group.add_argument("--datasets", default="synthetic,movielens-100k", help="data sets of part (a)")
    group.add_argument("--seeds", type=int, default=3)
    group.add_argument("--ratios", default="10,100,1000")
    group.add_argument("--methods", default="cafe/field,cafe,cafe+,hash,hash-field,qr",
                       help="hash = one shared table over all fields; hash-field = the CAFE artifact's Hash "
                            "baseline (per-field tables, id mod rows, fields of <= 2000/ratio ids kept whole); "
                            "cafe/field = CAFE laid out as the artifact (per-field cold tables, same small-field "
                            "rule), cafe = CAFE with one shared cold hash table; oracle (diagnostic, not in the "
                            "default) = the training split's most frequent ids in their own rows + one shared "
                            "hash table, hot share 1 - hash_rate")
    group.add_argument("--hash-rates", default="0.3,0.5,0.7,0.9", help="CAFE/CAFE+ hash_rate candidates, chosen on "
                                                                   "validation AUC of the first seed")
    group.add_argument("--split-per-seed", action="store_true",
                       help="seed s trains and tests on its own random 80/10/10 split (default: split 0 for all)")
    group.add_argument("--dim", type=int, default=16)
    group.add_argument("--jobs", type=int, default=1, help="(ratio, method) cells trained in parallel processes, "
                                                           "one torch thread each")
    group.add_argument("--model", default="deepfm")
    group.add_argument("--epochs-synthetic", type=int, default=1)
    group.add_argument("--epochs-ml", type=int, default=3)
    group.add_argument("--ml-root", default=os.path.join(os.environ.get("SGL_TEST_DATA", str(REPO.parent / "shared"
                                                                                            / "datasets")), "ml-100k"))
    for name in PARTS:  # later parts may add their own flags
        adder = globals().get(f"add_part_{name}_arguments")
        if adder:
            adder(parser.add_argument_group(f"part ({name})"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {os.cpu_count()} CPUs (shared machine)")
    results: Dict[str, Any] = {}
    for part in [p.strip() for p in args.parts.split(",") if p.strip()]:
        if part not in PARTS:
            print(f"\npart ({part}): not available in this build")
            continue
        start = time.perf_counter()
        results[part] = PARTS[part](args)
        print(f"part ({part}) took {time.perf_counter() - start:.0f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
