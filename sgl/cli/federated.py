"""``sgl federated train``: vertical split learning of a CTR model, one process per party.

    sgl federated train --dataset criteo --root ../shared/datasets/criteo_het_sampled --parties 2
    sgl federated train --dataset criteo --root DIR --split fields.yaml --defense projpert-iso --sumkl-bound 4
    sgl federated train --dataset avazu --root DIR --parties 3 --local-steps 4 --bandwidth-mbps 100 --latency-ms 10
    sgl federated train --dataset movielens-100k --root DIR/ml-100k --model deepfm --rake --attack

``--split`` is a YAML mapping party -> columns (``guest: [I1-I13]``, ``host: [C1-C26]``); the first
party is the active one (labels, top model). Without it the dense columns go to the active party
and the categorical fields are dealt round-robin to ``--parties - 1`` passive parties.
"""
from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "cmd_train"]

_DATASETS = ("criteo", "avazu", "movielens-100k", "synthetic-ctr")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("federated", help="vertical federated (split) learning of CTR models")
    sub = parser.add_subparsers(dest="federated_command", required=True)
    train = sub.add_parser("train", help="train a split CTR model with one process per party")
    train.add_argument("--dataset", default="synthetic-ctr", choices=_DATASETS)
    train.add_argument("--root", help="folder or file holding the dataset")
    train.add_argument("--max-rows", type=int, help="read at most this many rows")
    train.add_argument("--parties", type=int, default=2, help="number of parties when --split is not given")
    train.add_argument("--split", help="YAML file: party -> [columns]; the first party is the active one")
    train.add_argument("--model", default="wdl", choices=("wdl", "deepfm", "dlrm", "dcn"))
    train.add_argument("--embed-dim", type=int, default=8)
    train.add_argument("--hidden", type=int, nargs="+", default=[64], help="top MLP widths")
    train.add_argument("--bottom-hidden", type=int, nargs="*", default=[], help="bottom MLP widths (none)")
    train.add_argument("--optimizer", default="adam", choices=("adam", "adagrad", "sgd"))
    train.add_argument("--lr", type=float, default=1e-3)
    train.add_argument("--batch-size", type=int, default=256)
    train.add_argument("--epochs", type=int, default=1)
    train.add_argument("--max-steps", type=int)
    train.add_argument("--pos-weight", type=float, default=1.0)
    train.add_argument("--defense", default="none",
                       choices=("none", "max-norm", "marvell", "projpert-iso", "projpert-opt"))
    train.add_argument("--sumkl-bound", type=float, help="privacy bound (sumKL) of ProjPert / Marvell")
    train.add_argument("--marvell-scale", type=float, help="Marvell power scale (instead of a bound)")
    train.add_argument("--attack", action="store_true", help="run the norm/direction label-inference attacks")
    train.add_argument("--local-steps", type=int, default=0, help="CELU-VFL local updates per round trip")
    train.add_argument("--rake", action="store_true", help="two differentiated bottom models per passive party")
    train.add_argument("--blindfl", action="store_true",
                       help="passive parties' bottoms as BlindFL source layers (Paillier + secret sharing; needs the "
                            "[federated] extra, --passive-optimizer sgd and no --bottom-hidden); slow: thousands of "
                            "times a plaintext step")
    train.add_argument("--key-bits", type=int, default=2048, help="Paillier key size of --blindfl (>= 1024)")
    train.add_argument("--frac-bits", type=int, default=16, help="fixed-point fraction bits of --blindfl")
    train.add_argument("--passive-optimizer", choices=("adam", "adagrad", "sgd"),
                       help="optimizer of the passive parties' bottoms (default: --optimizer)")
    train.add_argument("--passive-lr", type=float, help="learning rate of the passive parties' bottoms (default: --lr)")
    train.add_argument("--bandwidth-mbps", type=float, default=100.0)
    train.add_argument("--latency-ms", type=float, default=10.0)
    train.add_argument("--timeout", type=float, default=60.0, help="seconds a party waits for a message")
    train.add_argument("--backend", default="process", choices=("process", "thread"),
                       help="parties as processes (sgl.comm, Gloo) or as threads of one process")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--out", help="also write the result as a JSON record")
    train.set_defaults(handler=cmd_train)


def _load(args: argparse.Namespace):
    from sgl.datasets import ctr

    if args.dataset == "criteo":
        return ctr.load_criteo(args.root, max_rows=args.max_rows, progress=False)
    if args.dataset == "avazu":
        return ctr.load_avazu(args.root, max_rows=args.max_rows, progress=False)
    if args.dataset == "movielens-100k":
        return ctr.load_movielens_100k(args.root, download=False)
    return ctr.make_synthetic_ctr(args.max_rows or 5000, [200] * 6, num_dense=4, seed=args.seed)


def cmd_train(args: argparse.Namespace) -> int:
    from sgl.cli.report import write_record
    from sgl.federated import FederatedConfig, default_split, load_split, train_federated

    config = FederatedConfig(
        model=args.model, embed_dim=args.embed_dim, hidden=args.hidden, bottom_hidden=args.bottom_hidden,
        optimizer=args.optimizer, lr=args.lr, batch_size=args.batch_size, epochs=args.epochs,
        max_steps=args.max_steps, pos_weight=args.pos_weight, seed=args.seed, defense=args.defense,
        sumkl_bound=args.sumkl_bound, marvell_scale=args.marvell_scale, attack=args.attack,
        local_steps=args.local_steps, rake=args.rake, bandwidth_mbps=args.bandwidth_mbps,
        latency_ms=args.latency_ms, timeout=args.timeout, blindfl=args.blindfl, key_bits=args.key_bits,
        frac_bits=args.frac_bits, passive_optimizer=args.passive_optimizer, passive_lr=args.passive_lr)
    data = _load(args)
    split = load_split(args.split) if args.split else default_split(data, args.parties)
    train, val, test = data.split((0.8, 0.1, 0.1), seed=args.seed)
    result = train_federated(train, val, test, split, config, backend=args.backend)
    traffic = result["traffic"]
    print(f"parties: {', '.join(split.names)} (active: {split.names[0]}); model {config.model}, "
          f"defense {config.defense}, local steps {config.local_steps}, rake {config.rake}"
          + (f", BlindFL ({config.key_bits}-bit keys)" if config.blindfl else ""))
    print(f"test auc: {result['test_auc']:.4f}  validation auc: {result['val_auc']:.4f}  "
          f"test logloss: {result['test_logloss']:.4f}")
    print(f"rounds: {traffic['rounds']}  bytes: {traffic['bytes_sent'] + traffic['bytes_received']:,}  "
          f"link time ({config.bandwidth_mbps:g} Mbit/s, {config.latency_ms:g} ms): {traffic['link_seconds']:.2f} s  "
          f"compute: {result['step_seconds']:.2f} s")
    for party, report in (result.get("attack") or {}).items():
        print(f"attack on party {split.names[party]}: norm auc {report['norm_auc']:.3f}  "
              f"direction auc {report['direction_auc']:.3f}")
    record = {k: v for k, v in result.items() if k not in ("parties", "observed")}
    record["attack"] = {str(k): v for k, v in (result.get("attack") or {}).items()}
    write_record(args.out, {"command": "federated train", "config": config.to_dict(), "split": split.parties,
                            "result": record})
    return 0
