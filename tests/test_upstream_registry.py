"""The loader against the real registry: one real release with the platform tag the index shows."""

import pytest

from repro_studies.upstream import releases, wheelcache

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def index():
    try:
        return releases.fetch_index(timeout_s=20)
    except OSError as exc:
        pytest.skip(f"the registry is not reachable here ({type(exc).__name__})")


def test_a_manylinux_2_35_release_downloads_with_the_index_tags(index, tmp_path):
    tags = releases.release_platforms("0.20.0", index)
    assert tags and all(t.endswith("x86_64") for t in tags)
    entry = wheelcache.ensure_release("0.20.0", tmp_path, platforms=tags)
    assert isinstance(entry, wheelcache.CacheEntry), entry
    assert entry.provenance["wheel"].endswith(f"{tags[-1]}.whl")
    assert any("deepseek_v4" in m for m in entry.members()) and wheelcache.verify_entry(entry) == []
