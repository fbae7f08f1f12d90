"""``sgl train``: flags (or ``--config FILE``) -> :class:`~sgl.tasks.RunConfig` -> :func:`sgl.tasks.run`.

    sgl train --model sgc --dataset cora --root DIR --k 3 --seeds 10 --out run.json
    sgl train --config run.json                       # replays a run from its record
    sgl train --task link|cluster|graph|ctr ...
    sgl train --task link --model gcn --link-decoder mlp --link-hits-k 20,50   # encoder + pair decoder
    sgl train --sampler neighbor --fanouts 15,10      # sampled mini-batches (sage/gcn)
    sgl train --sampler outre --dataset store:DIR --memory-budget 256MB
    sgl train --model gcmae --model-option preset=cora --dataset cora --seeds 5   # pre-train, then a linear probe
    sgl train --procs 2 --model sign --dataset cora --precompute distributed   # DDP on 2 processes
    torchrun --nproc-per-node 2 -m sgl.cli train --model sgc --dataset cora     # joins torchrun's world

A flag that the chosen path does not read is an error naming the flag, never ignored. The
output paths (``--out``, ``--cache-dir``) and ``--root`` are checked before any work.
"""
from __future__ import annotations

import argparse
from typing import Any, Dict, List, Optional

from sgl.cli.options import key_values, read_config
from sgl.cli.paths import check_input_folder, check_output_path
from sgl.cli.report import format_stat, write_record
from sgl.errors import ConfigError

__all__ = ["register", "build_run_config", "check_paths", "cmd_train"]

_TRAIN_FLAGS = ("lr", "weight_decay", "epochs", "batch_size", "patience", "device")
#: task -> its own flags (dest name -> task_options key)
_TASK_FLAGS: Dict[str, Dict[str, str]] = {
    "link": {"link_val_ratio": "val_ratio", "link_test_ratio": "test_ratio", "link_neg_ratio": "neg_ratio",
             "link_decoder": "decoder", "link_hits_k": "hits_k", "link_embed_dim": "embed_dim"},
    "cluster": {"cluster_n_init": "n_init"},
    "graph": {"graph_folds": "folds", "graph_pooling": "pooling", "graph_classifier": "classifier"},
}
_CTR_FLAGS = {"ctr_embedding": "embedding", "ctr_compression": "compression", "ctr_embed_dim": "embed_dim"}
#: --task link flags of a zoo model trained with a decoder only (a self-supervised model is scored by cosine)
_SUPERVISED_LINK_FLAGS = ["link_neg_ratio", "link_decoder", "link_hits_k", "link_embed_dim"]
#: the linear probe of a self-supervised model under --task node (dest = task_options key)
_PROBE_FLAGS = ("probe_epochs", "probe_lr", "probe_weight_decay", "probe_standardize")
#: flags of node classification by a supervised model only
_NODE_FLAGS = ["k", "rlu_stages", "rlu_threshold", "rlu_gamma", "rlu_temperature", "cache_dir", "structure",
               "structure_option", "structure_pseudo", "structure_pseudo_seeds", "sampler", "fanouts", "memory_budget",
               "distill_from", "distill_hard_weight", "distill_temperature", "distill_inductive"]
#: dest -> the name its value has in the library, where the two differ (error messages name the flag)
_LIBRARY_NAMES = {**{dest: key for flags in _TASK_FLAGS.values() for dest, key in flags.items()}, **_CTR_FLAGS,
                  **{f"rlu_{key}": key for key in ("stages", "threshold", "gamma", "temperature")},
                  "structure_pseudo_seeds": "pseudo_seeds", "ctr_split": "split"}


