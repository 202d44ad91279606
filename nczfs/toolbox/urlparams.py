"""netCDF-C's URL parameters: the ``#k=v&k2&...`` fragment and the old ``[k=v]url`` prefix.

Keys are matched case-insensitively and the first occurrence wins (NCZARR_FORMATS.md section 6).
Shared by :mod:`nczfs.config.source` (which reads the ``mode`` words) and the URL parsers that must
see past the prefix (:mod:`nczfs.store.objstore.s3url`).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from nczfs.toolbox.errors import SourceError


def parse_fragment(fragment: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for part in fragment.split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        key = unquote(key).strip().lower()
        if key and key not in params:
            params[key] = unquote(value)
    return params


def split_bracket_prefix(text: str) -> tuple[str, dict[str, str]]:
    """``[k=v][k2]url`` -> (``url``, its parameters)."""
    params: dict[str, str] = {}
    while text.startswith("["):
        m = re.match(r"\[([^\]]*)\]", text)
        if not m:
            raise SourceError(f"{text}: unclosed '[' in URL prefix")
        for k, v in parse_fragment(m.group(1)).items():
            params.setdefault(k, v)
        text = text[m.end() :]
    return text, params
