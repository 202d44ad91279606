"""Store backends ("zmap"): the interface (:mod:`.base`, :mod:`.values`, :mod:`.keys`,
:mod:`.capabilities`), the scheme registry that opens the one a SOURCE names (:mod:`.registry`),
the backends, and the wrapper base (:mod:`.wrapper`).

The backends nczfs ships register themselves here, each from its own package's ``backend``
module (its registry entry: small, no client library), in the order a SOURCE tries them (S3
claims an https URL before Azure, Azure before a web server; a path no other claims is a
directory)."""

from nczfs.store.directory import backend as _directory  # noqa: F401 - registered on import
from nczfs.store.memory import backend as _memory  # noqa: F401
from nczfs.store.zip import backend as _zip  # noqa: F401
from nczfs.store.reference import backend as _reference  # noqa: F401
from nczfs.store.objstore import backend as _objstore  # noqa: F401
from nczfs.store.icechunk import backend as _icechunk  # noqa: F401
