"""The views of -o present=: their shape, objects, recoding, writes, PresentingStore."""