def register(sub: Any) -> None:
    t = sub.add_parser("train", help="train a model on a dataset and report accuracy over seeds")
    t.add_argument("--config", help="JSON/YAML run config (or a result record from --out) to reproduce")
    t.add_argument("--task", choices=("node", "link", "cluster", "graph", "ctr"),
                   help="node (node classification, default), link, cluster, graph, ctr")
    t.add_argument("--model", help="model name (see `sgl models`); default sgc. A self-supervised model "
                                   "(gcmae, graphmae, grace, dgi, gae) is pre-trained, then linearly probed")
    t.add_argument("--dataset", help="dataset name (see `sgl datasets list`); default karate")
    t.add_argument("--root", help="folder holding the dataset's files (downloaded there when absent)")
    t.add_argument("--seeds", type=int, help="number of seeds 0..N-1 (default 10)")
    t.add_argument("--k", type=int, help="propagation hops")
    t.add_argument("--hidden", type=int, help="hidden width of the base model")
    t.add_argument("--dropout", type=float, help="dropout of the base model")
    t.add_argument("--lr", type=float)
    t.add_argument("--weight-decay", type=float)
    t.add_argument("--epochs", type=int)
    t.add_argument("--batch-size", type=int)
    t.add_argument("--patience", type=int)
    t.add_argument("--device", help="cpu, cuda, cuda:N (default: $SGL_DEVICE or auto)")
    t.add_argument("--model-option", action="append", metavar="KEY=VALUE", help="model config field")
    t.add_argument("--dataset-option", action="append", metavar="KEY=VALUE", help="dataset loader option")
    t.add_argument("--rlu-stages", help="GAMLP RLU: comma-separated epochs per stage, e.g. 200,100,100")
    t.add_argument("--rlu-threshold", type=float, help="RLU confidence threshold (default 0.85)")
    t.add_argument("--rlu-gamma", type=float, help="RLU distillation weight (default 0.1)")
    t.add_argument("--rlu-temperature", type=float, help="RLU softmax temperature (default 1)")
    t.add_argument("--cache-dir", help="cache propagated features here (keyed by graph, features, operator)")
    t.add_argument("--out", help="write the result record (config, per-seed metrics, timings) as JSON")
    t.add_argument("--no-progress", action="store_true", help="hide progress bars")
    t.add_argument("--structure", help="learn the graph structure before training: rwgsl or knn "
                                       "(graph structure learning, see docs/gsl_ssl.md)")
    t.add_argument("--structure-option", action="append", metavar="KEY=VALUE",
                   help="structure learner option, e.g. high=1.5 or exponents=[1,1,4]")
    t.add_argument("--structure-pseudo", metavar="MODEL",
                   help="rwgsl: pseudo-labels from an ensemble of this zoo model (e.g. gamlp) trained on the "
                        "training labels, instead of the built-in logistic regression")
    t.add_argument("--structure-pseudo-seeds", type=int, metavar="N",
                   help="models in the --structure-pseudo ensemble (default 5)")
    t.add_argument("--threads", type=int, help="torch intra-op threads (1 is fastest for small graphs on a "
                                               "busy machine; default: torch's choice)")
    t.add_argument("--sampler", help="mini-batch training of sage/gcn on sampled subgraphs: neighbor, "
                                     "saint-node, saint-edge, saint-rw, cluster; out of core from "
                                     "--dataset store:DIR: lru, ginex, outre (see docs/samplers.md)")
    t.add_argument("--fanouts", help="neighbours per hop, hop next to the seeds first (default 15,10)")
    t.add_argument("--memory-budget", help="byte budget for all caches of out-of-core training, e.g. 512MB "
                                           "(MB = 10^6 bytes, MiB = 2^20)")
    g = t.add_argument_group("distillation into a graph-free student: --model mlp --distill-from TEACHER "
                             "(docs/acceleration.md)")
    g.add_argument("--distill-from", metavar="TEACHER",
                   help="a zoo model name (trained with its preset first) or a teacher's run record (--out JSON)")
    g.add_argument("--distill-hard-weight", type=float, help="weight of the hard-label loss (GLNN's lambda, default 0)")
    g.add_argument("--distill-temperature", type=float, help="softmax temperature of the soft labels (default 1)")
    g.add_argument("--distill-inductive", type=float, metavar="FRACTION",
                   help="hide this fraction of the test nodes from training and report accuracy and per-node "
                        "latency on them (GLNN's inductive setting; default 0)")
    g = t.add_argument_group("--task node with a self-supervised --model: the linear probe on frozen embeddings")
    g.add_argument("--probe-epochs", type=int, help="epochs of the probe's logistic regression (default 400)")
    g.add_argument("--probe-lr", type=float, help="Adam learning rate of the probe (default 0.01)")
    g.add_argument("--probe-weight-decay", type=float, help="weight decay of the probe (default 1e-4)")
    g.add_argument("--probe-standardize", action="store_true",
                   help="standardise the embeddings with training-row statistics (default: raw embeddings, as "
                        "the official GCMAE/GraphMAE protocol)")
    g = t.add_argument_group("--task link: a self-supervised --model's embeddings are scored by cosine; a zoo model "
                             "is trained as an encoder with a pair decoder")
    g.add_argument("--link-val-ratio", type=float, help="held-out validation edges (default 0.05; an OGB link set "
                                                          "brings its own split)")
    g.add_argument("--link-test-ratio", type=float, help="held-out test edges (default 0.1)")
    g.add_argument("--link-decoder", choices=("dot", "mlp"), help="pair decoder: dot product (default) or an MLP on "
                                                                  "the Hadamard product")
    g.add_argument("--link-neg-ratio", type=float, metavar="R",
                   help="negatives per positive edge, held out and per epoch (default 1)")
    g.add_argument("--link-hits-k", metavar="K,K", help="Hits@K reported for each K (default 20,50,100)")
    g.add_argument("--link-embed-dim", type=int, metavar="D", help="encoder output width (default 64)")
    g = t.add_argument_group("--task cluster")
    g.add_argument("--cluster-n-init", type=int, help="k-means restarts (default 10)")
    g = t.add_argument_group("--task graph")
    g.add_argument("--graph-folds", type=int, help="cross-validation folds (default 10)")
    g.add_argument("--graph-pooling", choices=("mean", "sum", "max"), help="readout (default mean)")
    g.add_argument("--graph-classifier", choices=("svm", "logreg"), help="classifier (default svm)")
    g = t.add_argument_group("--task ctr")
    g.add_argument("--ctr-embedding", help="embedding backend: full (default), hash, qr, cafe, cafe+; het, hetgmp "
                                           "(HET / HET-GMP workers over a parameter server: simulated in one "
                                           "process, --ctr-embedding-option workers=N, or one per process)")
    g.add_argument("--ctr-compression", type=float, help="compression ratio of the backend (default 1; e.g. 100)")
    g.add_argument("--ctr-embed-dim", type=int, help="embedding width (default 16)")
    g.add_argument("--ctr-embedding-option", action="append", metavar="KEY=VALUE",
                   help="embedding backend option, e.g. threshold=50 or hash_rate=0.3; het: cache=0.1 bound=10 "
                        "policy=lfu_pinned lr=0.01 workers=1 (see docs/embeddings.md)")
    g.add_argument("--compress", choices=("sketchml", "uniform8", "zlib", "none"),
                   help="codec of HET / HET-GMP pushes (sgl.comm.compress; default none); same as "
                        "--ctr-embedding-option compress=...")
    g.add_argument("--ctr-split", help="train,val,test fractions (default 0.8,0.1,0.1)")
    g = t.add_argument_group("many processes (see docs/distributed.md)")
    g.add_argument("--procs", metavar="N", help="train on N local processes (Gloo on CPU, NCCL with one GPU each "
                                                "for --device cuda): a scalable model by DDP, or sage/gcn with "
                                                "--sampler neighbor; under torchrun, its world size")
    g.add_argument("--precompute", choices=("local", "distributed"),
                   help="scalable models: every process propagates the whole graph (local, default) or its "
                        "partition with halo exchange (distributed)")
    g.add_argument("--partition", help="metis (default) or range; also fennel for --sampler neighbor")
    g.add_argument("--uneven", choices=("pad", "drop"),
                   help="processes with fewer training nodes join with empty batches (pad, default) or all "
                        "stop at the shortest shard (drop)")
    g.add_argument("--grad-compress", choices=("none", "tinyscript", "uniform", "powersgd", "sketchml"),
                   help="compress DDP's gradient all-reduce: TinyScript or uniform --grad-bits codes, "
                        "torch's PowerSGD hook, or SketchML for sparse embedding gradients (default none; "
                        "docs/compress.md)")
    g.add_argument("--grad-bits", type=int, help="bits per gradient value for tinyscript/uniform (2-8, default 4)")
    g.add_argument("--powersgd-rank", type=int, help="rank of PowerSGD's approximation (default 1)")
    t.set_defaults(handler=cmd_train, library_names=_LIBRARY_NAMES)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest, None)
    return value is not None and value is not False and value != []


