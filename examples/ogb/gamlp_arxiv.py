"""GAMLP (+RLU) on ogbn-arxiv: the ogbn-products recipe scaled down (no official setting exists).

    python examples/ogb/gamlp_arxiv.py --root DIR [--seeds 10] [--device cuda] [--no-rlu] [--out run.json]

Data. ``--root DIR`` holds ``ogbn_arxiv/`` (or pass the dataset folder itself) in OGB's
on-disk layout, i.e. the unpacked http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip
(81 MB; it unpacks to ``arxiv/``: rename it ``ogbn_arxiv/``)::

    ogbn_arxiv/raw/edge.csv.gz            1,166,243 "citing,cited" lines (symmetrised on load)
    ogbn_arxiv/raw/num-node-list.csv.gz   169343
    ogbn_arxiv/raw/num-edge-list.csv.gz   1166243
    ogbn_arxiv/raw/node-feat.csv.gz       169,343 lines of 128 floats
    ogbn_arxiv/raw/node-label.csv.gz      169,343 class ids (40 subject areas)
    ogbn_arxiv/raw/node_year.csv.gz       169,343 years (optional)
    ogbn_arxiv/split/time/{train,valid,test}.csv.gz   90,941 / 29,799 / 48,603 node ids

Missing files are downloaded there from that URL unless ``--no-download`` is given.

Where the settings come from. The GAMLP authors published no ogbn-arxiv setting or number:
the loaders of both official repositories accept only ogbn-products, ogbn-mag and
ogbn-papers100M (PKU-DAIR/GAMLP and zwt233/Official-GAMLP ``load_dataset.py``; the arxiv
check is commented out), and neither version of the paper reports arxiv. The only
published GAMLP-on-arxiv hyperparameters found are third-party: SimTeG
(vermouthdky/SimTeG ``scripts/ogbn-arxiv/gamlp/x_ogb.sh``, OGB features) trains its own
GAMLP variant without label input or RLU — 5 propagation steps, batch 10000, lr 7e-3 with
a warm-up schedule, weight decay 5e-6, dropout 0.37, 100 epochs. SGL's trainer has no
learning-rate schedule, so that recipe does not carry over. This preset (``gamlp_arxiv.yaml``)
therefore keeps the official ogbn-products recipe (``gamlp_products.yaml``: recursive
attention, 5 hops of ``D⁻¹A`` mean aggregation, 9-hop label input, 4-layer MLPs, the same
dropouts, lr 1e-3, RLU threshold 0.85 / temperature 1 / gamma 0.1) and scales what depends
on the graph's size: hidden 512 -> 256, batch 50000 -> 10000 (GAMLP's argparse default and
SimTeG's batch), RLU stages 400/300/300/300 -> 200/100/100/100, patience 300 -> 100
(GAMLP's argparse default). It is a starting point, not a tuned setting.

Expected accuracy: none published for GAMLP. For scale, the OGB paper (Hu et al., 2020)
reports test accuracy MLP 55.50 ± 0.23, GCN 71.74 ± 0.29, GraphSAGE 71.49 ± 0.27 on the
same split.

Output: as ``gamlp_products.py`` (``ogb test accuracy: ...`` lines, ``--out`` record).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from gamlp_runner import PaperResult, run_cli, run_script

PRESET = Path(__file__).with_name("gamlp_arxiv.yaml")

#: No GAMLP result on ogbn-arxiv is published (see the module docstring).
PAPER: Dict[str, PaperResult] = {}


def main(argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """Run the preset with command-line overrides; returns the run record."""
    return run_script(PRESET, PAPER, __doc__, argv, default_seeds=10)


if __name__ == "__main__":
    run_cli(main)
