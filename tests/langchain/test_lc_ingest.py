"""Token counts in Document metadata: trusted only when ctxbudget's ingest wrote them for this
very text and tokenizer (TokenCountTransformer), recounted otherwise, on every path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from ctxbudget import (
    Allocation,
    Budget,
    ContextAssembler,
    TiktokenTokenizer,
    get_tokenizer,
    ingest_metadata,
)
from langchain_ctxbudget import TokenCountTransformer
from tests.support.factories import passage
from tests.support.langchain_stack import (
    PATHS,
    Path,
    RecordingChatModel,
    chain_for,
    received_tokens,
    vector_retriever,
)

LIMIT = 2_000
QUESTION = "How long do refunds take?"


def limited() -> ContextAssembler:
    budget = Budget(
        total=LIMIT + 2_000,
        reserve_output=0,
        allocations=(Allocation("retrieved", max=LIMIT, priority=1),),
    )
    return ContextAssembler(tokenizer="gpt-4o", budget=budget)


def forged(kind: str, i: int, o200k: TiktokenTokenizer, cl100k: TiktokenTokenizer) -> Document:
    """A 708-token document whose metadata claims a count that is not its own."""
    text = passage(i)
    metadata: dict[str, Any]
    if kind == "generic":
        metadata = {"tokens": 23}
    elif kind == "forged":
        metadata = {
            "ctxbudget_tokens": 23,
            "ctxbudget_tokenizer": "o200k_base",
            "ctxbudget_digest": "0" * 32,
        }
    elif kind == "stale":  # counted at ingest, then the text was edited
        metadata = ingest_metadata(text[:100], o200k)
    else:
        metadata = ingest_metadata(text, cl100k)
    return Document(text, id=f"d{i}", metadata=metadata)


def sent_for(path: Path, documents: list[Document], model: RecordingChatModel) -> int:
    """Tokens that reached the model through `path`, less what the chain sends without sources."""
    chain = chain_for(path, RunnableLambda(lambda _: documents), limited(), model)
    chain.invoke(QUESTION)
    empty = RecordingChatModel()
    chain_for(path, RunnableLambda(lambda _: []), limited(), empty).invoke(QUESTION)
    return received_tokens(model.received[0]) - received_tokens(empty.received[0])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", ["generic", "forged", "stale", "other_tokenizer"])
def test_count_not_written_for_this_text_and_tokenizer_is_recounted(
    path: Path,
    kind: str,
    model: RecordingChatModel,
    o200k: TiktokenTokenizer,
    cl100k: TiktokenTokenizer,
) -> None:
    documents = [forged(kind, i, o200k, cl100k) for i in range(10)]
    sent = sent_for(path, documents, model)
    assert 708 * 2 <= sent <= LIMIT


@pytest.mark.parametrize("path", PATHS)
def test_honest_ingest_counts_keep_the_budget(path: Path, model: RecordingChatModel) -> None:
    documents = TokenCountTransformer("gpt-4o").transform_documents(
        [Document(passage(i), id=f"d{i}") for i in range(10)]
    )
    assert 708 * 2 <= sent_for(path, list(documents), model) <= LIMIT


def counted_texts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text tiktoken encodes whole from now on, with the suite's join checks off (they
    re-encode every joined text on purpose)."""
    monkeypatch.setenv("CTXBUDGET_VERIFY_JOINS", "0")
    seen: list[str] = []
    real = TiktokenTokenizer.count

    def count(self: TiktokenTokenizer, text: str) -> int:
        seen.append(text)
        return real(self, text)

    monkeypatch.setattr(TiktokenTokenizer, "count", count)
    return seen


@pytest.mark.parametrize("path", PATHS)
def test_honest_ingest_counts_are_used_not_recounted(
    path: Path, model: RecordingChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [passage(i) for i in range(2)]  # both fit
    documents = TokenCountTransformer("gpt-4o").transform_documents(
        [Document(text, id=f"d{i}") for i, text in enumerate(texts)]
    )
    seen = counted_texts(monkeypatch)
    chain_for(path, RunnableLambda(lambda _: list(documents)), limited(), model).invoke(QUESTION)
    sent = "\n".join(str(m.content) for m in model.received[0])
    assert all(text in sent for text in texts)
    assert not [text for text in seen if any(t in text for t in texts)]


def test_without_ingest_counts_the_texts_are_counted(
    model: RecordingChatModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [passage(i) for i in range(3)]
    seen = counted_texts(monkeypatch)
    documents = [Document(text, id=f"d{i}") for i, text in enumerate(texts)]
    chain_for("runnable", RunnableLambda(lambda _: documents), limited(), model).invoke(QUESTION)
    assert [text for text in seen if any(t in text for t in texts)]


def test_token_count_transformer_writes_the_core_ingest_metadata(
    o200k: TiktokenTokenizer,
) -> None:
    [document] = TokenCountTransformer("gpt-4o").transform_documents(
        [Document("Refunds take 5 days.", id="r", metadata={"title": "Refunds"})]
    )
    assert document.metadata == {
        "title": "Refunds",
        **ingest_metadata("Refunds take 5 days.", o200k),
    }
    assert (document.id, document.page_content) == ("r", "Refunds take 5 days.")


def test_token_count_transformer_does_not_change_its_input() -> None:
    documents = [Document("Refunds take 5 days.", metadata={"title": "Refunds"})]
    before = copy.deepcopy(documents)
    TokenCountTransformer("gpt-4o").transform_documents(documents)
    assert documents == before


def test_token_count_transformer_takes_a_tokenizer_object(o200k: TiktokenTokenizer) -> None:
    [document] = TokenCountTransformer(get_tokenizer("o200k_base")).transform_documents(
        [Document("Hi.")]
    )
    assert document.metadata["ctxbudget_tokens"] == o200k.count("Hi.")


def test_token_count_transformer_tokenizer_of_another_type_is_an_error() -> None:
    with pytest.raises(TypeError, match="tokenizer must be a model/encoding name or a Tokenizer"):
        TokenCountTransformer(42)  # type: ignore[arg-type]


def test_token_count_transformer_unknown_keyword_is_an_error() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) 'k'; it takes none"):
        TokenCountTransformer("gpt-4o").transform_documents([Document("Hi.")], k=1)


def test_token_count_transformer_in_a_vector_store_keeps_the_counts(
    o200k: TiktokenTokenizer,
) -> None:

    counted = TokenCountTransformer("gpt-4o").transform_documents(
        [Document("Refunds take 5 days.")]
    )
    [found] = vector_retriever(list(counted)).invoke(QUESTION)
    assert found.metadata["ctxbudget_tokens"] == o200k.count("Refunds take 5 days.")
