"""Episodic memory: vector stores (in memory, Chroma), the offline embedder, episodes and the training export."""

from __future__ import annotations

from ._chroma import EXACT_CAP, ChromaVectorStore, chroma_collection_name, chroma_embedding_function, parse_chroma_url
from ._embedder import Embedder, EmbedderError, HashEmbedder, MiniLMEmbedder, default_embedder
from ._episode_store import (
    ID_PREFIX,
    IDS_COMPLETE,
    INDEX,
    Episode,
    all_episodes,
    episode_from_run,
    episode_store_exists,
    finish_forgetting,
    forget_filter,
    forget_identities,
    forget_store,
    id_key,
    id_prefix,
    local_store_path,
    open_episode_store,
    prune_store,
    shared_embedder,
)
from ._episodic import EpisodicMemory
from ._outbox import OUTBOX_PARK_AFTER, PARKED_PREFIX
from ._training import TrainingExport, training_line
from ._vector import InMemoryVectorStore, MetadataValue, VectorHit, VectorRecord, VectorStore, VectorStoreError

__all__ = [
    "ChromaVectorStore",
    "EXACT_CAP",
    "Embedder",
    "EmbedderError",
    "Episode",
    "EpisodicMemory",
    "HashEmbedder",
    "IDS_COMPLETE",
    "ID_PREFIX",
    "INDEX",
    "InMemoryVectorStore",
    "MetadataValue",
    "MiniLMEmbedder",
    "OUTBOX_PARK_AFTER",
    "PARKED_PREFIX",
    "TrainingExport",
    "VectorHit",
    "VectorRecord",
    "VectorStore",
    "VectorStoreError",
    "all_episodes",
    "chroma_collection_name",
    "chroma_embedding_function",
    "default_embedder",
    "episode_from_run",
    "episode_store_exists",
    "finish_forgetting",
    "forget_filter",
    "forget_identities",
    "forget_store",
    "id_key",
    "id_prefix",
    "local_store_path",
    "open_episode_store",
    "parse_chroma_url",
    "prune_store",
    "shared_embedder",
    "training_line",
]