def _reject(args: argparse.Namespace, dests: List[str], why: str) -> None:
    for dest in dests:
        if _given(args, dest):
            raise ConfigError(f"{_flag(dest)} does not apply to {why}; remove it")


def _ints(text: str, flag: str) -> List[int]:
    try:
        return [int(e) for e in text.split(",")]
    except ValueError:
        raise ConfigError(f"{flag} expects comma-separated integers, got {text!r}") from None


def build_run_config(args: argparse.Namespace):
    """The :class:`~sgl.tasks.RunConfig` of ``sgl train``'s flags (over ``--config`` when given)."""
    from sgl.tasks.run_config import RunConfig, TASKS

    data: Dict[str, Any] = dict(read_config(args.config)) if args.config else {}
    task = args.task or data.get("task") or "node"
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r} in {args.config}; choose one of {', '.join(TASKS)}")
    data["task"] = task
    where = f"--task {task}"
    for key in ("model", "dataset", "root", "seeds"):
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)
    model_config = {**(data.get("model_config") or {}), **key_values(args.model_option, "--model-option")}
    data["dataset_options"] = {**(data.get("dataset_options") or {}),
                               **key_values(args.dataset_option, "--dataset-option")}
    probe = task == "node" and _self_supervised(data.get("model"))
    supervised_link = task == "link" and not _self_supervised(data.get("model") or TASKS[task][0])
    ssl = (task in _TASK_FLAGS and not supervised_link) or probe
    other_task_flags = [d for t, flags in _TASK_FLAGS.items() if t != task for d in flags]
    _reject(args, other_task_flags + ([] if task == "ctr" else [*_CTR_FLAGS, "ctr_embedding_option", "ctr_split",
                                                                           "compress"]),
            where)
    if not probe:
        _reject(args, list(_PROBE_FLAGS), f"{where} --model {data.get('model') or TASKS[task][0]} (the linear probe "
                                          f"evaluates a self-supervised --model under --task node)")
    if task == "link" and not supervised_link:
        _reject(args, _SUPERVISED_LINK_FLAGS, f"{where} --model {data.get('model') or TASKS[task][0]} (a self-supervised "
                                              f"model's embeddings are scored by cosine; it configures a zoo model "
                                              f"trained with a decoder, e.g. --model gcn)")
    if task != "node":
        _reject(args, [d for d in _NODE_FLAGS if not (supervised_link and d == "k")],
                f"{where} (it applies to node classification)")
    elif probe:
        _reject(args, _NODE_FLAGS, f"--model {data['model']} (a self-supervised model is pre-trained on the whole "
                                   f"graph, then probed linearly)")
    if ssl:
        _reject(args, ["batch_size", "patience"], f"{where} (self-supervised models pre-train on the whole graph)")
        for dest in ("hidden", "dropout", "lr", "weight_decay", "epochs", "device"):
            if getattr(args, dest) is not None:
                model_config[dest] = getattr(args, dest)
        flags = {dest: dest for dest in _PROBE_FLAGS} if probe else _TASK_FLAGS[task]
        data["task_options"] = {**(data.get("task_options") or {}),
                                **{key: getattr(args, dest) for dest, key in flags.items() if _given(args, dest)}}
    else:
        train = dict(data.get("train") or {})
        train.update({key: getattr(args, key) for key in _TRAIN_FLAGS if getattr(args, key) is not None})
        if train or "train" in data:
            data["train"] = train
        if args.hidden is not None:
            model_config["hidden"] = [args.hidden, args.hidden] if task == "ctr" else args.hidden
        if args.dropout is not None:
            model_config["dropout"] = args.dropout
    if task == "node" and not probe:
        _node_flags(args, data, model_config)
    if supervised_link:
        if args.k is not None:
            model_config["k"] = args.k
        options = {key: getattr(args, dest) for dest, key in _TASK_FLAGS["link"].items() if _given(args, dest)}
        if args.link_hits_k is not None:
            options["hits_k"] = _ints(args.link_hits_k, "--link-hits-k")
        data["task_options"] = {**(data.get("task_options") or {}), **options}
    if task == "ctr":
        _ctr_flags(args, data)
    _procs_flags(args, data)
    data["model_config"] = model_config
    config = RunConfig.from_dict(data)
    if config.train is not None:
        config.train.progress = not args.no_progress
    return config


