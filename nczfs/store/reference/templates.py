"""``{{ ... }}`` in reference sets: Jinja2's sandbox, cut down to what URLs and ``gen`` need.

A reference set is untrusted input, and Jinja2's sandbox stops attribute tricks but not
work: ``{{ 10 ** 10 ** 10 }}``, ``{{ 'x' * 10 ** 12 }}``, loops, ``lipsum``/``range`` or
templates calling each other to double a string forty times would hang or exhaust the
daemon at mount time. So a template may only hold text, names, constants, arithmetic,
comparisons, ``~``/``+`` concatenation, conditionals, indexing, a few harmless filters and
calls of the set's own templates (``{{f(c='text')}}``); no statements but ``if``, no
attributes, no globals. Numbers stay below :data:`MAX_INT_BITS` bits; every rendered
string (a template's result included), every sequence made by ``*`` or ``+`` and every value
passed to a template call below :data:`MAX_TEXT` characters (as text); ``%`` formats take no
width or precision over 1000, nor one given by ``*``. The work is bounded too, not only the
sizes: one rendering (with every template it calls) may take :data:`MAX_STEPS` template calls
and checked operations, and :data:`MAX_SECONDS` (a template calling itself twice per level
would otherwise run for ever at a constant size). Undefined names are errors.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any, Callable

import jinja2
import jinja2.nodes as nodes
import jinja2.sandbox

from nczfs.toolbox.errors import SourceError

MAX_TEXT = 64 * 1024
MAX_INT_BITS = 4096
#: template calls and checked operations (``*``, ``**``, ``%``, ``+``) one rendering may take
MAX_STEPS = 10_000
#: seconds one rendering may take
MAX_SECONDS = 2.0

ALLOWED_NODES = (
    nodes.Template, nodes.Output, nodes.TemplateData, nodes.If, nodes.Name, nodes.Const,
    nodes.Call, nodes.Keyword, nodes.BinExpr, nodes.UnaryExpr, nodes.Concat, nodes.CondExpr,
    nodes.Compare, nodes.Operand, nodes.Getitem, nodes.Slice, nodes.Tuple, nodes.List,
    nodes.Filter, nodes.Test,
)
ALLOWED_FILTERS = frozenset(
    {"int", "float", "string", "lower", "upper", "trim", "abs", "round", "default", "d", "length", "first", "last"}
)
#: the width and precision of a ``%`` conversion (``*``: taken from the arguments)
_FORMAT_NUMBER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d*)(?:\.(\*|\d*))?")


class _Work(threading.local):
    """The steps left to the rendering under way in this thread, and its deadline."""

    steps: int | None = None
    deadline: float = 0.0


_WORK = _Work()


def _step() -> None:
    """Count one step of the rendering under way; SecurityError once its work is used up."""
    if _WORK.steps is None:
        return
    _WORK.steps -= 1
    if _WORK.steps < 0:
        raise jinja2.sandbox.SecurityError(f"too much work: more than {MAX_STEPS} template calls and operations")
    if time.monotonic() > _WORK.deadline:
        raise jinja2.sandbox.SecurityError(f"too much work: more than {MAX_SECONDS:g} s")


def _text_size(v: Any) -> int:
    """About how many characters ``v`` makes as text (lists and tuples counted element by element)."""
    if isinstance(v, str):
        return len(v)
    if isinstance(v, (list, tuple)):
        total = 2
        for item in v:
            total += _text_size(item) + 2
            if total > MAX_TEXT:  # no need to count further
                break
        return total
    if _is_int(v):
        return v.bit_length() // 3 + 2
    return 8


def _check_join(left: Any, right: Any) -> None:
    if isinstance(left, (str, list, tuple)) and _text_size(left) + _text_size(right) > MAX_TEXT:
        raise jinja2.sandbox.SecurityError("joining these sequences makes too much")


def _check_power(left: Any, right: Any) -> None:
    if _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1 and abs(left).bit_length() * right > MAX_INT_BITS:
        raise jinja2.sandbox.SecurityError(f"{left} ** {right} is too large")


def _check_product(left: Any, right: Any) -> None:
    if _is_int(left) and _is_int(right) and left.bit_length() + right.bit_length() > MAX_INT_BITS:
        raise jinja2.sandbox.SecurityError("product too large")
    for seq, n in ((left, right), (right, left)):
        if isinstance(seq, (str, list, tuple)) and _is_int(n) and _text_size(seq) * n > MAX_TEXT:
            raise jinja2.sandbox.SecurityError(f"repeating a sequence {n} times is too much")


def _check_format(left: Any, right: Any) -> None:
    if not isinstance(left, str):
        return
    for width, precision in _FORMAT_NUMBER.findall(left):
        if "*" in (width, precision):
            raise jinja2.sandbox.SecurityError("format width or precision given by '*'")
        if int(width or 0) > 1000 or int(precision or 0) > 1000:
            raise jinja2.sandbox.SecurityError("format width too large")


#: what each operator the sandbox intercepts must not make too large
_BINOP_CHECKS = {"+": _check_join, "**": _check_power, "*": _check_product, "%": _check_format}


class _Sandbox(jinja2.sandbox.SandboxedEnvironment):
    intercepted_binops = frozenset(_BINOP_CHECKS)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _step()
        if left.__class__ is int and right.__class__ is int and operator != "**":  # gen's offsets: the common case
            if operator == "*" and left.bit_length() + right.bit_length() > MAX_INT_BITS:
                raise jinja2.sandbox.SecurityError("product too large")
            return self.binop_table[operator](left, right)
        _BINOP_CHECKS[operator](left, right)
        return super().call_binop(context, operator, left, right)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_ENV = _Sandbox(undefined=jinja2.StrictUndefined, autoescape=False)
_ENV.globals.clear()  # no range, lipsum, cycler, joiner, namespace, dict


def _check(where: str, text: str, tree: nodes.Node) -> None:
    for node in tree.find_all(nodes.Node):
        if not isinstance(node, ALLOWED_NODES):
            raise SourceError(f"{where}: template {text!r} uses {type(node).__name__}, which reference templates may not")
        if isinstance(node, nodes.Call) and (
            not isinstance(node.node, nodes.Name) or node.dyn_args is not None or node.dyn_kwargs is not None
        ):
            raise SourceError(f"{where}: template {text!r} may only call templates by name")
        if isinstance(node, nodes.Filter) and node.name not in ALLOWED_FILTERS:
            raise SourceError(f"{where}: template {text!r} uses the filter {node.name!r}, which reference templates may not")


def compile_template(where: str, text: str) -> jinja2.Template:
    try:
        _check(where, text, _ENV.parse(text))
        return _ENV.from_string(text)
    except jinja2.TemplateError as exc:
        raise SourceError(f"{where}: bad template {text!r} ({exc})") from None


def render(where: str, template: jinja2.Template, names: dict[str, Any]) -> str:
    """``template`` rendered with ``names``: the whole work of a rendering, with the template
    calls it makes, bounded (MAX_STEPS, MAX_SECONDS); SourceError naming ``where`` if it fails."""
    return _render(where, template, template.new_context(names))


def renderer_over(where: str, template: jinja2.Template, names: dict[str, Any]) -> Callable[[], str]:
    """A function rendering ``template`` with what ``names`` holds when it is called: one jinja2
    context for every rendering (``gen`` renders a template once per combination of values, and
    making a context each time was a fifth of that work)."""
    context = template.new_context(names, shared=True)
    return lambda: _render(where, template, context)


def plain_names(text: str) -> list[str | tuple[str]] | None:
    """``text`` as its pieces if it is only text and ``{{ name }}`` substitutions: strings as
    they are, a name as ``(name,)``; None for anything else (which jinja2 renders)."""
    try:
        tree = _ENV.parse(text)
    except jinja2.TemplateError:
        return None
    pieces: list[str | tuple[str]] = []
    for output in tree.body:
        if not isinstance(output, nodes.Output):
            return None
        for node in output.nodes:
            if isinstance(node, nodes.TemplateData):
                pieces.append(node.data)
            elif isinstance(node, nodes.Name) and node.ctx == "load":
                pieces.append((node.name,))
            else:
                return None
    return pieces


def _render(where: str, template: jinja2.Template, context: Any) -> str:
    outermost = _WORK.steps is None
    if outermost:
        _WORK.steps, _WORK.deadline = MAX_STEPS, time.monotonic() + MAX_SECONDS
    try:
        out = "".join(template.root_render_func(context))
    except jinja2.TemplateError as exc:  # undefined names, sandbox violations
        raise SourceError(f"{where}: template failed ({exc})") from None
    except (ArithmeticError, TypeError, ValueError, RecursionError, MemoryError) as exc:
        raise SourceError(f"{where}: template failed ({type(exc).__name__}: {exc})") from None
    finally:
        if outermost:
            _WORK.steps = None
    if len(out) > MAX_TEXT:
        raise SourceError(f"{where}: template renders {len(out)} characters; at most {MAX_TEXT}")
    return out


def has_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def load_templates(raw: Any) -> dict[str, Any]:
    """A version 1 ``templates`` object: plain strings, and callables for those holding ``{{``."""
    if not isinstance(raw, dict):
        raise SourceError("'templates' must be a JSON object")
    out: dict[str, Any] = {}
    for name, text in raw.items():
        if not isinstance(text, str):
            raise SourceError(f"template {name!r}: must be a string")
        if has_template(text):
            out[name] = _macro(f"template {name!r}", compile_template(f"template {name!r}", text))
        else:
            out[name] = text
    return out


def _macro(where: str, template: jinja2.Template) -> Callable[..., str]:
    def call(**kwargs: Any) -> str:
        _step()
        for name, value in kwargs.items():
            if _text_size(value) > MAX_TEXT:
                raise jinja2.sandbox.SecurityError(f"{where}: argument {name!r} is longer than {MAX_TEXT} characters")
        try:
            return render(where, template, kwargs)
        except SourceError as exc:  # raised inside an outer render: keep the reason
            raise jinja2.sandbox.SecurityError(str(exc)) from None

    return call


class Renderer:
    """Render ``{{ }}`` with the reference set's templates (each text compiled once)."""

    def __init__(self, templates: dict[str, Any]):
        self.templates = templates
        self._cache: dict[str, jinja2.Template] = {}

    def compiled(self, where: str, text: str) -> jinja2.Template:
        template = self._cache.get(text)
        if template is None:
            template = self._cache[text] = compile_template(where, text)
        return template

    def __call__(self, where: str, text: str, extra: dict[str, Any] | None = None) -> str:
        return render(where, self.compiled(where, text), {**self.templates, **(extra or {})})
