"""Checks that tfm and huggingface_hub share one Hub cache, both ways, offline.

1. test_hub's HubTest.ExportsACacheForHuggingfaceHub downloads two repos from the test's fake Hub into a fresh
   cache; the installed huggingface_hub then reads it: scan_cache_dir (no warnings; the expected repos,
   revisions, refs and files), hf_hub_download, try_to_load_from_cache and snapshot_download with
   local_files_only, blob names against their content (sha256 for LFS files, git's blob sha1 otherwise), and
   Transformers' AutoConfig / GenerationConfig.
2. huggingface_hub's snapshot_download fills another cache from a fake Hub of this script (httpx.MockTransport,
   serving the fixture repo the test exported), and HubTest.ReadsACacheWrittenByHuggingfaceHub reads it with
   tfm, offline.

Usage, from the repository root: python tests/hub/check_cache_with_huggingface_hub.py build/test_hub
Prints "OK" and exits 0 when every check passes.
"""

import hashlib
import json
import os
import subprocess
import sys
import tempfile

import httpx

COMMIT = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
SOLO_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
SHARDED_FILES = {
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "chat_template.jinja", "model.safetensors.index.json", "model-00001-of-00002.safetensors",
    "model-00002-of-00002.safetensors"}
EXPECTED = {
    "org/sharded": (COMMIT, {"main", "v1.0"}, SHARDED_FILES),
    "solo": (SOLO_COMMIT, {"main"}, {"config.json", "model.safetensors", "tokenizer.json"}),
}


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def run_test(binary, name, **env):
    result = subprocess.run([binary, "--gtest_filter=HubTest." + name], env=dict(os.environ, **env),
                            capture_output=True, text=True)
    passed = result.returncode == 0 and "[  PASSED  ] 1 test." in result.stdout and "SKIPPED" not in result.stdout
    assert passed, result.stdout + result.stderr


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/test_hub")
    with tempfile.TemporaryDirectory() as work:
        run_test(binary, "ExportsACacheForHuggingfaceHub", TFM_HUB_EXPORT=work)
        check_tfm_cache(os.path.join(work, "tfm-cache"))
        python_cache = os.path.join(work, "python-cache")
        fill_cache_with_huggingface_hub(os.path.join(work, "fixture"), python_cache)
        run_test(binary, "ReadsACacheWrittenByHuggingfaceHub", TFM_HUB_PYTHON_CACHE=python_cache)
    print("OK")


def check_tfm_cache(cache):
    from huggingface_hub import hf_hub_download, scan_cache_dir, snapshot_download, try_to_load_from_cache

    info = scan_cache_dir(cache)
    assert not info.warnings, info.warnings
    repos = {repo.repo_id: repo for repo in info.repos}
    assert set(repos) == set(EXPECTED), repos.keys()
    for repo_id, (commit, refs, files) in EXPECTED.items():
        repo = repos[repo_id]
        assert repo.repo_type == "model"
        assert set(repo.refs) == refs, repo.refs
        assert [r.commit_hash for r in repo.revisions] == [commit], repo.revisions
        revision = next(iter(repo.revisions))
        assert revision.refs == frozenset(refs), revision.refs
        assert {f.file_name for f in revision.files} == files, revision.files
        for f in revision.files:
            data = open(f.blob_path, "rb").read()
            assert f.size_on_disk == len(data)
            etag = os.path.basename(f.blob_path)
            lfs = f.file_name.endswith(".safetensors")
            assert etag == (hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)), f.file_name
            for ref in refs:
                path = hf_hub_download(repo_id, f.file_name, revision=ref, cache_dir=cache, local_files_only=True)
                assert path == str(f.file_path), (path, f.file_path)
                assert try_to_load_from_cache(repo_id, f.file_name, cache_dir=cache, revision=ref) == path
        for ref in refs | {commit}:
            folder = snapshot_download(repo_id, revision=ref, cache_dir=cache, local_files_only=True)
            assert folder == os.path.join(cache, "models--" + repo_id.replace("/", "--"), "snapshots", commit)

    from transformers import AutoConfig, GenerationConfig

    config = AutoConfig.from_pretrained("org/sharded", cache_dir=cache, local_files_only=True)
    assert config.model_type == "llama" and config.hidden_size == 8, config
    generation = GenerationConfig.from_pretrained("org/sharded", revision="v1.0", cache_dir=cache,
                                                  local_files_only=True)
    assert generation.do_sample is False


def fill_cache_with_huggingface_hub(fixture, cache):
    """snapshot_download of org/sharded's model files from a fake Hub with the real endpoints and headers."""
    import huggingface_hub

    files = {name: open(os.path.join(fixture, name), "rb").read() for name in os.listdir(fixture)}
    lfs = {name for name in files if name.endswith((".safetensors", ".bin"))}
    by_sha256 = {hashlib.sha256(files[name]).hexdigest(): files[name] for name in lfs}
    endpoint = "https://fake-hub.test"

    def tree_entry(name):
        entry = {"type": "file", "path": name, "size": len(files[name]), "oid": git_blob_sha1(files[name])}
        if name in lfs:
            entry["lfs"] = {"oid": hashlib.sha256(files[name]).hexdigest(), "size": len(files[name]),
                            "pointerSize": 130}
        return entry

    def handle(request):
        path = request.url.path
        prefix = "/api/models/org/sharded/"
        if path == prefix + "revision/main":
            siblings = [{"rfilename": name} for name in sorted(files)]
            return httpx.Response(200, json={"id": "org/sharded", "sha": COMMIT, "siblings": siblings})
        if path == prefix + "tree/" + COMMIT:
            return httpx.Response(200, json=[tree_entry(name) for name in sorted(files)])
        if path.startswith("/org/sharded/resolve/" + COMMIT + "/"):
            name = path.rsplit("/", 1)[1]
            headers = {"X-Repo-Commit": COMMIT}
            if name in lfs:
                sha256 = hashlib.sha256(files[name]).hexdigest()
                headers.update({"Location": "https://cdn.fake-hub.test/" + sha256, "X-Linked-Etag": f'"{sha256}"',
                                "X-Linked-Size": str(len(files[name])), "ETag": '"pointer"'})
                return httpx.Response(302, headers=headers)
            headers["ETag"] = f'"{git_blob_sha1(files[name])}"'
            return httpx.Response(200, headers=headers, content=b"" if request.method == "HEAD" else files[name])
        if request.url.host == "cdn.fake-hub.test":
            return httpx.Response(200, content=by_sha256[path[1:]])
        return httpx.Response(404, headers={"X-Error-Code": "EntryNotFound"})

    huggingface_hub.set_client_factory(
        lambda: httpx.Client(transport=httpx.MockTransport(handle), follow_redirects=True))
    try:
        folder = huggingface_hub.snapshot_download("org/sharded", cache_dir=cache, endpoint=endpoint,
                                                   allow_patterns=sorted(SHARDED_FILES))
    finally:
        huggingface_hub.set_client_factory(huggingface_hub.utils._http.default_client_factory)
    assert folder == os.path.join(cache, "models--org--sharded", "snapshots", COMMIT), folder
    assert set(os.listdir(folder)) == SHARDED_FILES, os.listdir(folder)


if __name__ == "__main__":
    main()
