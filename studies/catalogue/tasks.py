"""Tasks as data: what a study trains on, the model fields it fixes, and the metric it reports.

A task is a frozen dataclass with a ``name`` (its ``TASKS`` key), an ``objective`` (the
metric every trial reports and its direction), ``metrics(report)`` (values it derives from
an evaluation, its objective among them where the trainer does not report it),
``model_fields()`` (vocabulary, classes, maximum length, architecture),
``load(cache_dir)`` (its splits, built once and then memory-mapped from the ``datasets``
cache), ``describe()`` (plain data for the store) and ``typical_length()`` (a training
batch's usual length, which the plan times). Tasks that read files take
``with_data_dir`` (``--data-dir``): the Long Range Arena release files (else
``$LRA_DATA_DIR``), or a language model's corpus (else the Python standard library).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import datasets

from trainers.data import loaders
from trainers.data.corpus import (
    HUB_PREFIX,
    STDLIB,
    TEXT_SOURCES,
    CorpusSpec,
    corpus_files,
    files_digest,
    python_version,
    stdlib_root,
)
from trainers.data.listops import NUM_CLASSES as LISTOPS_CLASSES
from trainers.data.listops import ListOpsSpec, mean_length
from trainers.data.lra_files import DataFileError, data_root
from trainers.data.recall import RecallSpec
from trainers.data.tokenize import BYTE_VOCAB_SIZE, LISTOPS_VOCABULARY, PIXEL_VOCAB_SIZE
from trainers.train import VAL_ACCURACY


@dataclass(frozen=True)
class Objective:
    """A value every trial reports, and whether the study wants it large or small."""

    metric: str
    direction: Literal["maximize", "minimize"]

    def best(self, values: Iterable[float]) -> float:
        """The best of some values of the metric: the largest or the smallest."""
        return max(values) if self.direction == "maximize" else min(values)


ACCURACY = Objective(VAL_ACCURACY, "maximize")
BITS_PER_BYTE = Objective("val_bits_per_byte", "minimize")
LANGUAGE_MODEL_EMBEDDING_STD = 0.02  # GPT-2's: first logits near zero, first loss near log V (``ModelConfig.embedding_std``)


class Task(Protocol):
    """What a study trains on (see the module's docstring)."""

    name: str
    objective: ClassVar[Objective]
    reads_files: ClassVar[bool]

    def metrics(self, report: Mapping[str, Any]) -> dict[str, float]: ...

    def model_fields(self) -> dict[str, Any]: ...

    def load(self, cache_dir: Path | None = None) -> datasets.DatasetDict: ...

    def describe(self) -> dict[str, Any]: ...

    def typical_length(self) -> int: ...


class JudgedByAccuracy:
    """A task whose objective is validation accuracy, which the trainer reports itself."""

    objective: ClassVar[Objective] = ACCURACY

    def metrics(self, report: Mapping[str, Any]) -> dict[str, float]:
        """Nothing to derive."""
        return {}


@dataclass(frozen=True)
class ListOpsTask(JudgedByAccuracy):
    """Generated ListOps at one size (``trainers.data.listops``)."""

    spec: ListOpsSpec
    name: str = "listops"
    reads_files: ClassVar[bool] = False

    def model_fields(self) -> dict[str, Any]:
        """The ``ModelConfig`` fields the task fixes."""
        return {"vocab_size": len(LISTOPS_VOCABULARY), "num_classes": LISTOPS_CLASSES, "max_length": self.spec.max_length}

    def load(self, cache_dir: Path | None = None) -> datasets.DatasetDict:
        """The splits, built once and then memory-mapped from the cache."""
        return loaders.listops_generated(self.spec, cache_dir=cache_dir)

    def describe(self) -> dict[str, Any]:
        """Plain data naming the task and every parameter of its data."""
        return {"task": self.name, **asdict(self.spec)}

    def typical_length(self) -> int:
        """The mean example's tokens: batches are bucketed by length (``trainers.data.batches``), so a batch is
        padded to about its examples' length, far below the longest (11 of 40 tokens in lra_sharing's quick data)."""
        return math.ceil(mean_length(self.spec))


@dataclass(frozen=True)
class RecallTask(JudgedByAccuracy):
    """Multi-query associative recall (Zoology's MQAR, ``trainers.data.recall``): a causal
    decoder predicts each queried key's value; accuracy is over the queried positions."""

    spec: RecallSpec
    val_examples: int
    test_examples: int | None = None  # None: as many as val_examples
    name: str = "mqar"
    reads_files: ClassVar[bool] = False

    def model_fields(self) -> dict[str, Any]:
        """The ``ModelConfig`` fields the task fixes."""
        return {
            "vocab_size": self.spec.vocab_size,
            "num_classes": self.spec.vocab_size,  # unused by the decoder, which predicts tokens
            "max_length": self.spec.seq_len,
            "architecture": "decoder",
        }

    def load(self, cache_dir: Path | None = None) -> datasets.DatasetDict:
        """The splits, built once and then memory-mapped from the cache."""
        return loaders.recall(self.spec, val_examples=self.val_examples, test_examples=self.test_size, cache_dir=cache_dir)

    def describe(self) -> dict[str, Any]:
        """Plain data naming the task and every parameter of its data."""
        return {"task": self.name, **asdict(self.spec), "val_examples": self.val_examples, "test_examples": self.test_size}

    def typical_length(self) -> int:
        """Every sequence is ``seq_len`` tokens."""
        return self.spec.seq_len

    @property
    def test_size(self) -> int:
        """Test examples: ``test_examples``, or as many as validate."""
        return self.val_examples if self.test_examples is None else self.test_examples


@dataclass(frozen=True)
class Release:
    """One Long Range Arena task read from the release files.

    Attributes:
        loader: ``loader(data_dir, cache_dir=...)`` from ``trainers.data.loaders``.
        model_fields: The ``ModelConfig`` fields the task fixes.
    """

    loader: Callable[..., datasets.DatasetDict]
    model_fields: dict[str, Any]


RELEASES: dict[str, Release] = {
    "lra_listops": Release(
        loaders.listops_release,
        {"vocab_size": len(LISTOPS_VOCABULARY), "num_classes": LISTOPS_CLASSES, "max_length": loaders.LISTOPS_MAX_LENGTH},
    ),
    "lra_text": Release(
        loaders.text_release, {"vocab_size": BYTE_VOCAB_SIZE, "num_classes": 2, "max_length": loaders.TEXT_MAX_LENGTH}
    ),
    "lra_retrieval": Release(
        loaders.retrieval_release,
        {
            "vocab_size": BYTE_VOCAB_SIZE,
            "num_classes": 2,
            "max_length": loaders.RETRIEVAL_MAX_LENGTH,
            "architecture": "pair",
        },
    ),
    "lra_image": Release(loaders.image_release, {"vocab_size": PIXEL_VOCAB_SIZE, "num_classes": 10, "max_length": 1024}),
    "lra_pathfinder": Release(loaders.pathfinder_release, {"vocab_size": PIXEL_VOCAB_SIZE, "num_classes": 2, "max_length": 1024}),
}


@dataclass(frozen=True)
class ReleaseTask(JudgedByAccuracy):
    """A Long Range Arena task from the release files (``RELEASES``), as LRA defines its splits.

    Attributes:
        name: A key of ``RELEASES``.
        data_dir: The unpacked ``lra_release`` directory; None: ``$LRA_DATA_DIR``.
    """

    name: str
    data_dir: Path | None = None
    reads_files: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.name not in RELEASES:
            raise ValueError(f"unknown LRA release task {self.name!r}; allowed: {', '.join(RELEASES)}")

    def model_fields(self) -> dict[str, Any]:
        """The ``ModelConfig`` fields the task fixes."""
        return dict(RELEASES[self.name].model_fields)

    def load(self, cache_dir: Path | None = None) -> datasets.DatasetDict:
        """The splits, read from the release files once and then memory-mapped from the cache.

        Raises:
            trainers.data.lra_files.DataFileError: a missing or malformed file (named, with
                where such files come from).
        """
        return RELEASES[self.name].loader(self.data_dir, cache_dir=cache_dir)

    def with_data_dir(self, data_dir: Path | None) -> ReleaseTask:
        """The same task reading ``data_dir`` (resolved, so that workers elsewhere read the same files),
        or ``$LRA_DATA_DIR`` when None.

        Raises:
            trainers.data.lra_files.DataFileError: neither is set.
        """
        return replace(self, data_dir=data_root(self.name, data_dir).resolve())

    def describe(self) -> dict[str, Any]:
        """Plain data naming the task and where its files are."""
        return {"task": self.name, "source": "lra_release", "data_dir": None if self.data_dir is None else str(self.data_dir)}

    def typical_length(self) -> int:
        """The longest input: a plan does not read the release files for their lengths (most reach it)."""
        return self.model_fields()["max_length"]


@dataclass(frozen=True)
class ByteLanguageTask:
    """Byte-level causal language modelling of a text corpus (``trainers.data.corpus``).

    Judged by validation bits per byte (lower is better): a byte is one token, so it is
    the mean next-token cross-entropy in bits. Perplexity per byte is reported beside it.

    Attributes:
        spec: Window length and windows per split.
        corpus: ``stdlib`` (the Python standard library's source: offline, the default),
            a directory of text files, or ``hf:NAME[:CONFIG]`` (``datasets.load_dataset``).
    """

    spec: CorpusSpec
    corpus: str = STDLIB
    name: str = "bytes_lm"
    objective: ClassVar[Objective] = BITS_PER_BYTE
    reads_files: ClassVar[bool] = True

    def metrics(self, report: Mapping[str, Any]) -> dict[str, float]:
        """Bits per byte and perplexity per byte, from the mean validation (and, at the end, test) loss in nats."""
        derived = {}
        for split in ("val", "test"):
            if f"{split}_loss" in report:
                loss = float(report[f"{split}_loss"])
                derived |= {f"{split}_bits_per_byte": loss / math.log(2), f"{split}_perplexity": math.exp(min(loss, 700.0))}
        return derived

    def model_fields(self) -> dict[str, Any]:
        """The ``ModelConfig`` fields the task fixes."""
        return {
            "vocab_size": BYTE_VOCAB_SIZE,
            "num_classes": BYTE_VOCAB_SIZE,  # unused by the decoder, which predicts tokens
            "max_length": self.spec.seq_len,
            "architecture": "decoder",
            "embedding_std": LANGUAGE_MODEL_EMBEDDING_STD,
        }

    def load(self, cache_dir: Path | None = None) -> datasets.DatasetDict:
        """The splits, read once and then memory-mapped from the cache.

        Raises:
            trainers.data.lra_files.DataFileError: a missing, empty, binary or too small corpus.
        """
        return loaders.byte_corpus(self.spec, self.corpus, cache_dir=cache_dir)

    def with_data_dir(self, data_dir: Path | str | None) -> ByteLanguageTask:
        """The same task reading ``data_dir``: a directory (resolved, so that workers elsewhere
        read the same files) or ``hf:NAME[:CONFIG]``; None keeps the corpus it has.

        Raises:
            trainers.data.lra_files.DataFileError: a directory that does not exist.
        """
        if data_dir is None or str(data_dir).startswith(HUB_PREFIX):
            return self if data_dir is None else replace(self, corpus=str(data_dir))
        if not Path(data_dir).is_dir():
            raise DataFileError(f"task {self.name!r}: corpus directory {data_dir} does not exist; give {TEXT_SOURCES}")
        return replace(self, corpus=str(Path(data_dir).resolve()))

    def describe(self) -> dict[str, Any]:
        """Plain data naming the task, its corpus and which files it holds (Python version and a
        digest of the file list for the standard library), so that two machines can tell
        whether they trained on the same text."""
        described = {"task": self.name, "corpus": self.corpus, **asdict(self.spec)}
        if self.corpus.startswith(HUB_PREFIX):
            return described
        stdlib = self.corpus == STDLIB
        root = stdlib_root() if stdlib else Path(self.corpus)
        files = corpus_files(root, python_only=stdlib)
        described |= {"files": len(files), "files_digest": files_digest(root, files)}
        return described | ({"python": python_version(), "stdlib_path": str(root)} if stdlib else {})

    def typical_length(self) -> int:
        """Every window is ``seq_len`` bytes."""
        return self.spec.seq_len


# Every task a study may name, lm-evaluation-harness style: name -> how to build it.
TASKS: dict[str, Callable[..., Task]] = {
    "listops": ListOpsTask,
    "mqar": RecallTask,
    "bytes_lm": ByteLanguageTask,
    **{name: partial(ReleaseTask, name) for name in RELEASES},
}
