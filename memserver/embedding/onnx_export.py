"""Turn the original all-MiniLM-L6-v2 safetensors weights into an ONNX graph, with numpy and the onnx package only.

The graph has the interface of the Hub's `onnx/model.onnx`: int64 inputs `input_ids`, `attention_mask` and
`token_type_ids` of shape [batch, sequence], and one float32 output `last_hidden_state` [batch, sequence, 384].
Pooling and normalisation stay in the embedder, as they do for the Hub file.

The BERT encoder, as the reference implementation computes it:

    embeddings = LayerNorm(word[input_ids] + position[0..seq) + token_type[token_type_ids])
    6 x  x = LayerNorm(x + Dense(SelfAttention(x, mask)))       12 heads of 32, scores / sqrt(32)
         x = LayerNorm(x + Dense(GELU(Dense(x))))               GELU with erf, as BERT uses

Two graphs compute it from the same weights (equal to float rounding); each is stamped with its name and version
in the model's metadata (`memserver.graph`, `memserver.graph_version`), and `memserver model info` shows them:

- "plain" (version 1, DEFAULT_GRAPH: what memserver writes and runs): standard ONNX operators, one node per line of
  the reference implementation; onnxruntime fuses the GELU and the attention scale itself when it loads it.
- "fused" (version 2, a measured candidate): onnxruntime's com.microsoft CPU kernels, EmbedLayerNormalization,
  MultiHeadAttention (bias, head split, masked softmax, head merge in one kernel) and BiasGelu, with residual +
  LayerNorm left as Add + LayerNormalization (onnxruntime's SkipLayerNormalization measured 3-4x slower than the
  two). It measured no faster than "plain" here (the 36 weight MatMuls are ~75-85% of the time either way), so it
  is not the default; `benchmarks/embed.py` compares the two on any machine. See benchmarks/README.md, Embedder.

No torch, no safetensors package: a .safetensors file is an 8-byte little-endian header length, a JSON header
mapping tensor names to dtype, shape and byte offsets, then the raw little-endian bytes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np

from memserver.errors import ModelError

OPSET = 17  # LayerNormalization arrived in opset 17
MS_DOMAIN = "com.microsoft"  # onnxruntime's contrib operators
GRAPH_VERSIONS = {"plain": 1, "fused": 2}
DEFAULT_GRAPH = "plain"  # what export_onnx writes and memserver runs
GRAPH_VERSION = GRAPH_VERSIONS[DEFAULT_GRAPH]  # a cache written with an older version is converted again
VERSION_KEY = "memserver.graph_version"  # model metadata written into every graph built here
GRAPH_KEY = "memserver.graph"
FUSED_OPS = ("EmbedLayerNormalization", "MultiHeadAttention", "BiasGelu")
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Read every tensor of a .safetensors file into numpy arrays (read-only views of the file's bytes, in memory)."""
    path = Path(path)
    data = path.read_bytes()
    try:
        (header_len,) = struct.unpack("<Q", data[:8])
        header: dict[str, Any] = json.loads(data[8 : 8 + header_len])
    except (struct.error, ValueError) as exc:
        raise ModelError(f"{path} is not a safetensors file: {exc}") from exc
    body = memoryview(data)[8 + header_len :]
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ModelError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=np.dtype(dtype).newbyteorder("<"))
        tensors[name] = array.reshape(info["shape"]).astype(dtype, copy=False)  # a copy only on big-endian hosts
    return tensors


