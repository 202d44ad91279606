"""Template expressions in reference sets: what URLs and gen need works; work bombs are refused."""

from __future__ import annotations

import pytest

from nczfs.errors import SourceError
from nczfs.store.refspec import Ref, parse_references


def url_of(expr: str, templates: dict | None = None, **dims) -> str:
    doc = {"version": 1, "templates": templates or {}, "refs": {}}
    if dims:
        doc["gen"] = [{"key": "k", "url": expr, "dimensions": {n: [v] for n, v in dims.items()}}]
    else:
        doc["refs"]["k"] = [expr]
    ref = parse_references(doc, "/base")["k"]
    assert isinstance(ref, Ref)
    return ref.url


@pytest.mark.parametrize(
    "expr, dims, want",
    [
        ("http://h/{{(i + 1) * 1000}}", {"i": 2}, "http://h/3000"),
        ("http://h/{{ '%03d' % i }}.nc", {"i": 7}, "http://h/007.nc"),
        ("http://h/{{ i|string|upper }}{{ 'a' if i > 1 else 'b' }}", {"i": 2}, "http://h/2a"),
        ("http://h/{{ u ~ '_' ~ (i // 2) }}", {"i": 5}, "http://h/server_2"),
        ("http://h/{{ f(c='text') }}/{{ u[0:3] }}", {}, "http://h/text.nc/ser"),
        ("http://h/{{ 2 ** 64 }}", {}, "http://h/18446744073709551616"),
        ("http://h/{% if u == 'server' %}yes{% endif %}", {}, "http://h/yes"),
    ],
)
def test_expressions_urls_need(expr, dims, want):
    assert url_of(expr, {"u": "server", "f": "{{c}}.nc"}, **dims) == want


DOUBLE = "{{ c }}{{ c }}"


@pytest.mark.parametrize(
    "expr, templates, reason",
    [
        ("{{ 10 ** 100000 }}", {}, "is too large"),
        ("{{ (2 ** 2000) * (2 ** 2000) * (2 ** 2000) }}", {}, "product too large"),
        ("{{ 'x' * 10 ** 9 }}", {}, "too much"),
        ("{{ ['x'] * 10 ** 9 }}", {}, "too much"),
        ("{{ '%0999999999d' % 1 }}", {}, "format width too large"),
        ("{% for i in range(10) %}x{% endfor %}", {}, "uses For"),
        ("{% set x = 1 %}{{ x }}", {}, "uses Assign"),
        ("{{ 'x'|center(1000000000) }}", {}, "filter 'center'"),
        ("{{ 'x'.ljust(1000000000) }}", {}, "may only call templates by name"),
        ("{{ u.__class__ }}", {"u": "x"}, "uses Getattr"),
        ("{{ range(10)|length }}", {}, "'range' is undefined"),
        ("{{ lipsum(n=100000) }}", {}, "'lipsum' is undefined"),
        ("{{ f(*['a']) }}", {"f": DOUBLE}, "may only call templates by name"),
        ("{{" + "f(c=" * 40 + "'xxxxxxxx'" + ")" * 40 + "}}", {"f": DOUBLE}, "at most 65536"),
    ],
    ids=["big-power", "big-product", "str-repeat", "list-repeat", "format-width", "for", "set", "center",
         "method", "attribute", "range", "lipsum", "star-args", "doubling-templates"],
)
def test_work_bombs_are_refused_with_a_reason(expr, templates, reason):
    with pytest.raises(SourceError) as info:
        url_of(expr, templates)
    assert reason in str(info.value)
