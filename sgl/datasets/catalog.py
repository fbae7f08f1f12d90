"""The built-in datasets as data: name, loader path, description, task.

Read by :mod:`sgl.datasets.registry` at import. Loaders are named ``module:function`` and
imported only when a dataset is loaded, so this table (and ``sgl datasets list``) needs
neither torch nor numpy. Each row: ``(name, "module:function", description, task,
leading positional args, adapter)``; see :func:`sgl.datasets.registry.register_lazy`.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

__all__ = ["BUILTIN_DATASETS"]

Row = Tuple[str, str, str, str, Tuple[Any, ...], Optional[str]]

_PLANETOID = (("cora", "Cora"), ("citeseer", "CiteSeer"), ("pubmed", "PubMed"))
_NPZ = (("cora-npz", "Cora (gnn-benchmark npz)"),
        ("amazon-computers", "Amazon Computers co-purchase graph"),
        ("amazon-photo", "Amazon Photo co-purchase graph"),
        ("coauthor-cs", "Coauthor CS co-authorship graph"),
        ("coauthor-physics", "Coauthor Physics co-authorship graph"))
_GEOMGCN = (("texas", "Texas WebKB"), ("wisconsin", "Wisconsin WebKB"), ("cornell", "Cornell WebKB"),
            ("chameleon", "Chameleon Wikipedia"), ("squirrel", "Squirrel Wikipedia"),
            ("actor", "Actor (film) co-occurrence"))
#: Platonov et al. (ICLR 2023), yandex-research/heterophilous-graphs data/<name>.npz
_HETEROPHILY = (("roman-empire", "Roman-empire word dependencies, 22,662 nodes, 18 classes"),
                ("amazon-ratings", "Amazon-ratings co-purchases, 24,492 nodes, 5 classes"),
                ("minesweeper", "Minesweeper synthetic grid, 10,000 nodes, 2 classes (ROC AUC)"),
                ("tolokers", "Tolokers crowd workers, 11,758 nodes, 2 classes (ROC AUC)"),
                ("questions", "Questions Yandex Q users, 48,921 nodes, 2 classes (ROC AUC)"),
                ("chameleon-filtered", "Chameleon without duplicate nodes"),
                ("squirrel-filtered", "Squirrel without duplicate nodes"),
                ("chameleon-filtered-directed", "Chameleon without duplicate nodes, directed edges"),
                ("squirrel-filtered-directed", "Squirrel without duplicate nodes, directed edges"))
_OGB = (("ogbn-arxiv", "OGB arXiv citation graph, 169k nodes, 40 classes, time split"),
        ("ogbn-products", "OGB Amazon products graph, 2.4M nodes, 47 classes, sales-rank split"),
        ("ogbn-papers100M", "OGB papers100M citation graph, 111M nodes, 172 classes (binary npz layout)"))
#: OGB link-property sets: the training graph plus OGB's split (graph.link_split) and metric
_OGBL = (("ogbl-collab", "OGB author collaborations, 235k nodes, time split, Hits@50"),
         ("ogbl-ddi", "OGB drug-drug interactions, 4,267 nodes, no features, target split, Hits@20"),
         ("ogbl-ppa", "OGB protein associations, 576k nodes, throughput split, Hits@100"),
         ("ogbl-citation2", "OGB citations, 2.9M nodes, time split, MRR against 1,000 negatives each"))


def _rows() -> List[Row]:
    rows: List[Row] = [
        ("karate", "sgl.datasets.karate:load_karate",
         "Zachary's Karate Club, built in: 34 nodes, 2 factions, one-hot features", "node", (), "without_root"),
        ("synthetic", "sgl.datasets.synthetic:csbm",
         "seeded contextual stochastic block model (CSBM) with tunable homophily", "node", (), "synthetic"),
    ]
    rows += [(name, "sgl.datasets.planetoid:load_planetoid",
              f"{title} citation graph, Planetoid files and public split", "node", (name,), None)
             for name, title in _PLANETOID]
    rows += [(name, "sgl.datasets.npz:load_npz", f"{title}, gnn-benchmark npz, per-class random split",
              "node", (name,), None) for name, title in _NPZ]
    rows += [(name, "sgl.datasets.geomgcn:load_geomgcn",
              f"{title} heterophilous graph, Geom-GCN files or heterophily .npz, 10 splits", "node", (name,), None)
             for name, title in _GEOMGCN]
    rows += [(name, "sgl.datasets.heterophily:load_heterophily", f"{title}; heterophily .npz, 10 splits",
              "node", (name,), None) for name, title in _HETEROPHILY]
    rows += [("mutag", "sgl.datasets.tu:load_tu", "MUTAG molecules (TU), 188 graphs, 2 classes", "graph", ("MUTAG",),
              None),
             ("proteins", "sgl.datasets.tu:load_tu", "PROTEINS (TU), 1,113 graphs, 2 classes", "graph", ("PROTEINS",),
              None)]
    rows += [(name, "sgl.datasets.ogb:load_ogb", description, "node", (name,), None) for name, description in _OGB]
    rows += [("acm", "sgl.datasets.hetero:load_acm", "ACM heterogeneous (HeCo files): papers/authors/subjects, "
              "3 classes, 20/40/60 labels per class", "node", (), None),
             ("imdb", "sgl.datasets.hetero:load_imdb", "IMDB heterogeneous (MAGNN zip): movies/directors/actors, "
              "3 genres, 400/400/3,478", "node", (), None),
             ("ogbn-mag", "sgl.datasets.hetero_mag:load_ogbn_mag", "OGB MAG heterogeneous: paper/author/"
              "institution/field, 349 venues, time split (OGB layout)", "node", (), None),
             ("synthetic-mag", "sgl.datasets.hetero_synthetic:synthetic_mag", "seeded ogbn-mag-shaped heterogeneous "
              "graph with planted paper classes (scale=1.0: 1.9M nodes, 21M edges)", "node", (), "without_root")]
    rows += [(name, "sgl.datasets.ogb_link:load_ogb_link", description, "link", (name,), None)
             for name, description in _OGBL]
    rows += [("facebook", "sgl.datasets.snap:load_facebook", "SNAP ego-Facebook friendships: 4,039 nodes, "
              "88,234 undirected edges, no features (SNAP edge list)", "link", (), None)]
    rows += [
        ("criteo", "sgl.datasets.ctr:load_criteo", "Criteo display ads CTR: label, 13 dense, 26 categorical "
         "(streaming TSV/CSV, or the HET sampled .npy arrays)", "ctr", (), None),
        ("avazu", "sgl.datasets.ctr:load_avazu", "Avazu mobile ads CTR: 22 categorical fields", "ctr", (), None),
        ("movielens-100k", "sgl.datasets.ctr:load_movielens_100k",
         "MovieLens-100k as implicit CTR (rating >= 4), user/item/age/gender/occupation/genre", "ctr", (), None),
        ("synthetic-ctr", "sgl.datasets.ctr:load_synthetic_ctr",
         "seeded synthetic CTR: Zipf ids per field, planted logistic ground truth", "ctr", (), None),
    ]
    return rows


#: every built-in dataset, in registration order
BUILTIN_DATASETS: List[Row] = _rows()