class _Graph:
    """Nodes and initializers being collected, with the small helpers both graphs use."""

    def __init__(self, weights: dict[str, np.ndarray], eps: float) -> None:
        from onnx import helper, numpy_helper

        self._helper, self._numpy_helper = helper, numpy_helper
        self.weights, self.eps = weights, eps
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []

    def const(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(self._numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(self, key: str) -> str:
        return self.const(key, self.weights[key].astype(np.float32, copy=False))

    def weight_t(self, key: str) -> str:
        """A torch Linear weight [out, in], transposed for `x @ W`."""
        return self.const(key + "_t", self.weights[key].T.astype(np.float32, copy=False))

    def node(self, op: str, inputs: list[str], output: str | list[str], domain: str | None = None, **attrs: Any) -> str:
        """Append a node; returns its (first) output."""
        outputs = [output] if isinstance(output, str) else output
        self.nodes.append(self._helper.make_node(op, inputs, outputs, name=outputs[0], domain=domain, **attrs))
        return outputs[0]

    def dense(self, x: str, prefix: str, out: str) -> str:
        matmul = self.node("MatMul", [x, self.weight_t(prefix + ".weight")], out + "/matmul")
        return self.node("Add", [matmul, self.weight(prefix + ".bias")], out)

    def add_layer_norm(self, x: str, residual: str, prefix: str, out: str) -> str:
        summed = self.node("Add", [x, residual], out + "/residual")
        return self.node(
            "LayerNormalization",
            [summed, self.weight(prefix + ".weight"), self.weight(prefix + ".bias")],
            out,
            axis=-1,
            epsilon=self.eps,
        )


def build_bert_onnx(weights: dict[str, np.ndarray], config: dict[str, Any], *, graph: str = DEFAULT_GRAPH) -> Any:
    """Build the BERT encoder as an `onnx.ModelProto` from the weights and the model's config.json.

    `graph` is "plain" (standard operators; what memserver runs) or "fused" (onnxruntime's com.microsoft kernels).
    """
    from onnx import TensorProto, helper

    if graph not in GRAPH_VERSIONS:
        raise ValueError(f"graph must be one of {sorted(GRAPH_VERSIONS)}, got {graph!r}")
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError("only BERT with exact GELU and absolute position embeddings can be converted")
    g = _Graph(weights, float(config.get("layer_norm_eps", 1e-12)))
    if graph == "fused":
        _fused_encoder(g, hidden, heads, layers)
    else:
        _plain_encoder(g, hidden, heads, layers)

    def int_input(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch_size", "sequence_length"])

    output = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch_size", "sequence_length", hidden]
    )
    body = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [int_input("input_ids"), int_input("attention_mask"), int_input("token_type_ids")],
        [output],
        g.initializers,
    )
    opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(MS_DOMAIN, 1)] if graph == "fused" else [])
    model = helper.make_model(body, opset_imports=opsets, producer_name="memserver.onnx_export", ir_version=8)
    helper.set_model_props(model, {VERSION_KEY: str(GRAPH_VERSIONS[graph]), GRAPH_KEY: graph})
    # Not onnx.checker.check_model here: it costs 0.5 s of a first run and cannot check the com.microsoft
    # operators; onnxruntime checks the whole graph when it loads it, and the tests run the checker on both graphs.
    return model


def _fused_encoder(g: _Graph, hidden: int, heads: int, layers: int) -> None:
    """Graph version 2: EmbedLayerNormalization, then per layer Q/K/V MatMuls -> MultiHeadAttention, BiasGelu."""
    from onnx import TensorProto

    # The contrib kernels take int32 ids and masks. EmbedLayerNormalization adds word, position (0..seq) and
    # token-type rows and normalises them in one pass.
    ids, token_types, mask = (
        g.node("Cast", [name], f"{name}/int32", to=TensorProto.INT32)
        for name in ("input_ids", "token_type_ids", "attention_mask")
    )
    e = "embeddings."
    x = g.node(
        "EmbedLayerNormalization",
        [
            ids,
            token_types,
            g.weight(e + "word_embeddings.weight"),
            g.weight(e + "position_embeddings.weight"),
            g.weight(e + "token_type_embeddings.weight"),
            g.weight(e + "LayerNorm.weight"),
            g.weight(e + "LayerNorm.bias"),
            mask,
        ],
        ["emb/out", "emb/mask_index"],  # the second output (lengths) is not used
        MS_DOMAIN,
        epsilon=g.eps,
    )
    for i in range(layers):
        p, n = f"encoder.layer.{i}.", f"layer{i}/"
        a = p + "attention.self."
        # Q, K, V projections without their bias: MultiHeadAttention adds it while splitting the heads. Its
        # key_padding_mask is the [batch, seq] mask (1 = token, 0 = padding): padded keys get no weight.
        q, k, v = (g.node("MatMul", [x, g.weight_t(a + t + ".weight")], n + t) for t in ("query", "key", "value"))
        qkv_bias = np.concatenate([g.weights[a + t + ".bias"] for t in ("query", "key", "value")])
        bias = g.const(n + "qkv_bias", qkv_bias.astype(np.float32))
        context = g.node("MultiHeadAttention", [q, k, v, bias, mask], n + "context", MS_DOMAIN, num_heads=heads)
        attention = g.dense(context, p + "attention.output.dense", n + "attention_out")
        x = g.add_layer_norm(attention, x, p + "attention.output.LayerNorm", n + "ln1")

        inner = g.node("MatMul", [x, g.weight_t(p + "intermediate.dense.weight")], n + "intermediate")
        gelu = g.node("BiasGelu", [inner, g.weight(p + "intermediate.dense.bias")], n + "gelu", MS_DOMAIN)
        ffn = g.dense(gelu, p + "output.dense", n + "ffn_out")
        out = "last_hidden_state" if i == layers - 1 else n + "out"
        x = g.add_layer_norm(ffn, x, p + "output.LayerNorm", out)