def _self_supervised(model: Optional[str]) -> bool:
    from sgl.models.ssl import SSL_MODELS

    return model is not None and str(model).lower() in SSL_MODELS


def _node_flags(args: argparse.Namespace, data: Dict[str, Any], model_config: Dict[str, Any]) -> None:
    if args.k is not None:
        if args.k < 1:
            raise ConfigError(f"--k must be a positive number of propagation hops, got {args.k}")
        model_config["k"] = args.k
    rlu = dict(data.get("rlu") or {})
    if args.rlu_stages:
        rlu["stages"] = _ints(args.rlu_stages, "--rlu-stages")
    for key in ("threshold", "gamma", "temperature"):
        if getattr(args, f"rlu_{key}") is not None:
            rlu[key] = getattr(args, f"rlu_{key}")
    data["rlu"] = rlu or None
    if args.structure:
        data["structure"] = args.structure
    data["structure_options"] = {**(data.get("structure_options") or {}),
                                 **key_values(args.structure_option, "--structure-option")}
    if args.structure_pseudo is not None:
        data["structure_pseudo"] = args.structure_pseudo
    if args.structure_pseudo_seeds is not None:
        data["structure_pseudo_seeds"] = args.structure_pseudo_seeds
    if args.cache_dir is not None:
        data["cache_dir"] = args.cache_dir
    distill = dict(data.get("distill") or {})
    for key in ("from", "hard_weight", "temperature", "inductive"):
        if getattr(args, f"distill_{key}") is not None:
            distill["teacher" if key == "from" else key] = getattr(args, f"distill_{key}")
    if distill and "teacher" not in distill:
        raise ConfigError("--distill-hard-weight, --distill-temperature and --distill-inductive need --distill-from")
    data["distill"] = distill or None
    sampler = data.get("sampler")
    sampler = {"name": sampler} if isinstance(sampler, str) else dict(sampler or {})
    if args.sampler:
        sampler["name"] = args.sampler
    if args.fanouts:
        sampler["fanouts"] = _ints(args.fanouts, "--fanouts")
    if args.memory_budget:
        sampler["memory_budget"] = args.memory_budget
    if sampler and "name" not in sampler:
        flag = "--fanouts" if args.fanouts else "--memory-budget"
        raise ConfigError(f"{flag} needs --sampler (neighbor, saint-node, saint-edge, saint-rw, cluster; or lru, "
                          f"ginex, outre out of core)")
    data["sampler"] = sampler or None


