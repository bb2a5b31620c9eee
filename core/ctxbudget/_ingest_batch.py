"""Ingest a column of texts at once, for data pipelines that run on a cluster.

The columns written are `ingest_metadata`'s, value for value (the count, the tokenizer's
name, the digest), so `ingest_count` trusts a row's count exactly as it trusts one a
framework's ingest step stored; beside them, the instruction scan's parse warnings. A
batch is a `pyarrow.Table` or `RecordBatch`, a `pandas.DataFrame` or a dict of columns:
Ray Data's ``batch_format`` "pyarrow", "pandas" and "numpy". `IngestBatch` is the same
step as a class, for `ds.map_batches` (one tokenizer per actor) and a Spark pandas UDF.

pyarrow and pandas are never imported here: a batch of theirs is recognised among the
modules already loaded, since whoever built it imported them.
"""

from __future__ import annotations

import math
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar

from ctxbudget._errors import InputError
from ctxbudget._ingest import DIGEST_KEY, TOKENIZER_KEY, TOKENS_KEY, count_digest, ingest_metadata
from ctxbudget._scan import scan_for_instructions
from ctxbudget._tokens import TiktokenTokenizer, Tokenizer, tokenizer_of

__all__ = [
    "INGEST_BATCH_COLUMNS",
    "PARSE_WARNINGS_KEY",
    "IngestBatch",
    "ingest_batch",
    "ingest_columns",
]

PARSE_WARNINGS_KEY: Final = "ctxbudget_parse_warnings"
"""Column (and node metadata key): the scan's parse warnings, one per line, "" when none.

One string rather than a list: it comes back from Arrow, Parquet, pandas and Ray's numpy
format as the same string, and vector stores that keep only flat scalar metadata (Chroma,
Pinecone) store it; a list column comes back from Arrow as a numpy array in pandas and is
refused by those stores. No warning contains a newline, so the split is exact."""

INGEST_BATCH_COLUMNS: Final = (TOKENS_KEY, TOKENIZER_KEY, DIGEST_KEY, PARSE_WARNINGS_KEY)
"""The columns `ingest_batch` adds, in order (the warnings only when it scans)."""

Batch = TypeVar("Batch")

_ARROW_TYPES: Final = {
    TOKENS_KEY: "int64",
    TOKENIZER_KEY: "string",
    DIGEST_KEY: "string",
    PARSE_WARNINGS_KEY: "string",
}


def ingest_columns(
    texts: Sequence[object],
    tokenizer: Tokenizer,
    *,
    scan: bool = True,
    num_threads: int = 1,
    column: str = "text",
) -> dict[str, list[Any]]:
    """The ingest columns for `texts`: row i holds `ingest_metadata(texts[i], tokenizer)`'s
    values and, with `scan`, the row's `scan_for_instructions` warnings joined by newlines.

    A tiktoken tokenizer counts the column with `encode_ordinary_batch` on `num_threads`
    threads (tiktoken releases the GIL; one thread encodes in a plain loop); any other
    tokenizer counts text by text. `InputError` names
    the first row that is not a str (`column` names the column in the message).
    """
    _check_texts(texts, column)
    if num_threads < 1:
        raise ValueError(f"num_threads must be >= 1, but got {num_threads}")
    strings: list[str] = list(texts)  # type: ignore[arg-type]  # each checked a str above
    name = tokenizer.name
    if type(tokenizer) is TiktokenTokenizer:
        # Exactly `TiktokenTokenizer.count`, batched: a subclass may count otherwise.
        encoded = strings
        if tokenizer.normalization is not None:
            encoded = [unicodedata.normalize(tokenizer.normalization, t) for t in strings]
        encoding = tokenizer.encoding
        if num_threads == 1:
            # On one thread the batch API only adds its pool: twice the CPU of this loop
            # (benchmarks/README.md, "Ingest on a cluster, 2026-12-02").
            counts = [len(encoding.encode_ordinary(text)) for text in encoded]
        else:
            ids = encoding.encode_ordinary_batch(encoded, num_threads=num_threads)
            counts = [len(row) for row in ids]
        digests = [count_digest(text, name, n) for text, n in zip(strings, counts, strict=True)]
    else:
        rows = [ingest_metadata(text, tokenizer) for text in strings]
        counts = [row[TOKENS_KEY] for row in rows]
        digests = [row[DIGEST_KEY] for row in rows]
    columns: dict[str, list[Any]] = {
        TOKENS_KEY: counts,
        TOKENIZER_KEY: [name] * len(strings),
        DIGEST_KEY: digests,
    }
    if scan:
        columns[PARSE_WARNINGS_KEY] = ["\n".join(scan_for_instructions(text)) for text in strings]
    return columns