def _plain_encoder(g: _Graph, hidden: int, heads: int, layers: int) -> None:
    """Graph version 1: standard operators, one node per line of the reference implementation."""
    from onnx import TensorProto

    head_dim = hidden // heads
    zero = g.const("const/zero", np.array([0], dtype=np.int64))
    split_heads = g.const("const/split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))  # 0 = keep dim
    merge_heads = g.const("const/merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = g.const("const/scale", np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))
    one_f = g.const("const/one_f", np.array(1.0, dtype=np.float32))
    very_negative = g.const("const/min", np.array(np.finfo(np.float32).min, dtype=np.float32))
    half = g.const("const/half", np.array(0.5, dtype=np.float32))
    sqrt2 = g.const("const/sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))

    # Embeddings.
    seq_len = g.node("Shape", ["input_ids"], "emb/seq_len", start=1, end=2)  # 1-D [seq]
    position_rows = g.node(
        "Slice", [g.weight("embeddings.position_embeddings.weight"), zero, seq_len, zero], "emb/position"
    )
    word = g.node("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], "emb/word")
    token_type = g.node(
        "Gather", [g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "emb/token_type"
    )
    summed = g.node("Add", [g.node("Add", [word, position_rows], "emb/word_position"), token_type], "emb/sum")
    x = g.node(
        "LayerNormalization",
        [summed, g.weight("embeddings.LayerNorm.weight"), g.weight("embeddings.LayerNorm.bias")],
        "emb/out",
        axis=-1,
        epsilon=g.eps,
    )

    # Additive attention mask, [batch, 1, 1, seq]: 0 for real tokens, float32 min for padding (as transformers).
    mask_f = g.node("Cast", ["attention_mask"], "mask/float", to=TensorProto.FLOAT)
    mask_4d = g.node("Unsqueeze", [mask_f, g.const("const/axes_1_2", np.array([1, 2], dtype=np.int64))], "mask/4d")
    additive = g.node("Mul", [g.node("Sub", [one_f, mask_4d], "mask/inverted"), very_negative], "mask/additive")

    for i in range(layers):
        p, n = f"encoder.layer.{i}.", f"layer{i}/"

        def heads_of(name: str, x: str = x, p: str = p, n: str = n) -> str:  # [b, s, 384] -> [b, s, 12, 32]
            projected = g.dense(x, f"{p}attention.self.{name}", f"{n}{name}")
            return g.node("Reshape", [projected, split_heads], f"{n}{name}/heads")

        q = g.node("Transpose", [heads_of("query")], f"{n}q", perm=[0, 2, 1, 3])  # [b, h, s, d]
        k = g.node("Transpose", [heads_of("key")], f"{n}k", perm=[0, 2, 3, 1])  # [b, h, d, s]
        v = g.node("Transpose", [heads_of("value")], f"{n}v", perm=[0, 2, 1, 3])  # [b, h, s, d]
        scores = g.node("Mul", [g.node("MatMul", [q, k], f"{n}qk"), scale], f"{n}scores")
        probs = g.node("Softmax", [g.node("Add", [scores, additive], f"{n}masked")], f"{n}probs", axis=-1)
        context = g.node("Transpose", [g.node("MatMul", [probs, v], f"{n}context")], f"{n}context_t", perm=[0, 2, 1, 3])
        merged = g.node("Reshape", [context, merge_heads], f"{n}context_merged")
        attention = g.dense(merged, f"{p}attention.output.dense", f"{n}attention_out")
        x = g.add_layer_norm(attention, x, f"{p}attention.output.LayerNorm", f"{n}ln1")

        inner = g.dense(x, f"{p}intermediate.dense", f"{n}intermediate")
        erf = g.node("Erf", [g.node("Div", [inner, sqrt2], f"{n}gelu/div")], f"{n}gelu/erf")
        gelu = g.node(
            "Mul",
            [g.node("Mul", [inner, g.node("Add", [erf, one_f], f"{n}gelu/add")], f"{n}gelu/mul"), half],
            f"{n}gelu",
        )
        ffn = g.dense(gelu, f"{p}output.dense", f"{n}ffn_out")
        out = "last_hidden_state" if i == layers - 1 else f"{n}out"
        x = g.add_layer_norm(ffn, x, f"{p}output.LayerNorm", out)


def export_onnx(safetensors_path: str | Path, config_path: str | Path, *, graph: str = DEFAULT_GRAPH) -> bytes:
    """Convert a BERT safetensors checkpoint to the serialized bytes of an ONNX model."""
    try:
        import onnx  # noqa: F401
    except ImportError as exc:
        raise ModelError(
            "converting the PyPI weights needs the onnx package: run `uv sync` in a checkout, or `pip install onnx`"
        ) from exc
    weights = read_safetensors(safetensors_path)
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    return bytes(build_bert_onnx(weights, config, graph=graph).SerializeToString())