def _ctr_flags(args: argparse.Namespace, data: Dict[str, Any]) -> None:
    for dest, key in _CTR_FLAGS.items():
        if getattr(args, dest) is not None:
            data[key] = getattr(args, dest)
    data["embedding_options"] = {**(data.get("embedding_options") or {}),
                                 **key_values(args.ctr_embedding_option, "--ctr-embedding-option")}
    if args.compress is not None:
        if str(data.get("embedding", "full")).lower().replace("-", "") not in ("het", "hetgmp"):
            raise ConfigError(f"--compress {args.compress} compresses the pushes of HET / HET-GMP workers; add "
                              "--ctr-embedding het or hetgmp (other embedding backends push nothing)")
        data["embedding_options"]["compress"] = args.compress
    if args.ctr_split:
        try:
            data["split"] = [float(x) for x in args.ctr_split.split(",")]
        except ValueError:
            raise ConfigError(f"--ctr-split expects three comma-separated fractions, got {args.ctr_split!r}") from None


def _procs_flags(args: argparse.Namespace, data: Dict[str, Any]) -> None:
    """``--procs`` (torchrun's WORLD_SIZE when absent) and the distributed options."""
    import os

    world = os.environ.get("WORLD_SIZE", "").strip() if "RANK" in os.environ else ""
    if args.procs is not None:
        try:
            data["procs"] = int(args.procs)
        except ValueError:
            raise ConfigError(f"--procs must be a whole number of processes (>= 1), got {args.procs!r}") from None
        if world.isdigit() and int(world) != data["procs"]:
            raise ConfigError(f"--procs {args.procs} but this process is one of torchrun's {world} (WORLD_SIZE); "
                              f"leave --procs out under torchrun, or make them agree")
    elif world.isdigit() and int(world) > 1:
        data["procs"] = int(world)
    distributed = dict(data.get("distributed") or {})
    distributed.update({key: getattr(args, key) for key in ("precompute", "partition", "uneven", "grad_compress",
                                                            "grad_bits", "powersgd_rank")
                        if getattr(args, key) is not None})
    if distributed:
        data["distributed"] = distributed


def check_paths(config: Any, out: Optional[str]) -> None:
    """Every path the run writes or reads, checked before the dataset is loaded."""
    if out:
        check_output_path(out, "file", "--out")
    if config.cache_dir is not None:
        check_output_path(config.cache_dir, "dir", "--cache-dir")
    if config.task != "ctr":  # the CTR loaders also take the data file itself as --root
        check_input_folder(config.root, "--root")


