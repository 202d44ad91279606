"""The dataset model read from every flavor; JSON text, CDL, validation rules."""
