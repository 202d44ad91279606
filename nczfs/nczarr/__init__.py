"""The NCZarr layer: a dataset model read from every metadata flavor, CDL text, validation."""
