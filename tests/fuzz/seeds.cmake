# Gathers each fuzz target's seed corpus from the repository's fixtures into OUT/<target> (scripts/fuzz runs it
# as cmake -DSOURCE=<checkout> -DOUT=<folder> -P tests/fuzz/seeds.cmake).
file(REMOVE_RECURSE ${OUT})

function(copy_seeds target)
  file(GLOB_RECURSE files LIST_DIRECTORIES false ${ARGN})
  foreach(file ${files})
    file(RELATIVE_PATH name ${SOURCE} ${file})
    string(REPLACE "/" "_" name ${name})
    configure_file(${file} ${OUT}/${target}/${name} COPYONLY)
  endforeach()
endfunction()

# One seed per element of a JSON list: the element's `member` (a string as is, other values as JSON; a list
# of keys reaches into nested objects), between PREFIX and SUFFIX when given. Elements without it give none.
function(json_seeds target file member)
  cmake_parse_arguments(S "" "PREFIX;SUFFIX" "" ${ARGN})
  file(READ ${SOURCE}/${file} text)
  string(JSON count LENGTH "${text}")
  math(EXPR last "${count} - 1")
  get_filename_component(stem ${file} NAME_WE)
  foreach(i RANGE ${last})
    string(JSON value ERROR_VARIABLE absent GET "${text}" ${i} ${member})
    if(NOT absent)
      file(WRITE ${OUT}/${target}/${stem}_${i} "${S_PREFIX}${value}${S_SUFFIX}")
    endif()
  endforeach()
endfunction()

copy_seeds(safetensors ${SOURCE}/tests/fixtures/safetensors/*.safetensors)
copy_seeds(config ${SOURCE}/tests/fixtures/models/*/config.json ${SOURCE}/models/demo/config.json)
copy_seeds(tokenizer ${SOURCE}/tests/tokenizer/families/*/tokenizer.json ${SOURCE}/models/demo/tokenizer.json)
copy_seeds(training_records ${SOURCE}/tests/fixtures/train/*.jsonl)
copy_seeds(jinja ${SOURCE}/tests/jinja/templates/*.jinja ${SOURCE}/models/demo/chat_template.jinja)
json_seeds(jinja tests/jinja/goldens/syntax.json template)
file(READ ${SOURCE}/tests/assets/tokenizers/qwen3/tokenizer_config.json qwen3_config)
string(JSON qwen3_template GET "${qwen3_config}" chat_template)
file(WRITE ${OUT}/jinja/qwen3 "${qwen3_template}")
json_seeds(cli_stdin tests/jinja/goldens/qwen3.json inputs)
json_seeds(cli_stdin tests/jinja/goldens/families.json inputs)
file(READ ${SOURCE}/tests/fixtures/training_args_cases.json training_args_cases)
string(JSON training_args_count LENGTH "${training_args_cases}" cases)
math(EXPR training_args_last "${training_args_count} - 1")
foreach(i RANGE ${training_args_last})
  string(JSON config ERROR_VARIABLE no_config GET "${training_args_cases}" cases ${i} json)
  if(NOT no_config)
    file(WRITE ${OUT}/training_args/case_${i} "${config}")
  endif()
endforeach()
file(WRITE ${OUT}/cli_stdin/texts "[\"The old man said\", \"\", \"h\\u00e9llo\\n\"]")
file(WRITE ${OUT}/cli_stdin/id_lists "[[1, 17, 42], [], [0]]")
copy_seeds(adapter_config ${SOURCE}/tests/fixtures/lora/*/adapter_config.json)
# Server requests: the first byte picks the endpoint, "0" chat, "1" completions (openai_request_fuzz.cpp).
json_seeds(openai_request tests/jinja/goldens/families.json "inputs;messages" PREFIX "0{\"messages\": "
           SUFFIX "}")
file(WRITE ${OUT}/openai_request/chat_every_field [=[0{"model": "demo", "messages": [{"role": "system",
"content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text",
"text": "there"}]}, {"role": "assistant", "content": null, "name": "bot"}], "stream": true,
"stream_options": {"include_usage": true}, "n": 2, "stop": ["\n", "END"], "max_completion_tokens": 16,
"max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "seed": -3, "presence_penalty": -0.5,
"frequency_penalty": 1.5, "logprobs": true, "top_logprobs": 5, "ignore_eos": false, "user": "u1",
"tools": null}]=])
file(WRITE ${OUT}/openai_request/completions_every_field [=[1{"model": "demo", "prompt": ["The old man said",
"h\u00e9llo"], "stream": false, "n": 1, "stop": "\n\n", "max_tokens": 24, "temperature": 0, "top_p": 1,
"seed": 9223372036854775807, "presence_penalty": 2, "frequency_penalty": -2, "logprobs": 3, "ignore_eos": true,
"user": null}]=])
file(WRITE ${OUT}/openai_request/completions_token_ids [=[1{"prompt": [[1, 17, 42], [0]], "max_tokens": 4}]=])
file(WRITE ${OUT}/openai_request/completions_one_token_list [=[1{"prompt": [5, 6, 7]}]=])
# An event stream: the first byte counts the piece sizes that follow, each one less than its piece
# (event_stream_fuzz.cpp): here pieces of 2, 7 and 42 bytes.
string(ASCII 3 1 6 41 stream_pieces)
file(WRITE ${OUT}/event_stream/chat_chunks "${stream_pieces}: keep-alive\n\nevent: message\n\
data: {\"id\": \"chatcmpl-1\", \"object\": \"chat.completion.chunk\", \"choices\": [{\"index\": 0, \"delta\": {\"role\": \"assistant\", \
\"content\": \"\"}, \"finish_reason\": null}]}\n\ndata: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \
\"Hi\\n\\n\"}}]}\n\ndata: {\"choices\": [], \"usage\": {\"prompt_tokens\": 5, \"completion_tokens\": 2}}\n\n\
data: [DONE]\n\n")
