"""The NCZarr layer: the wrappers a mount stacks (layer.py) over four rooms, each importing only
those before it: metadata/ (the dataset model, JSON text, CDL, validation) < chunks/ < views/,
ncfile/ (neither imports the other)."""
