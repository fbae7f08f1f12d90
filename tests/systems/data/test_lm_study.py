"""The packed-LM study: seed-major runs, a row reported after each run, an interrupted study resumed."""
import os

import pytest
import torch

from sgl.systems.data.lm_eval import LMTrainConfig
from sgl.systems.data.lm_study import packing_lm_study


@pytest.mark.skipif(not os.environ.get("SGL_SLOW_TESTS"), reason="SGL_SLOW_TESTS=1: two small studies (~75 s loaded)")
def test_study_reports_each_run_and_resumes(data_path, tmp_path):
    root = data_path("wikitext2").parent
    torch.set_num_threads(1)
    train = LMTrainConfig(hidden=16, layers=1, heads=2, intermediate=32, batch_size=2, train_tokens=600,
                          warmup_steps=2)
    kwargs = dict(methods=("random", "bfd"), seeds=(0, 1), window=64, long_from=32, vocab_size=300, train=train,
                  max_sections=150, max_eval_blocks=2, cache_dir=tmp_path)
    seen = []
    rows = packing_lm_study(root, on_row=seen.append, **kwargs)
    assert [(r["method"], r["seed"]) for r in rows] == [("random", 0), ("bfd", 0), ("random", 1), ("bfd", 1)]
    assert seen == rows and all(r["train_tokens"] >= 600 and r["ppl_long"] > 1 for r in rows)
    assert rows[0]["ppl_long"] != rows[2]["ppl_long"]  # another seed, another model
    again = []
    resumed = packing_lm_study(root, on_row=again.append, done=rows[:3], **kwargs)
    assert [(r["method"], r["seed"]) for r in again] == [("bfd", 1)]  # only the missing run is trained
    assert resumed[:3] == rows[:3] and resumed[3]["ppl_long"] == pytest.approx(rows[3]["ppl_long"], rel=1e-6)
