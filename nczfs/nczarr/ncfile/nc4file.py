"""The netCDF-4 file of a dataset (``NAME.nc4``): one HDF5 file for the whole hierarchy, made by
:mod:`nczfs.nczarr.ncfile.hdf5.writer` from the dataset model and the sizes of its chunks.

netCDF-4's conventions as netCDF-C writes them: each group an HDF5 group; each dimension a
dimension scale (``CLASS``, ``NAME``, ``REFERENCE_LIST``, ``_Netcdf4Dimid``), the coordinate
variable where the group has one (a variable of the dimension's name on that one axis), else a
dataset of no data whose ``NAME`` says it is a netCDF dimension but not a netCDF variable; each
variable's ``DIMENSION_LIST`` naming its dimensions' scales (a variable named as a dimension it is
not the coordinate variable of is stored as ``_nc4_non_coord_NAME``, as netCDF-C does); an
unlimited dimension an unlimited axis; attributes in their netCDF types, the mask rule
(:func:`nczfs.nczarr.metadata.masks.cf_attributes`) giving ``_FillValue``; the array's fill value as
HDF5's (what a missing chunk reads as).

Each variable is chunked as in the store, its chunks the store's own bytes where its codec chain
has an HDF5 filter pipeline (:func:`nczfs.nczarr.ncfile.nc4types.pipeline`); other chains decodable here
are decoded by the reader of the file and deflated (nczarr/chunks/deflater.py, HDF5's deflate filter;
``-o transcode=none``: unfiltered, ``off``: left out), a filtered scalar's unfiltered (HDF5
filters chunks only); a missing chunk is absent from the chunk index. A deflated chunk's size is
known once it is made: a file made without the size of each is not whole and names them
(``unsized``), for its maker to make them and the file again. Variable-length strings, numpy
unicode and NCZarr's fixed-width strings are NC_STRING, HDF5 variable-length UTF-8 strings
(:mod:`nczfs.nczarr.ncfile.nc4source`: each chunk followed by the global heap collections of its
strings, its size known once made, as a deflated chunk's), unfiltered as netCDF-C requires;
pure Zarr's fixed-width bytes are chars along one more dimension ``string<n>`` as in the classic
files (:func:`nczfs.nczarr.ncfile.nc4types.text_form`). A sharded array's chunks are its innermost
ones, each a byte range of its shard (:mod:`nczfs.nczarr.ncfile.nc4shards` finds them). Left out, with
the reason: chains not decodable here, types with no netCDF-4 form here (complex, ``float16``),
sharded arrays whose shards were not read. Pure computation.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import struct
from dataclasses import dataclass, field
from typing import Callable

from nczfs.nczarr.chunks.recode import Codecs, Recode
from nczfs.nczarr.chunks.sharding import Located
from nczfs.nczarr.chunks.v2form import V2Array, v3_chunk_prefix, v3_to_v2
from nczfs.nczarr.metadata.masks import cf_attributes, strings_as_written
from nczfs.nczarr.metadata.model import Dataset, Dimension, Group, Variable
from nczfs.nczarr.ncfile import nc4types
from nczfs.nczarr.ncfile.hdf5 import messages as m, types as t, writer as w
from nczfs.nczarr.ncfile.nc4source import Source, chunk_indexes, vlen_fill, with_fill
from nczfs.nczarr.ncfile.ncattrs import implied_attrs

NOT_A_VARIABLE = "This is a netCDF dimension but not a netCDF variable."
NON_COORD = "_nc4_non_coord_"
_REF_LIST = t.compound([("dataset", 0, t.reference()), ("dimension", 8, t.integer(4, True))], 16)


@dataclass
class Nc4File:
    layout: w.Layout
    #: what the file leaves out: ``/g/v: reason`` or ``/g/v:attr: reason``
    left_out: list[str] = field(default_factory=list)
    #: the variables whose chunks are decoded (their chains have no HDF5 filter pipeline)
    decoded: list[str] = field(default_factory=list)
    #: the decoded chunks whose sizes in the file were not known (the file is not whole: make
    #: them, then the file again)
    unsized: list[Source] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.layout.size

    @functools.cached_property
    def offsets(self) -> list[int]:
        """Where each chunk begins (``layout.pieces``' offsets)."""
        return [p.offset for p in self.layout.pieces]


def _join(gpath: str, name: str) -> str:
    return f"{gpath.rstrip('/')}/{name}"


def _fixed(name: str, text: str) -> w.Attr:
    raw = text.encode()
    return w.Attr(name, t.fixed_string(len(raw) + 1), (), raw + b"\0")


@dataclass
class _Scale:
    """A dimension's scale: its dataset's path, id, the (variable path, axis) attached to it."""

    path: str
    dimid: int
    users: list[tuple[str, int]] = field(default_factory=list)


#: the codecs of chunks re-encoded for the file (HDF5's deflate filter reads their bytes)
DEFLATE = Codecs({"id": "zlib", "level": 1})


@dataclass(frozen=True)
class Options:
    #: blosc and zstd chunks passed through as HDF5's registered filters, not re-encoded
    plugins: bool = False
    #: ``-o transcode=``: chunks not passed through are deflated (``auto``, ``zlib``), stored
    #: unfiltered (``none``), or their variables left out (``off``)
    transcode: str = "auto"
    #: the size in the file of a decoded chunk, if known (None: not yet made; a str: why it
    #: cannot be made, its variable left out)
    sized: Callable[[Source], int | str | None] = lambda src: None


class _Builder:
    def __init__(self, ds: Dataset, prefix: str, encodings: dict[str, str], sizes: dict[str, int],
                 inner: dict[str, dict[str, Located]], options: Options):
        self.ds, self.prefix, self.encodings, self.sizes = ds, prefix, encodings, sizes
        self.inner, self.options = inner, options
        #: string variables shown as NC_STRING (HDF5 variable-length strings), by path
        self.vlen: set[str] = set()
        self.unsized: list[Source] = []
        #: why a chunk of the variable being made cannot be made
        self.broken: str | None = None
        #: string variables shown as chars (by path): (the dtype they decode to, numpy unicode
        #: dtype or "", width, the FQN of their chars' dimension, whether the chars are UTF-8)
        self.texts: dict[str, tuple[str, str, int, str, bool]] = {}
        #: each group's dimensions, with those of its string variables' chars
        self.dims: dict[str, list[Dimension]] = {}
        self.left_out: list[str] = []
        self.decoded: list[str] = []
        #: dimension FQN -> its scale
        self.scales: dict[str, _Scale] = {}
        #: the datasets that are scales: (dataset, dimension FQN, its NAME)
        self.pending: list[tuple[w.Dataset, str, str]] = []

    def leave_out(self, what: str, why: str) -> None:
        self.left_out.append(f"{what}: {why}")

    def build(self) -> Nc4File:
        root = self.group(self.ds.root)
        root.attrs.insert(0, nc4types.provenance())
        for ds, fqn, name in self.pending:  # once every variable using a scale is known
            ds.attrs = self.scale_attrs(fqn, name) + ds.attrs
        lay = w.layout(root)
        return Nc4File(lay, self.left_out + lay.dropped, self.decoded, self.unsized)

    def coordinate(self, g: Group, d: Dimension) -> Variable | None:
        v = next((v for v in g.variables if v.name == d.name), None)
        ok = v is not None and not v.scalar and len(v.shape) == 1 and \
            [r if r.startswith("/") else "/" + r for r in v.dimrefs] == [_join(g.path, d.name)]
        return v if ok else None

    def string_dims(self, g: Group) -> list[Dimension]:
        """The chars' dimensions (``string<n>``) of the group's string variables shown as chars,
        whose forms are noted in ``texts``; those shown as NC_STRING noted in ``vlen``."""
        extra: dict[int, Dimension] = {}
        for v in g.variables:
            what = _join(g.path, v.name)
            form = self.v2(v, what)
            if not isinstance(form, str) and nc4types.is_nc_string(form.dtype, v.nctype, self.ds.flavor):
                self.vlen.add(what)
                continue
            got = nc4types.text_form(form.dtype) if not isinstance(form, str) else None
            if got is None or v.scalar or not v.shape:
                continue
            if got[2] not in extra:
                name = f"string{got[2]}"
                while g.dim(name) is not None or any(x.name == name for x in g.variables):
                    name += "_"
                extra[got[2]] = Dimension(name, got[2])
            self.texts[what] = (*got, _join(g.path, extra[got[2]].name), bool(got[1]))
        return list(extra.values())

    def group(self, g: Group) -> w.Group:
        out = w.Group(g.name if g.path != "/" else "", self.attrs(g.path, g.attributes))
        self.dims[g.path] = [*g.dims, *self.string_dims(g)]
        for d in self.dims[g.path]:
            self.scales[_join(g.path, d.name)] = _Scale(_join(g.path, d.name), len(self.scales))
        coords = set()
        for d in self.dims[g.path]:  # each dimension's scale: its coordinate variable, else a dataset of its own
            v = self.coordinate(g, d)
            got = self.variable(g, v, True) if v is not None else None
            if v is not None:
                coords.add(v.name)  # shown as the scale, or left out (with the reason)
            if got is None:
                got = self.dim_only(g, d)
            out.datasets.append(got)
            self.pending.append((got, _join(g.path, d.name), d.name if v is not None and got.name == v.name
                                 else f"{NOT_A_VARIABLE}{d.size:10d}"))
        out.datasets += [got for v in g.variables if v.name not in coords
                         and (got := self.variable(g, v, False)) is not None]
        out.groups = [self.group(c) for c in g.groups]
        return out

    def attrs(self, owner: str, attrs) -> list[w.Attr]:
        out = []
        for a in attrs:
            got = nc4types.file_attr(strings_as_written(a))
            if isinstance(got, str):
                self.leave_out(f"{owner}:{a.name}", got)
            else:
                out.append(got)
        return out

    def scale_attrs(self, fqn: str, name: str) -> list[w.Attr]:
        """What makes a dataset the scale of dimension ``fqn`` (named ``name`` to readers)."""
        scale = self.scales[fqn]

        def refs(ctx: w.Context) -> bytes:
            return b"".join(struct.pack("<QI4x", ctx.ref(p), axis) for p, axis in scale.users)

        out = [_fixed("CLASS", "DIMENSION_SCALE"), _fixed("NAME", name),
               w.Attr("_Netcdf4Dimid", t.integer(4, True), (), struct.pack("<i", scale.dimid))]
        if scale.users:
            out.insert(2, w.Attr("REFERENCE_LIST", _REF_LIST, (len(scale.users),), refs))
        return out

    def dim_only(self, g: Group, d: Dimension) -> w.Dataset:
        """The dataset of a dimension without a coordinate variable (no data)."""
        maxshape = (t.UNLIMITED,) if d.unlimited else None
        return w.Dataset(d.name, t.floating(4), (d.size,), maxshape, (max(1, min(d.size, 1024)),))

    def v2(self, v: Variable, what: str = "") -> V2Array | str:
        if self.ds.flavor == "zarr-v3":
            got = v3_to_v2(v)
            if isinstance(got, V2Array) and got.sharding is not None and what.strip("/") not in self.inner:
                return "sharded, its shards' indexes not read"
            return got
        return V2Array(v.dtype, v.order, v.compressor, v.filters or None, v.dimension_separator, list(v.chunks))

    def variable(self, g: Group, v: Variable, is_coord: bool) -> w.Dataset | None:
        what = _join(g.path, v.name)
        form, text = self.v2(v, what), self.texts.get(what)
        if what in self.vlen:
            dtype: t.Datatype | str = t.vlen_string()
        elif text is not None:
            dtype = t.fixed_string(1, nullterm=False)
        else:
            dtype = nc4types.file_type(form.dtype) if not isinstance(form, str) else form
        dims = self.dims_of(v)
        filters = (self.filters(what, form, dtype, dims == [], text) if not isinstance(form, str) else form) \
            if not isinstance(dtype, str) else dtype
        if isinstance(form, str) or isinstance(dtype, str) or isinstance(filters, str) or isinstance(dims, str):
            self.leave_out(what, next(x for x in (form, dtype, filters, dims) if isinstance(x, str)))
            return None
        fqns = [r if r.startswith("/") else "/" + r for r in v.dimrefs] if dims else []
        if text is not None:
            fqns.append(text[3])
            dims.append(Dimension(text[3].rpartition("/")[2], text[2]))
        name = v.name if is_coord or not any(d.name == v.name for d in self.dims[g.path]) else NON_COORD + v.name
        self.broken = None
        ds = self.dataset(what, name, v, form, dtype, filters, dims)
        if self.broken is not None:
            self.leave_out(what, self.broken)
            return None
        ds.attrs = self.var_attrs(what, v, is_coord, fqns, _join(g.path, name), text is not None) + ds.attrs
        return ds

    def filters(self, what: str, form: V2Array, dtype: t.Datatype, scalar: bool, text) -> tuple[list, Recode | None] | str:
        """The HDF5 filters of the chunks and how they are made from the stored ones (None: as
        stored), or why they cannot be: passed through where the chain is an HDF5 pipeline, else
        decoded (strings: to chars or variable-length strings; a scalar's: unfiltered, as HDF5
        filters chunks only) and deflated as ``-o transcode=`` says."""
        opts = self.options
        plugins = math.prod(form.chunks) * dtype.size if opts.plugins else 0
        got = nc4types.pipeline(form, dtype.size, plugins)
        vlen = what in self.vlen
        if not isinstance(got, str) and not (scalar and got) and text is None and not vlen:
            return got, None
        codecs = Codecs(form.compressor, tuple(form.filters or ()))
        why = codecs.check()
        if why is not None:
            return why
        if opts.transcode == "off" and codecs and not vlen:
            return f"codecs {codecs.ids()} are no HDF5 filter's bytes (-o transcode=off)"
        chunks = tuple(form.chunks)
        self.decoded.append(what)
        if text is not None:
            return [], Recode(form.dtype, chunks, form.order, codecs, text[0], chunks)
        deflate = not (scalar or vlen or opts.transcode == "none")
        return [(m.DEFLATE, [1])] if deflate else [], Recode(form.dtype, chunks, form.order, codecs, form.dtype,
                                                             chunks, DEFLATE if deflate else Codecs())

    def dims_of(self, v: Variable) -> list[Dimension] | str:
        if v.scalar or not v.shape:
            return []
        if len(v.shape) > 31:
            return f"{len(v.shape)} axes: more than HDF5 holds (32, one for the element)"
        dims = [self.ds.find_dim(r if r.startswith("/") else "/" + r) for r in v.dimrefs]
        if None in dims or len(dims) != len(v.shape):
            return "its dimensions are not all declared"
        return dims  # type: ignore[return-value]  # None not in dims (checked above)

    def dataset(self, what: str, name: str, v: Variable, form: V2Array, dtype: t.Datatype,
                filters: tuple[list, Recode | None], dims: list[Dimension]) -> w.Dataset:
        text = self.texts.get(what)
        pipeline, recode = filters
        fill = vlen_fill(v.fill_value) if what in self.vlen else \
            nc4types.fill_bytes(form.dtype, v.fill_value) if text is None else None
        keys = self.chunk_keys(what, v, form)
        if not dims:
            key = keys(())
            stored = [w.Chunk((), dtype.size, Source(key))] if self.sizes.get(key) else []
            stored = with_fill(stored, (), (), v.fill_value) if what in self.vlen else stored
            return w.Dataset(name, dtype, (), fill=fill, stored=self.made(stored, recode, what, dtype.size))
        shape, chunks = tuple(v.shape), tuple(form.chunks or v.chunks)
        stored = self.stored(shape, chunks, keys, None) if form.sharding is None else self.inner_stored(what, None)
        if what in self.vlen:
            stored = with_fill(stored, shape, chunks, v.fill_value)
        if isinstance(text, tuple):  # the chars of each string along one more axis
            shape, chunks = (*shape, text[2]), (*chunks, text[2])
            stored = [dataclasses.replace(c, index=(*c.index, 0), source=dataclasses.replace(
                c.source, text=text[1], width=text[2])) for c in stored]
        maxshape = tuple(t.UNLIMITED if d.unlimited else s for d, s in zip(dims, shape))
        return w.Dataset(name, dtype, shape, maxshape if maxshape != shape else None, chunks, pipeline, fill,
                         [], self.made(stored, recode, what, math.prod(chunks) * dtype.size))

    def made(self, stored: list[w.Chunk], recode: Recode | None, what: str, plain: int) -> list[w.Chunk]:
        """The chunks ``recode`` makes from the stored ones (None: as stored), each of its size in
        the file: ``plain`` bytes if unfiltered, else as made (a string chunk: ``plain`` bytes of
        references, then its heap collections); those not yet made noted in ``unsized``, why one
        cannot be made in ``broken``."""
        if recode is None:
            return stored
        vlen, out = what in self.vlen, []
        for c in stored:
            src = dataclasses.replace(c.source, recode=recode, vlen=vlen)
            size = len(src.decode(b"")) if src.fill is not None else \
                self.options.sized(src) if src.size_needs_making else plain
            if isinstance(size, str):
                self.broken = size
                size = plain
            elif size is None:
                self.unsized.append(src)
                size = plain
            out.append(w.Chunk(c.index, plain if vlen else size, src, extra=size - plain if vlen else 0))
        return out

    def chunk_keys(self, what: str, v: Variable, form: V2Array):
        array = "/".join(p for p in (self.prefix, what.strip("/")) if p)
        sep, cprefix = form.separator, ""
        if self.ds.flavor == "zarr-v3":
            cprefix = v3_chunk_prefix(v, self.encodings.get(what, "default"))

        def key(idx: tuple[int, ...]) -> str:
            name = cprefix + sep.join(map(str, idx)) if idx else (cprefix.rstrip("/.") or "0")
            return f"{array}/{name}" if array else name
        return key

    def stored(self, shape: tuple[int, ...], chunks: tuple[int, ...], key, decoded: int | None) -> list[w.Chunk]:
        """The chunks the store holds (their keys as sources), ``decoded`` bytes each if given."""
        grid = [math.ceil(s / c) if c else 0 for s, c in zip(shape, chunks)]
        out = []
        for idx in chunk_indexes(grid):
            k = key(idx)
            size = self.sizes.get(k)
            if size:
                out.append(w.Chunk(idx, decoded or size, Source(k)))
        return out

    def inner_stored(self, what: str, decoded: int | None) -> list[w.Chunk]:
        """A sharded array's innermost chunks, each a byte range of its shard."""
        out = []
        for name, loc in self.inner[what.strip("/")].items():
            idx = tuple(int(i) for i in name.split("."))
            out.append(w.Chunk(idx, decoded or loc.size, Source(loc.key, start=loc.start, length=loc.size)))
        return out

    def var_attrs(self, what: str, v: Variable, is_coord: bool, fqns: list[str], path: str,
                  text: bool) -> list[w.Attr]:
        attrs = self.attrs(what, [a for a in cf_attributes(v, self.ds.flavor) if a.name != "_FillValue"])
        fill = next((a for a in cf_attributes(v, self.ds.flavor) if a.name == "_FillValue"), None)
        if fill is not None:
            attrs += self.attrs(what, [fill])
        utf8 = text and self.texts[what][4]
        attrs += [nc4types.from_classic(a) for a in implied_attrs(v, attrs, bool(utf8))]
        for axis, fqn in enumerate(fqns if not is_coord else []):
            self.scales[fqn].users.append((path, axis))
        if is_coord or not fqns:
            return attrs
        vlist = t.vlen_sequence(t.reference())

        def dimlist(ctx: w.Context) -> bytes:
            return b"".join(ctx.heap.add(struct.pack("<Q", ctx.ref(self.scales[f].path)), 1) for f in fqns)
        return [w.Attr("DIMENSION_LIST", vlist, (len(fqns),), dimlist), *attrs]


def nc4_file(ds: Dataset, prefix: str = "", encodings: dict[str, str] | None = None,
             sizes: dict[str, int] | None = None, inner: dict[str, dict[str, Located]] | None = None,
             options: Options = Options()) -> Nc4File:
    """The netCDF-4 file of ``ds`` stored under ``prefix``; ``sizes``: the bytes of every chunk
    that exists, by store key; ``encodings``: Zarr v3 arrays' ``chunk_key_encoding`` names by path;
    ``inner``: where sharded arrays' innermost chunks lie (:mod:`nczfs.nczarr.ncfile.nc4shards`);
    ``options``: how chunks not passed through are made, the sizes of those made (a file made
    without a size of each is not whole: its ``unsized`` name them)."""
    return _Builder(ds, prefix, encodings or {}, sizes or {}, inner or {}, options).build()
