"""Store backends ("zmap"): the interface (:mod:`.base`, :mod:`.values`, :mod:`.keys`,
:mod:`.capabilities`), the scheme registry that opens the one a SOURCE names (:mod:`.registry`),
the backends, and the wrapper base (:mod:`.wrapper`)."""
