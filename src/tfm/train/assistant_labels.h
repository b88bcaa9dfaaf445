// A conversation as a training example with the loss on its assistant messages only.
//
// The rule. Let F be the tokens of the whole conversation, P_i those of messages[:i] rendered with
// add_generation_prompt (what the model sees before assistant message i) and M_i those of messages[:i+1].
//  - Message i starts in F at s = len(P_i): P_i must be a prefix of F, except that its last token may merge
//    with the message's first (Qwen3 ends the header with "\n" and BPE joins it with content that begins
//    with "\n"); s is then where F departs from P_i, and the merged token is the assistant's.
//  - It ends where the next message's rendering starts: at len(M_i) when M_i is a prefix of F. Some templates
//    render a conversation's last message differently: Qwen3 writes an empty <think></think> block before
//    the last assistant turn, and its reasoning, which it drops from earlier turns. So in general the
//    message's tokens are the longest tail of M_i[s:] that F continues with at s: all of M_i[s:] when M_i is
//    a prefix of F, and for an earlier Qwen3 turn its content and "<|im_end|>\n" as F has them.
// The labels are the input ids there (the message and its end-of-turn tokens) and -100 elsewhere: system,
// user and tool messages and the assistant headers. Transformers' return_assistant_tokens_mask gives the
// same spans for a template that wraps each assistant message in {% generation %} (tests/train).
#pragma once

#include <string>

#include "tfm/io/json.h"
#include "tfm/train/dataset.h"

namespace tfm {

// `messages` rendered by the template `source` and tokenized as apply_chat_template(messages,
// tokenize=True) does (no special tokens added), with the labels of the rule above. Errors (a template that
// fails, a conversation that starts with an assistant message, spans that cannot be found) are tfm::Error.
TrainingExample tokenize_with_assistant_labels(const json::Value& messages, const std::string& source,
                                               const tokenizer::Tokenizer& tokenizer);

}  // namespace tfm
