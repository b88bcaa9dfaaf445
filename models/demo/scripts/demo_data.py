"""The demo model's training data, without torch: read prepare_corpus.py's files, tokenize, pack into blocks.

A split is one token stream: each document's tokens followed by <|endoftext|>, documents in file order.
Training cuts the stream into blocks of `block_size` tokens from a random offset each epoch (so block
boundaries move between epochs) and shuffles them; validation cuts it from offset 0.
"""

from pathlib import Path

import numpy as np
from tokenizers import Tokenizer


def read_documents(path):
    """Documents of a prepare_corpus.py file: paragraphs are lines, documents are separated by a blank line."""
    text = Path(path).read_text(encoding="utf-8")
    return [doc for doc in text.split("\n\n") if doc.strip()]


def token_stream(documents, tokenizer_file, separator="<|endoftext|>"):
    """All documents' ids, each followed by the separator's id, as one int64 array."""
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    separator_id = tokenizer.token_to_id(separator)
    if separator_id is None:
        raise ValueError(f"{tokenizer_file}: no token {separator}")
    ids = []
    for encoding in tokenizer.encode_batch(documents, add_special_tokens=False):
        ids.extend(encoding.ids)
        ids.append(separator_id)
    return np.asarray(ids, dtype=np.int64)


def blocks(stream, block_size, offset=0):
    """The whole blocks of `block_size` tokens in stream[offset:], shape [n, block_size]."""
    count = (len(stream) - offset) // block_size
    if count < 1:
        raise ValueError(f"a stream of {len(stream)} tokens has no block of {block_size} from offset {offset}")
    return stream[offset : offset + count * block_size].reshape(count, block_size)


def epoch_batches(stream, block_size, batch_size, rng):
    """One epoch of training batches ([batch_size, block_size] arrays): blocks from a random offset,
    shuffled; the last partial batch is dropped."""
    epoch = blocks(stream, block_size, offset=int(rng.integers(block_size)))
    order = rng.permutation(len(epoch))
    for start in range(0, len(order) - batch_size + 1, batch_size):
        yield epoch[order[start : start + batch_size]]


def batches_per_epoch(stream, block_size, batch_size):
    """A lower bound on epoch_batches' length, whatever offset it draws."""
    return ((len(stream) - block_size) // block_size) // batch_size
