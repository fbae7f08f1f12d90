"""GNN acceleration on the model side: a graph-free MLP student (GLNN/NOSMOG), int8 inference and
int8 hop storage, 1-bit binarised layers (Bi-GCN). The training loops (distillation, pruning,
condensation) live in :mod:`sgl.tasks`; see docs/acceleration.md."""
from sgl.models.accel.binary import BinaryLinear, binarize, binary_bytes
from sgl.models.accel.positional import inductive_positions, positional_features
from sgl.models.accel.quant import (
    INT8_BACKENDS, Int8NodeFeatures, dequantize_columns, model_bytes, quantizable_layers, quantize_columns,
    quantize_int8,
)
from sgl.models.accel.static_int8 import (
    FoldedLinear, StaticGAMLP, StaticHopMix, StaticMLP, fuse_fp32, quantize_static_int8,
)
from sgl.models.accel.student import GraphFreeMLP, GraphFreeMLPConfig

__all__ = ["GraphFreeMLP", "GraphFreeMLPConfig", "positional_features", "inductive_positions", "quantize_int8",
           "quantizable_layers", "Int8NodeFeatures", "quantize_columns", "dequantize_columns", "model_bytes",
           "INT8_BACKENDS", "quantize_static_int8", "fuse_fp32", "FoldedLinear", "StaticGAMLP", "StaticMLP",
           "StaticHopMix", "BinaryLinear", "binarize", "binary_bytes"]