def ingest_batch(
    batch: Batch,
    *,
    tokenizer: str | Tokenizer,
    text_column: str = "text",
    scan: bool = True,
    num_threads: int = 1,
) -> Batch:
    """`batch` with the ingest columns (`ingest_columns`) added, as a new batch of its type.

    `batch`: a `pyarrow.Table` or `RecordBatch`, a `pandas.DataFrame`, or a dict of
    columns (lists or arrays); the input is not changed. Columns of these names already in
    the batch are replaced. Store the new columns as each chunk's metadata, and the
    adapters use the count instead of counting the text again.

    >>> ingest_batch({"text": ["Refunds take 14 days."]}, tokenizer="gpt-4o")["ctxbudget_tokens"]
    [7]
    """
    tokenizer = tokenizer_of(tokenizer)

    def count(texts: Sequence[object]) -> dict[str, list[Any]]:
        return ingest_columns(
            texts, tokenizer, scan=scan, num_threads=num_threads, column=text_column
        )

    given: Any = batch  # its type is checked here, at run time
    arrow = sys.modules.get("pyarrow")
    pandas = sys.modules.get("pandas")
    if arrow is not None and isinstance(given, arrow.Table | arrow.RecordBatch):
        out = given
        for name, values in count(
            _column(given, text_column, given.column_names).to_pylist()
        ).items():
            array = arrow.array(values, type=_ARROW_TYPES[name])
            if name in out.column_names:
                out = out.set_column(out.column_names.index(name), name, array)
            else:
                out = out.append_column(name, array)
        return out  # type: ignore[no-any-return]  # of the type `batch` is
    if pandas is not None and isinstance(given, pandas.DataFrame):
        out = given.copy(deep=False)
        for name, values in count(
            _column(given, text_column, list(given.columns)).tolist()
        ).items():
            out[name] = _series(pandas, name, values, given.index)
        return out  # type: ignore[no-any-return]
    if isinstance(given, Mapping):
        columns = count(list(_column(given, text_column, list(given))))
        return {**given, **columns}  # type: ignore[return-value]  # a dict, as `batch` is
    raise TypeError(
        f"ingest_batch takes a pyarrow Table or RecordBatch, a pandas DataFrame or a dict of "
        f"columns, not {type(batch).__name__}; for Ray Data pass batch_format='pyarrow', "
        "'pandas' or 'numpy' to map_batches"
    )


class IngestBatch:
    """`ingest_batch` as a callable with its options bound and its tokenizer built once.

    Ray Data builds one per actor, so the vocabulary loads once per worker, not per batch::

        ds.map_batches(IngestBatch, fn_constructor_kwargs={"tokenizer": "gpt-4o"},
                       batch_format="pyarrow", concurrency=2)

    `series` is the Spark pandas UDF: a Series of texts in, a DataFrame of the ingest
    columns out. Pickled, it carries the tokenizer's name when built from one and builds
    the tokenizer again where it is unpickled.
    """

    def __init__(
        self,
        tokenizer: str | Tokenizer,
        *,
        text_column: str = "text",
        scan: bool = True,
        num_threads: int = 1,
    ) -> None:
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, but got {num_threads}")
        self._given = tokenizer
        self.tokenizer = tokenizer_of(tokenizer)
        self.text_column = text_column
        self.scan = scan
        self.num_threads = num_threads

    def __call__(self, batch: Batch) -> Batch:
        """`batch` with the ingest columns added (`ingest_batch`)."""
        return ingest_batch(
            batch,
            tokenizer=self.tokenizer,
            text_column=self.text_column,
            scan=self.scan,
            num_threads=self.num_threads,
        )

    def series(self, texts: Any) -> Any:
        """The ingest columns of a `pandas.Series` of texts: a `pandas.DataFrame` on its index."""
        pandas = sys.modules.get("pandas")
        if pandas is None or not isinstance(texts, pandas.Series):
            raise TypeError(f"series() takes a pandas Series of texts, not {type(texts).__name__}")
        columns = ingest_columns(
            texts.tolist(),
            self.tokenizer,
            scan=self.scan,
            num_threads=self.num_threads,
            column=str(texts.name) if texts.name is not None else "the series",
        )
        return pandas.DataFrame(
            {name: _series(pandas, name, values, texts.index) for name, values in columns.items()}
        )

    def __getstate__(self) -> dict[str, Any]:
        return {
            "tokenizer": self._given,
            "text_column": self.text_column,
            "scan": self.scan,
            "num_threads": self.num_threads,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]  # rebuilds the tokenizer from its name

    def __repr__(self) -> str:
        return f"IngestBatch({self.tokenizer.name!r}, text_column={self.text_column!r})"


def _series(pandas: Any, name: str, values: list[Any], index: Any) -> Any:
    # Counts as int64 even when the batch is empty; strings take pandas' own str dtype.
    return pandas.Series(values, index=index, dtype="int64" if name == TOKENS_KEY else None)


def _column(batch: Any, name: str, names: Sequence[object]) -> Any:
    if name not in names:
        shown = ", ".join(repr(n) for n in names[:20]) or "none"
        raise InputError(
            f"the batch has no column {name!r} (its columns: {shown}); pass text_column= "
            "the name of the column that holds the chunk texts"
        )
    return batch[name]


def _check_texts(texts: Sequence[object], column: str) -> None:
    for row, text in enumerate(texts):
        if isinstance(text, str):
            continue
        if text is None or (isinstance(text, float) and math.isnan(text)):
            raise InputError(
                f"row {row} of column {column!r} is missing (null); every row needs its "
                "text: drop or fill the empty rows before ingest, e.g. ds.filter(...) or "
                f"df.dropna(subset=[{column!r}])"
            )
        fix = "decode it to str first" if isinstance(text, bytes) else "convert it to str first"
        raise InputError(
            f"row {row} of column {column!r} is {type(text).__name__}, not str; {fix}, or "
            "pass text_column= the column that holds the chunk texts"
        )
