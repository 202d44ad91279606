"""Parsing kerchunk reference sets (versions 0 and 1, templates, gen) and refusing bad ones."""

from __future__ import annotations

import base64
import json

import pytest

from nczfs.toolbox.errors import SourceError
from nczfs.store.reference import spec as refspec
from nczfs.store.reference.spec import Ref, load_references, parse_references

BASE = "/data/refs"


def test_version0_values():
    refs = parse_references(
        {
            ".zgroup": '{"zarr_format":2}',
            "v/.zarray": {"shape": [2], "chunks": [2]},
            "v/0": ["chunks.bin", 100, 16],
            "v/1": ["file:///abs/whole.bin"],
            "v/2": ["http://127.0.0.1:9/x.nc", 0, 8],
            "b64": "base64:" + base64.b64encode(b"\x00\xffbin").decode(),
        },
        BASE,
    )
    assert refs[".zgroup"] == b'{"zarr_format":2}'
    assert json.loads(refs["v/.zarray"]) == {"shape": [2], "chunks": [2]}
    assert refs["v/0"] == Ref("/data/refs/chunks.bin", 100, 16)
    assert refs["v/1"] == Ref("/abs/whole.bin")
    assert refs["v/2"] == Ref("http://127.0.0.1:9/x.nc", 0, 8)
    assert refs["b64"] == b"\x00\xffbin"


def test_version0_urls_are_not_templates():
    refs = parse_references({"k": ["dir/{{x}}.bin"]}, BASE)
    assert refs["k"] == Ref("/data/refs/dir/{{x}}.bin")


def test_version1_templates_and_the_issue_gen_example():
    doc = {
        "version": 1,
        "templates": {"u": "server.domain/path", "f": "{{c}}"},
        "gen": [
            {
                "key": "gen_key{{i}}",
                "url": "http://{{u}}_{{i}}",
                "offset": "{{(i + 1) * 1000}}",
                "length": "1000",
                "dimensions": {"i": {"stop": 5}},
            }
        ],
        "refs": {
            "key0": "data",
            "key1": ["http://target_url", 10000, 100],
            "key2": ["http://{{u}}", 10000, 100],
            "key3": ["http://{{f(c='text')}}", 10000, 100],
            "key4": "base64:" + base64.b64encode(b"\x01\x02").decode(),
        },
    }
    refs = parse_references(doc, BASE)
    assert refs["key0"] == b"data"
    assert refs["key2"] == Ref("http://server.domain/path", 10000, 100)
    assert refs["key3"] == Ref("http://text", 10000, 100)
    assert refs["key4"] == b"\x01\x02"
    assert {k: v for k, v in refs.items() if k.startswith("gen_")} == {
        f"gen_key{i}": Ref(f"http://server.domain/path_{i}", (i + 1) * 1000, 1000) for i in range(5)
    }


def test_gen_cartesian_product_lists_steps_and_whole_urls():
    doc = {
        "version": 1,
        "gen": [
            {
                "key": "v/{{t}}.{{y}}",
                "url": "part{{t}}.bin",
                "dimensions": {"t": {"start": 2, "stop": 8, "step": 3}, "y": ["a", "b"]},
            }
        ],
    }
    refs = parse_references(doc, BASE)
    assert refs == {f"v/{t}.{y}": Ref(f"/data/refs/part{t}.bin") for t in (2, 5) for y in "ab"}


