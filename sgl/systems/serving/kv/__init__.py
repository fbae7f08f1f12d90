"""PQCache KV retrieval and the KV-selection baselines, pluggable into ``transformers`` decoders."""
from sgl.systems.serving.kv.budget import KVBudget, check_budget
from sgl.systems.serving.kv.cache import PQKVCache, kv_cache_bytes
from sgl.systems.serving.kv.hook import KVMetrics, kv_selection, sparse_decode_attention
from sgl.systems.serving.kv.evaluate import evaluate_selection, full_logits
from sgl.systems.serving.kv.pq import PQIndex
from sgl.systems.serving.kv.tiered import LFUBlockCache, TieredKVStore
from sgl.systems.serving.kv.run import KVBenchConfig, kv_memory, run_kv_bench
from sgl.systems.serving.kv.selectors import (METHODS, ExactTopK, H2OSelector, KVSelector, PQCacheSelector,
                                              QuestSelector, RandomSelector, SnapKVSelector, StreamingSelector,
                                              make_selector)

__all__ = ["KVBudget", "check_budget", "PQIndex", "LFUBlockCache", "TieredKVStore", "KVSelector", "ExactTopK",
           "PQCacheSelector", "H2OSelector", "SnapKVSelector", "QuestSelector", "StreamingSelector", "RandomSelector",
           "make_selector", "METHODS", "kv_selection", "sparse_decode_attention", "KVMetrics", "evaluate_selection",
           "full_logits", "KVBenchConfig", "run_kv_bench", "PQKVCache", "kv_cache_bytes", "kv_memory"]
