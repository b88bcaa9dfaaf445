#!/usr/bin/env python3
"""Checks of the demo model's data scripts that need no torch: python3 models/demo/scripts/test_scripts.py"""

import unittest
from pathlib import Path

import numpy as np
from demo_data import batches_per_epoch, blocks, epoch_batches, token_stream
from tokenizers import Tokenizer
from prepare_corpus import document_paragraphs


def tagged(text):
    """'The/at man/nn' style tokens from space-separated words (the tag is irrelevant to the text)."""
    return " ".join(f"{word}/x" for word in text.split())


class Detokenize(unittest.TestCase):
    def paragraphs(self, *blocks):
        raw = "\n\n\n".join("\n".join("\t" + tagged(line) for line in block) for block in blocks)
        return document_paragraphs(raw)

    def test_punctuation_and_quotes(self):
        got = self.paragraphs(["He asked , `` Could we have a drink '' ? ?", "`` In the kitchen '' , he said ."])
        self.assertEqual(got, ['He asked, "Could we have a drink?" "In the kitchen," he said.'])

    def test_brackets_dashes_and_abbreviations(self):
        got = self.paragraphs(["It was won by Ivan Allen Jr. .", "Reps. V. E. ( Red ) Berry came home -- late ; ;"])
        self.assertEqual(got, ["It was won by Ivan Allen Jr. Reps. V. E. (Red) Berry came home--late;"])

    def test_single_quotes_alternate(self):
        got = self.paragraphs(["More ' pro ' letters than ' con ' ."])
        self.assertEqual(got, ["More 'pro' letters than 'con'."])

    def test_paragraphs_and_headlines(self):
        raw = "\n\n\tFirst/at one/cd ./.\nStill/rb first/od ./.\n\n\nMerger/nn-hl proposed/vbn-hl\nNext/ap ./.\n"
        self.assertEqual(document_paragraphs(raw), ["First one. Still first.", "Merger proposed", "Next."])


class Packing(unittest.TestCase):
    def test_token_stream_ends_each_document_with_endoftext(self):
        tokenizer_file = Path(__file__).resolve().parent.parent / "tokenizer.json"
        documents = ["The old man said no.\nShe left.", '"Why?" he asked.']
        stream = token_stream(documents, tokenizer_file)
        separators = np.flatnonzero(stream == 0)
        self.assertEqual(len(separators), 2)
        self.assertEqual(separators[-1], len(stream) - 1)
        decoded = Tokenizer.from_file(str(tokenizer_file)).decode(stream.tolist(), skip_special_tokens=False)
        self.assertEqual(decoded, "<|endoftext|>".join(documents) + "<|endoftext|>")

    def test_blocks_cover_the_stream_in_order(self):
        stream = np.arange(23)
        self.assertEqual(blocks(stream, 5).tolist(), [list(range(i, i + 5)) for i in range(0, 20, 5)])
        self.assertEqual(blocks(stream, 5, offset=3)[0].tolist(), [3, 4, 5, 6, 7])
        with self.assertRaises(ValueError):
            blocks(stream, 24)

    def test_epoch_batches_are_distinct_whole_blocks(self):
        stream = np.arange(1000)
        rng = np.random.default_rng(0)
        batches = list(epoch_batches(stream, 16, 4, rng))
        self.assertGreaterEqual(len(batches), batches_per_epoch(stream, 16, 4))
        starts = [row[0] for batch in batches for row in batch]
        self.assertEqual(len(set(starts)), len(starts))
        for batch in batches:
            self.assertEqual(batch.shape, (4, 16))
            self.assertTrue((np.diff(batch, axis=1) == 1).all())


if __name__ == "__main__":
    unittest.main()
