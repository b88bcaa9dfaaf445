"""Checks that huggingface_hub (and Transformers) read the Hub cache that tfm writes, offline.

Runs test_hub's HubTest.ExportsACacheForTheHuggingfaceHubCheck, which downloads two repos from the test's fake
Hub into a fresh cache folder, then reads that folder with the installed huggingface_hub:
scan_cache_dir (no warnings, the expected repos, revisions, refs and files), hf_hub_download,
try_to_load_from_cache and snapshot_download with local_files_only, blob names against their content
(sha256 for LFS files, git's blob sha1 otherwise), and Transformers' AutoConfig / GenerationConfig.

Usage, from the repository root: python tests/hub/check_cache_with_huggingface_hub.py build/test_hub
Prints "OK" and exits 0 when every check passes.
"""

import hashlib
import os
import subprocess
import sys
import tempfile

COMMIT = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
SOLO_COMMIT = "fedcba9876543210fedcba9876543210fedcba98"
EXPECTED = {
    "org/sharded": (COMMIT, {"main", "v1.0"}, {
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "chat_template.jinja", "model.safetensors.index.json",
        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}),
    "solo": (SOLO_COMMIT, {"main"}, {"config.json", "model.safetensors", "tokenizer.json"}),
}


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def main():
    test_binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/test_hub")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TFM_HUB_EXPORT_CACHE=cache)
        subprocess.run([test_binary, "--gtest_filter=HubTest.ExportsACacheForTheHuggingfaceHubCheck"], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        os.environ["HF_HUB_OFFLINE"] = "1"  # before importing huggingface_hub, which reads it once
        check(cache)
    print("OK")


def check(cache):
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
    generation = GenerationConfig.from_pretrained("org/sharded", revision="v1.0", cache_dir=cache)
    assert generation.do_sample is False


if __name__ == "__main__":
    main()
