"""The official `openai` Python client against a running tfm server (tests/server/openai_client_test.cpp starts
one and runs this script): chat and completions, streamed and whole, the errors the client turns into its
exception classes, and a stream the client closes early.

usage: openai_client_check.py BASE_URL API_KEY   (BASE_URL as http://127.0.0.1:PORT/v1)
Exits 0 when every check passes; prints each failure.
"""

import sys
import time
import urllib.request

import openai

BASE_URL, API_KEY = sys.argv[1], sys.argv[2]
MODEL = "tfm-demo"
HELLO = [{"role": "user", "content": "Hello there"}]

client = openai.OpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0, timeout=60)
failures = []


def check(condition, what):
    if not condition:
        failures.append(what)


def metrics():
    text = urllib.request.urlopen(BASE_URL.removesuffix("/v1") + "/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def expect_error(error_class, call, code=None):
    try:
        call()
    except error_class as e:
        check(code is None or e.code == code, f"{error_class.__name__}: code {e.code!r}, expected {code!r}")
        return
    except Exception as e:  # noqa: BLE001 - any other outcome is the failure to report
        failures.append(f"expected {error_class.__name__}, got {type(e).__name__}: {e}")
        return
    failures.append(f"expected {error_class.__name__}, got an answer")


def models():
    check([m.id for m in client.models.list()] == [MODEL], "models.list() names the demo model")


def chat():
    whole = client.chat.completions.create(model=MODEL, messages=HELLO, max_completion_tokens=8, temperature=0)
    check(whole.object == "chat.completion", "chat object")
    check(whole.choices[0].message.role == "assistant", "assistant role")
    check(whole.choices[0].finish_reason == "length", "finish_reason length")
    check(whole.usage.completion_tokens == 8, "8 completion tokens")
    text, usage = "", None
    for chunk in client.chat.completions.create(model=MODEL, messages=HELLO, max_completion_tokens=8,
                                                temperature=0, stream=True,
                                                stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
    check(text == whole.choices[0].message.content, f"streamed chat {text!r} != {whole.choices[0].message.content!r}")
    check(usage is not None and usage.completion_tokens == 8, "streamed usage")


def completions():
    whole = client.completions.create(model=MODEL, prompt="The old man said", max_tokens=10, temperature=0,
                                      logprobs=2)
    choice = whole.choices[0]
    check(len(choice.logprobs.tokens) == 10, "10 tokens with log probabilities")
    check("".join(choice.logprobs.tokens) == choice.text, "the tokens make the text")
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=MODEL, prompt="The old man said", max_tokens=10, temperature=0, stream=True) if c.choices)
    check(streamed == choice.text, f"streamed completion {streamed!r} != {choice.text!r}")
    seeded = client.completions.create(model=MODEL, prompt="Once", max_tokens=6, temperature=1, seed=3, n=2,
                                       presence_penalty=0.5, frequency_penalty=0.5, top_p=0.9, stop=["\n\n"])
    again = client.completions.create(model=MODEL, prompt="Once", max_tokens=6, temperature=1, seed=3, n=2,
                                      presence_penalty=0.5, frequency_penalty=0.5, top_p=0.9, stop=["\n\n"])
    check([c.text for c in seeded.choices] == [c.text for c in again.choices], "a seed repeats its choices")
    check(len(seeded.choices) == 2, "n=2 gives two choices")


def errors():
    expect_error(openai.NotFoundError, lambda: client.chat.completions.create(model="gpt-4", messages=HELLO),
                 "model_not_found")
    expect_error(openai.BadRequestError, lambda: client.completions.create(model=MODEL, prompt=[7] * 600),
                 "context_length_exceeded")
    expect_error(openai.BadRequestError,
                 lambda: client.chat.completions.create(model=MODEL, messages=HELLO, max_tokens="many"),
                 "invalid_type")
    wrong_key = openai.OpenAI(base_url=BASE_URL, api_key="sk-wrong", max_retries=0)
    expect_error(openai.AuthenticationError, lambda: wrong_key.models.list(), "invalid_api_key")


def disconnect():
    before = metrics().get('tfm_requests_finished_total{finish_reason="abort"}', 0)
    stream = client.completions.create(model=MODEL, prompt="The old man said", max_tokens=480, temperature=0,
                                       stream=True)
    for i, _ in enumerate(stream):
        if i == 2:
            break
    stream.close()
    deadline = time.monotonic() + 10
    m = metrics()
    while time.monotonic() < deadline and m.get('tfm_requests_finished_total{finish_reason="abort"}', 0) <= before:
        time.sleep(0.02)
        m = metrics()
    check(m.get('tfm_requests_finished_total{finish_reason="abort"}', 0) == before + 1, "the closed stream aborted")
    check(m["tfm_kv_cache_blocks_used"] == 0, "no KV block in use after the closed stream")


for run in (models, chat, completions, errors, disconnect):
    try:
        run()
    except Exception as e:  # noqa: BLE001 - report and go on with the other checks
        failures.append(f"{run.__name__}: {type(e).__name__}: {e}")

for f in failures:
    print("FAILED:", f)
print(f"openai {openai.__version__}: {'all checks passed' if not failures else f'{len(failures)} failed'}")
sys.exit(1 if failures else 0)