@pytest.mark.parametrize(
    "doc, reason",
    [
        pytest.param([1, 2], "a reference set is a JSON object", id="not-an-object"),
        pytest.param({"version": 2, "refs": {}}, "unknown reference version 2", id="version-2"),
        pytest.param({"version": "1", "refs": {}}, "unknown reference version '1'", id="version-string"),
        pytest.param({"version": 1, "refs": []}, "'refs' must be a JSON object", id="refs-list"),
        pytest.param({"version": 1, "templates": {"u": "{{ x"}, "refs": {"k": ["{{u(x=1)}}"]}}, "bad template", id="template-syntax"),
        pytest.param({"version": 1, "refs": {"k": ["http://{{nope}}/x"]}}, "'nope' is undefined", id="undefined-name"),
        pytest.param({"version": 1, "refs": {"k": ["{{ ''.__class__.__mro__ }}"]}}, "uses Getattr", id="sandbox"),
        pytest.param({"version": 1, "refs": {"k": ["x{{ 1 + }}"]}}, "bad template", id="expression-syntax"),
        pytest.param({"/abs": "x"}, "key '/abs': not a usable key", id="leading-slash"),
        pytest.param({"a/../b": "x"}, "key 'a/../b': not a usable key", id="dotdot-key"),
        pytest.param({"a": "x", "a/b": "y"}, "'a' is both an object and the directory of 'a/b'", id="object-and-dir"),
        pytest.param({"k": 5}, "key 'k': a value is", id="number-value"),
        pytest.param({"k": ["u", 1]}, "key 'k': a value is", id="two-element-list"),
        pytest.param({"k": [None, 0, 4]}, "target URL must be a non-empty string", id="null-url"),
        pytest.param({"k": ["u", -1, 4]}, "offset must be a whole number >= 0", id="negative-offset"),
        pytest.param({"k": ["u", 0, 1.5]}, "length must be a whole number >= 0", id="float-length"),
        pytest.param({"k": "base64:@@@"}, "bad base64", id="bad-base64"),
        pytest.param({"k": ["gs://bucket/x", 0, 4]}, "unsupported scheme 'gs'", id="gs-scheme"),
        pytest.param({"k": ["file://otherhost/x", 0, 4]}, "names a remote host", id="remote-file-url"),
        pytest.param({"version": 1, "gen": [{"key": "k", "url": "u"}]}, "'dimensions' is missing", id="gen-no-dims"),
        pytest.param({"version": 1, "gen": [{"key": "k{{i}}", "url": "u", "offset": "1", "dimensions": {"i": [1]}}]}, "'offset' and 'length' go together", id="gen-offset-alone"),
        pytest.param({"version": 1, "gen": [{"key": "k{{i}}", "url": "u", "dimensions": {"i": {"start": 1}}}]}, "dimension 'i' must be", id="gen-no-stop"),
        pytest.param({"version": 1, "gen": [{"key": "k{{i}}", "url": "u", "offset": "{{i-5}}", "length": "1", "dimensions": {"i": [1]}}]}, "offset must be a whole number >= 0", id="gen-negative-offset"),
        pytest.param({"version": 1, "gen": [{"key": "k{{i}}", "url": "u", "offset": "{{1/0}}", "length": "1", "dimensions": {"i": [1]}}]}, "ZeroDivisionError", id="gen-zero-division"),
        pytest.param({"version": 1, "gen": [{"key": "k\x1f{{i}}", "url": "u", "dimensions": {"i": [1]}}]}, "U+001F", id="gen-field-separator"),
    ],
)
def test_bad_reference_sets_are_refused_with_the_reason(doc, reason):
    with pytest.raises(SourceError) as info:
        parse_references(doc, BASE)
    assert reason in str(info.value)


def test_gen_size_is_bounded(monkeypatch):
    monkeypatch.setattr(refspec, "MAX_GENERATED_KEYS", 100)
    doc = {"version": 1, "gen": [{"key": "k{{i}}.{{j}}", "url": "u", "dimensions": {"i": {"stop": 10}, "j": {"stop": 11}}}]}
    with pytest.raises(SourceError, match="generates 110 keys; at most 100"):
        parse_references(doc, BASE)


def test_gen_is_bounded_at_500000_keys_refused_before_any_is_made():
    """2,000,000 keys were allowed: a mount of 53 s to minutes of CPU and 600 MB (issue 32);
    the bound is now 500,000 (about 5 s of CPU and 170 MB), checked before any key is made."""
    doc = {"version": 1, "gen": [{"key": "k{{i}}.{{j}}", "url": "u", "offset": "{{ i * 1000 + j }}", "length": "1",
                                  "dimensions": {"i": {"stop": 500}, "j": {"stop": 1001}}}]}
    with pytest.raises(SourceError, match="generates 500500 keys; at most 500000"):
        parse_references(doc, BASE)


def test_load_names_the_file_and_reason(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": ')
    with pytest.raises(SourceError, match=f"{bad}: not valid JSON"):
        load_references(str(bad))
    with pytest.raises(SourceError, match="cannot read the reference set"):
        load_references(str(tmp_path / "missing.json"))
    v3 = tmp_path / "v3.json"
    v3.write_text('{"version": 3}')
    with pytest.raises(SourceError, match=f"{v3}: unknown reference version 3"):
        load_references(str(v3))
