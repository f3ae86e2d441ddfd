"""Turn the original all-MiniLM-L6-v2 safetensors weights into an ONNX graph, with numpy and the onnx package only.

The graph has the interface of the Hub's `onnx/model.onnx`: int64 inputs `input_ids`, `attention_mask` and
`token_type_ids` of shape [batch, sequence], and one float32 output `last_hidden_state` [batch, sequence, 384].
Pooling and normalisation stay in the embedder, as they do for the Hub file.

The BERT encoder it writes, one node per line of the reference implementation:

    embeddings = LayerNorm(word[input_ids] + position[0..seq) + token_type[token_type_ids])
    6 x  x = LayerNorm(x + Dense(SelfAttention(x, mask)))       12 heads of 32, scores / sqrt(32)
         x = LayerNorm(x + Dense(GELU(Dense(x))))               GELU with erf, as BERT uses

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
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Read every tensor of a .safetensors file into numpy arrays (copies, so the file can be closed)."""
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
        tensors[name] = array.reshape(info["shape"]).astype(dtype)
    return tensors


def build_bert_onnx(weights: dict[str, np.ndarray], config: dict[str, Any]) -> Any:
    """Build the BERT encoder as an `onnx.ModelProto` from the weights and the model's config.json."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError("only BERT with exact GELU and absolute position embeddings can be converted")
    head_dim = hidden // heads

    nodes: list[Any] = []
    initializers: list[Any] = []

    def const(name: str, array: np.ndarray) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(key: str) -> str:
        return const(key, weights[key].astype(np.float32))

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def dense(x: str, prefix: str, out: str) -> str:
        w = const(prefix + ".weight_t", weights[prefix + ".weight"].T.astype(np.float32))  # x @ W^T
        return node("Add", [node("MatMul", [x, w], out + "/matmul"), weight(prefix + ".bias")], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        return node(
            "LayerNormalization", [x, weight(prefix + ".weight"), weight(prefix + ".bias")], out, axis=-1, epsilon=eps
        )

    # Constants shared by the layers.
    zero = const("const/zero", np.array([0], dtype=np.int64))
    split_heads = const("const/split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))  # 0 = keep dim
    merge_heads = const("const/merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = const("const/scale", np.array(1.0 / np.sqrt(head_dim), dtype=np.float32))
    one_f = const("const/one_f", np.array(1.0, dtype=np.float32))
    very_negative = const("const/min", np.array(np.finfo(np.float32).min, dtype=np.float32))
    half = const("const/half", np.array(0.5, dtype=np.float32))
    sqrt2 = const("const/sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))

    # Embeddings.
    seq_len = node("Shape", ["input_ids"], "emb/seq_len", start=1, end=2)  # 1-D [seq]
    position_table = weight("embeddings.position_embeddings.weight")
    position_rows = node("Slice", [position_table, zero, seq_len, zero], "emb/position")  # rows 0..seq
    summed = node(
        "Add",
        [
            node(
                "Add",
                [
                    node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "emb/word"),
                    position_rows,
                ],
                "emb/word_position",
            ),
            node("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "emb/token_type"),
        ],
        "emb/sum",
    )
    x = layer_norm(summed, "embeddings.LayerNorm", "emb/out")

    # Additive attention mask, [batch, 1, 1, seq]: 0 for real tokens, float32 min for padding (as transformers).
    mask_f = node("Cast", ["attention_mask"], "mask/float", to=TensorProto.FLOAT)
    mask_4d = node("Unsqueeze", [mask_f, const("const/axes_1_2", np.array([1, 2], dtype=np.int64))], "mask/4d")
    additive = node("Mul", [node("Sub", [one_f, mask_4d], "mask/inverted"), very_negative], "mask/additive")

    for i in range(layers):
        p = f"encoder.layer.{i}"
        n = f"layer{i}"

        def heads_of(name: str, x: str = x, p: str = p, n: str = n) -> str:  # [b, s, 384] -> [b, s, 12, 32]
            projected = dense(x, f"{p}.attention.self.{name}", f"{n}/{name}")
            return node("Reshape", [projected, split_heads], f"{n}/{name}/heads")

        q = node("Transpose", [heads_of("query")], f"{n}/q", perm=[0, 2, 1, 3])  # [b, h, s, d]
        k = node("Transpose", [heads_of("key")], f"{n}/k", perm=[0, 2, 3, 1])  # [b, h, d, s]
        v = node("Transpose", [heads_of("value")], f"{n}/v", perm=[0, 2, 1, 3])  # [b, h, s, d]
        scores = node("Mul", [node("MatMul", [q, k], f"{n}/qk"), scale], f"{n}/scores")
        probs = node("Softmax", [node("Add", [scores, additive], f"{n}/masked")], f"{n}/probs", axis=-1)
        context = node("Transpose", [node("MatMul", [probs, v], f"{n}/context")], f"{n}/context_t", perm=[0, 2, 1, 3])
        merged = node("Reshape", [context, merge_heads], f"{n}/context_merged")
        attention = dense(merged, f"{p}.attention.output.dense", f"{n}/attention_out")
        x = layer_norm(node("Add", [attention, x], f"{n}/residual1"), f"{p}.attention.output.LayerNorm", f"{n}/ln1")

        inner = dense(x, f"{p}.intermediate.dense", f"{n}/intermediate")
        erf = node("Erf", [node("Div", [inner, sqrt2], f"{n}/gelu/div")], f"{n}/gelu/erf")
        gelu = node(
            "Mul",
            [node("Mul", [inner, node("Add", [erf, one_f], f"{n}/gelu/add")], f"{n}/gelu/mul"), half],
            f"{n}/gelu",
        )
        ffn = dense(gelu, f"{p}.output.dense", f"{n}/ffn_out")
        out = "last_hidden_state" if i == layers - 1 else f"{n}/out"
        x = layer_norm(node("Add", [ffn, x], f"{n}/residual2"), f"{p}.output.LayerNorm", out)

    def int_input(name: str) -> Any:
        return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch_size", "sequence_length"])

    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [int_input("input_ids"), int_input("attention_mask"), int_input("token_type_ids")],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch_size", "sequence_length", hidden]
            )
        ],
        initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="memserver.onnx_export",
        ir_version=8,
    )
    onnx.checker.check_model(model)
    return model


def export_onnx(safetensors_path: str | Path, config_path: str | Path) -> bytes:
    """Convert a BERT safetensors checkpoint to the serialized bytes of an ONNX model."""
    try:
        import onnx  # noqa: F401
    except ImportError as exc:
        raise ModelError(
            "converting the PyPI weights needs the onnx package: run `uv sync` in a checkout, or `pip install onnx`"
        ) from exc
    weights = read_safetensors(safetensors_path)
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    return build_bert_onnx(weights, config).SerializeToString()
