"""CTR data larger than memory: the on-disk store vs the in-memory reader, side by side.

Writes a Criteo-format TSV (label, 13 dense, 26 categorical; ids drawn by the synthetic CTR
generator, so the planted model is learnable) and then runs, each step in its own process so
every peak RSS (``VmHWM``) is that step's alone:

1. ``read_ctr_file`` — streaming text, encoded arrays concatenated in memory (the peer);
2. ``build_ctr_store`` — the same file into a shuffled on-disk store (``--memory-mb`` per
   shuffle bucket);
3. one epoch of WDL training + validation on each: in memory (random split, whole tensors) and
   on the store (contiguous split of the memory-mapped rows, block-shuffled batches).

It prints time, peak RSS and the ratios, and checks the store holds exactly the file's rows.

    python benchmarks/bench_ctr_store.py                       # 2M rows (~0.5 GB of text)
    python benchmarks/bench_ctr_store.py --rows 200000         # quick look
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def write_file(path: Path, rows: int, ids: int, seed: int, chunk: int = 200_000) -> None:
    from sgl.datasets.ctr import make_synthetic_ctr

    tmp = path.with_suffix(".tmp")
    data = make_synthetic_ctr(rows, [ids] * 26, num_dense=13, seed=seed)   # one planted model for all rows
    with open(tmp, "w") as handle:
        for start in range(0, rows, chunk):
            part = slice(start, min(rows, start + chunk))
            dense = np.char.mod("%d", (data.dense[part] * 10).astype(np.int64))
            sparse = data.sparse[part]
            cats = np.char.add(np.char.mod("%02d", np.arange(26))[None, :], np.char.mod("%06x", sparse))
            cats = np.where(sparse == 0, "", cats)
            labels = np.char.mod("%d", data.labels[part].astype(np.int64))[:, None]
            table = np.concatenate([labels, dense, cats], axis=1)
            handle.write("\n".join("\t".join(r) for r in table.tolist()) + "\n")
    tmp.replace(path)


def step(kind: str, path: str, store: str, memory_mb: int, epochs: int) -> dict:
    """One measured step (run in a child process)."""
    import torch

    from procmem import AnonPeak, reset_peak, status_kb
    from sgl.datasets.ctr import read_ctr_file
    from sgl.datasets.ctr_store import build_ctr_store, open_ctr_store
    from sgl.embeddings import build_embedding
    from sgl.models.ctr import build_ctr_model
    from sgl.tasks.ctr import CTRTrainConfig, train_ctr

    torch.set_num_threads(1)
    reset_peak()
    base = status_kb("VmRSS")
    base_anon = status_kb("RssAnon")
    out: dict = {}
    with AnonPeak() as anon:
        start = time.perf_counter()
        if kind == "read":
            data = read_ctr_file(path, progress=False)
            out["rows"] = len(data)
        elif kind == "store":
            folder = build_ctr_store(path, store, memory_bytes=memory_mb << 20, progress=False)
            out["folder"] = str(folder)
            out["buckets"] = json.loads((folder / "meta.json").read_text())["buckets"]
        else:
            if kind == "train-memory":
                data = read_ctr_file(path, progress=False)
            else:
                data = open_ctr_store(build_ctr_store(path, store, memory_bytes=memory_mb << 20, progress=False))
            load = time.perf_counter() - start
            train, val, test = data.split((0.8, 0.1, 0.1), seed=0)
            torch.manual_seed(0)
            model = build_ctr_model("wdl", build_embedding("full", data.num_embeddings, 16), data.num_fields, 16,
                                    data.num_dense, hidden=[64, 32])
            result = train_ctr(model, train, val, test, CTRTrainConfig(epochs=epochs, batch_size=1024, lr=1e-3,
                                                                        progress=False))
            out.update(load_s=load, val_auc=result["val_auc"], test_auc=result["test_auc"],
                       train_s=result["train_time_s"])
        out["time_s"] = time.perf_counter() - start
    out["peak_mib"] = (status_kb("VmHWM") - base) / 1024
    out["peak_anon_mib"] = (anon.peak_kb - base_anon) / 1024
    return out


def child(kind: str, args) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--file", str(args.file), "--store", str(args.store),
           "--memory-mb", str(args.memory_mb), "--epochs", str(args.epochs)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--ids", type=int, default=50_000, help="ids per categorical field")
    p.add_argument("--memory-mb", type=int, default=64, help="shuffle bucket size of the store")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--workdir", default="/tmp/sgl_bench_ctr_store")
    p.add_argument("--out", help="write the results as JSON")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--file", help=argparse.SUPPRESS)
    p.add_argument("--store", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(step(args.child, args.file, args.store, args.memory_mb, args.epochs)))
        return
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    args.file = work / f"criteo_like_{args.rows}.txt"
    args.store = work / "store"
    if not args.file.exists():
        t = time.perf_counter()
        write_file(args.file, args.rows, args.ids, seed=0)
        print(f"wrote {args.file} ({args.file.stat().st_size / 2**20:.0f} MiB) in {time.perf_counter() - t:.0f} s")
    import shutil

    shutil.rmtree(args.store, ignore_errors=True)
    size = args.file.stat().st_size / 2 ** 20
    results = {kind: child(kind, args) for kind in ("read", "store", "train-memory", "train-store")}
    print(f"\nCriteo-format file: {args.rows:,} rows, {size:.0f} MiB of text; store buckets of {args.memory_mb} MiB "
          f"({results['store']['buckets']} buckets)")
    print("peak RSS = VmHWM (counts touched pages of mapped files too); peak anon = sampled RssAnon (heap only)")
    print(f"{'step':<32}{'time s':>10}{'peak RSS MiB':>15}{'peak anon MiB':>15}")
    rows = (("read", "read_ctr_file (in memory)"), ("store", "build_ctr_store"),
            ("train-memory", "load + train, in memory"), ("train-store", "open + train, store"))
    for kind, label in rows:
        r = results[kind]
        extra = (f"   (load {r['load_s']:.1f} s, {args.epochs} epoch(s) {r['train_s']:.1f} s, val AUC "
                 f"{r['val_auc']:.4f}, test AUC {r['test_auc']:.4f})") if "train_s" in r else ""
        print(f"{label:<32}{r['time_s']:>10.1f}{r['peak_mib']:>15.0f}{r['peak_anon_mib']:>15.0f}{extra}")
    ratio = lambda a, b, key: results[a][key] / results[b][key]  # noqa: E731
    print(f"ratios store / in memory: encode peak RSS {ratio('store', 'read', 'peak_mib'):.2f} (anon "
          f"{ratio('store', 'read', 'peak_anon_mib'):.2f}), encode time {ratio('store', 'read', 'time_s'):.2f}; "
          f"training peak RSS {ratio('train-store', 'train-memory', 'peak_mib'):.2f} (anon "
          f"{ratio('train-store', 'train-memory', 'peak_anon_mib'):.2f}), epoch time "
          f"{ratio('train-store', 'train-memory', 'train_s'):.2f}")
    from sgl.datasets.ctr_store import open_ctr_store

    stored = open_ctr_store(results["store"]["folder"])
    rows = np.asarray(stored.source_row)
    assert len(stored) == results["read"]["rows"] and np.array_equal(np.sort(rows), np.arange(len(rows)))
    print("check: the store holds each of the file's rows exactly once")
    if args.out:
        Path(args.out).write_text(json.dumps({"rows": args.rows, "text_mib": size, **results}, indent=1))


if __name__ == "__main__":
    main()