def cmd_train(args: argparse.Namespace) -> int:
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be a positive integer, got {args.threads}")
    config = build_run_config(args)
    check_paths(config, args.out)
    if config.train is not None and config.train.device is not None:
        from sgl.device import get_device

        get_device(config.train.device)  # a device that does not exist fails before any work
    if args.threads is not None:
        import os

        import torch

        torch.set_num_threads(args.threads)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)  # and in the processes of --procs
    from sgl.tasks.run import run

    rank0 = _rank() == 0  # under torchrun every rank runs this; rank 0 alone reports
    record = run(config, log=print if rank0 else None, progress=not args.no_progress and rank0)
    if rank0:
        _print_results(config, record)
        write_record(args.out, record)
    return 0


def _rank() -> int:
    import os

    value = os.environ.get("RANK", "0").strip()
    return int(value) if value.isdigit() else 0


def _print_results(config: Any, record: Dict[str, Any]) -> None:
    n = len(config.seeds)
    if config.task == "ctr":
        for label, key in (("test AUC", "test_auc"), ("test log-loss", "test_logloss"), ("validation AUC", "val_auc")):
            print(f"{label}: {format_stat(record[key], n, scale=1, digits=4)}")
        print(f"embedding memory: {record['embedding_bytes']:,} bytes; training {record['train_time_s']['mean']:.2f} s "
              f"per seed")
        if "traffic_bytes" in record:
            pushed = f" (pushes {record['push_bytes']['mean']:,.0f})" if "push_bytes" in record else ""
            print(f"embedding traffic: {record['traffic_bytes']['mean']:,.0f} bytes per seed{pushed} over "
                  f"{record['workers']} worker{'s' if record['workers'] != 1 else ''}")
    elif config.task == "link" and config.self_supervised:
        for key in ("test_auc", "test_ap"):
            print(f"link {key.replace('_', ' ')}: {format_stat(record[key], n)}")
    elif config.task == "link":
        print(f"{'link metric':<12} {'validation':>14} {'test':>14}")
        for name in record["metrics"]:
            val, test = (record[f"{part}_{name}"] for part in ("val", "test"))
            print((f"{name:<12} " + " ".join(f"{100 * v['mean']:>7.2f} ± {100 * v['std']:<5.2f}"
                                             for v in (val, test))).rstrip())
        print(f"({n} seed{'s' if n != 1 else ''}; {record['split']} edge split, epoch chosen on validation "
              f"{record['metric']}; training {record['train_time_s']:.1f} s in all)")
    elif config.task == "cluster":
        for key in ("nmi", "ari", "acc"):
            print(f"clustering {key}: {format_stat(record[key], n)}")
    elif config.task == "graph":
        print(f"graph accuracy: {format_stat(record['acc'], n)}; mean std over {config.task_options['folds']} folds "
              f"{100 * record['fold_std']:.1f}")
    elif config.self_supervised:  # --task node: pre-training, then the linear probe
        print(f"test accuracy: {format_stat(record['test_acc'], n)}")
        print(f"validation accuracy: {format_stat(record['val_acc'], n)}")
        print(f"linear probe on {config.model} embeddings; pre-training {record['fit_time_s']['mean']:.1f} s per seed")
    elif config.sampler is not None and config.sampler.out_of_core:
        print(f"test accuracy: {format_stat(record['test_acc'], n)}")
        print(f"storage reads per epoch: {record['mean_bytes_per_epoch'] / 2**20:.2f} MiB in "
              f"{record['mean_requests_per_epoch']:,.0f} requests; epoch time {record['mean_epoch_time_s']:.2f} s; "
              f"peak budget use {record['peak_budget_bytes']:,} of {record['budget_bytes']:,} bytes")
    else:
        print(f"test accuracy: {format_stat(record['test_acc'], n)}")
        print(f"validation accuracy: {format_stat(record['val_acc'], n)}")
        if "test_macro_f1" in record:  # distributed sampling reports accuracy only
            print(f"test macro-F1: {format_stat(record['test_macro_f1'], n)}")
        if "ogb_test_acc" in record:
            print(f"ogb test accuracy: {format_stat(record['ogb_test_acc'], n)}")
        precompute = f"precompute {record['precompute_time_s']:.2f} s, " if config.sampler is None else ""
        print(f"time: {precompute}training {record['train_time_s']:.2f} s ({n} seeds), peak memory "
              f"{record['peak_rss_mb']:.0f} MB")
    if record.get("world_size", 1) > 1:
        halo = record.get("halo")
        exchanged = (f"; halo exchange {sum(halo['bytes_per_hop']) / 2**20:.2f} MiB over "
                     f"{len(halo['bytes_per_hop'])} hops" if halo else "")
        print(f"processes: {record['world_size']} ({record.get('backend')}){exchanged}")
