"""Template expressions in reference sets: what URLs and gen need works; work bombs are refused."""

from __future__ import annotations

import pytest

from nczfs.toolbox.errors import SourceError
from nczfs.store.reference.spec import Ref, parse_references


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
        ("{{ '%.*f' % (500000000, 1.0) }}", {}, "given by '*'"),
        ("{{ '%*d' % (500000000, 1) }}", {}, "given by '*'"),
        ("{{ '%(a)0999999999d' % 1 }}", {}, "format width too large"),
        ("{{ ([('x' * 65536)] * 65536)|string }}", {}, "too much"),
        ("{{ g(g=g, s='x', n=40) }}", {"g": "{{ g(g=g, s=s ~ s, n=n-1) if n > 0 else s|length }}"}, "is longer than"),
        ("{{ g(g=g, s=['x'], n=40) }}", {"g": "{{ g(g=g, s=s + s, n=n-1) if n > 0 else s|length }}"}, "makes too much"),
    ],
    ids=["big-power", "big-product", "str-repeat", "list-repeat", "format-width", "for", "set", "center",
         "method", "attribute", "range", "lipsum", "star-args", "doubling-templates", "star-precision",
         "star-width", "named-width", "list-of-long-strings", "doubling-argument", "doubling-list"],
)
def test_work_bombs_are_refused_with_a_reason(expr, templates, reason):
    with pytest.raises(SourceError) as info:
        url_of(expr, templates)
    assert reason in str(info.value)


@pytest.mark.timeout(60)
def test_a_template_calling_itself_twice_per_level_is_stopped_by_its_work_not_its_size():
    """Each level's result is a short string, so no size limit stops it: 2**40 calls. The mount
    used to hang at 100% CPU for ever; now the rendering's steps run out."""
    import time

    templates = {"d": "{{ (f(f=f, n=n-1) ~ f(f=f, n=n-1))|length if n > 0 else 'x' }}"}
    doc = {"version": 1, "templates": templates, "refs": {"k": ["{{ d(f=d, n=40) }}", 0, 4]}}
    t0 = time.monotonic()
    with pytest.raises(SourceError, match="too much work"):
        parse_references(doc, "/base")
    assert time.monotonic() - t0 < 10
    # the same template at a depth whose work fits renders
    doc["refs"]["k"] = ["http://h/{{ d(f=d, n=5) }}", 0, 4]
    assert parse_references(doc, "/base")["k"].url == "http://h/2"


@pytest.mark.timeout(60)
def test_every_rendering_of_gen_gets_its_own_budget():
    """The bound is per rendering: many keys, each a few calls, all render."""
    doc = {"version": 1, "templates": {"f": "{{ c }}.nc"}, "refs": {},
           "gen": [{"key": "k{{i}}", "url": "http://h/{{ f(c=f(c=f(c=i))) }}", "offset": "0", "length": "4",
                    "dimensions": {"i": {"stop": 5000}}}]}
    refs = parse_references(doc, "/base")
    assert len(refs) == 5000 and refs["k4999"].url == "http://h/4999.nc.nc.nc"
