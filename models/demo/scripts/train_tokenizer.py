#!/usr/bin/env python3
"""Train the demo model's byte-level BPE tokenizer on train.txt (from prepare_corpus.py).

Usage: train_tokenizer.py DATA_DIR OUT_DIR [--vocab-size 4096]

Writes the files Transformers' save_pretrained writes for a fast tokenizer (tokenizer.json,
tokenizer_config.json, chat_template.jinja) into OUT_DIR. The result depends only on train.txt.
GPT-2 style: the ByteLevel pre-tokenizer (GPT-2's split regex, no prefix space) and the ByteLevel
decoder, so any text round-trips. Special tokens come first (ids 0, 1, 2):
  <|endoftext|>  separates documents; eos and pad
  <|im_start|>, <|im_end|>  ChatML turns for the chat template
"""

import argparse
from pathlib import Path

from demo_data import read_documents
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]

# ChatML, as Qwen models use it, without their tool-calling parts.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)


def build_tokenizer(documents, vocab_size):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(documents, trainer=trainer)
    return tokenizer


def wrap(tokenizer, model_max_length):
    """The Transformers tokenizer around a trained `tokenizers.Tokenizer`."""
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=ENDOFTEXT,
        pad_token=ENDOFTEXT,
        bos_token=None,
        unk_token=None,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
        chat_template=CHAT_TEMPLATE,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", help="folder with train.txt")
    parser.add_argument("out_dir", help="folder to write the tokenizer files into")
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--model-max-length", type=int, default=512)
    args = parser.parse_args(argv)

    documents = read_documents(Path(args.data_dir) / "train.txt")
    tokenizer = build_tokenizer(documents, args.vocab_size)
    if tokenizer.get_vocab_size() != args.vocab_size:
        raise SystemExit(f"trained vocabulary has {tokenizer.get_vocab_size()} tokens, wanted {args.vocab_size}")
    for index, token in enumerate(SPECIAL_TOKENS):
        if tokenizer.token_to_id(token) != index:
            raise SystemExit(f"special token {token} is not id {index}")
    wrap(tokenizer, args.model_max_length).save_pretrained(args.out_dir)


if __name__ == "__main__":
    main()
