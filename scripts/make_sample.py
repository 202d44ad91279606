"""Regenerate the bundled sample dataset nczfs/samples/ocean.file with the netCDF4 wheel.

    .venv/bin/python scripts/make_sample.py

A tiny NCZarr dataset (as netCDF-C 4.10.1 writes it): dims time (unlimited), lat, lon,
a temperature grid with attributes, coordinate variables, a scalar and a subgroup.
"""

import shutil
from pathlib import Path

import netCDF4
import numpy as np

out = Path(__file__).resolve().parents[1] / "nczfs" / "samples" / "ocean.file"
shutil.rmtree(out, ignore_errors=True)
out.parent.mkdir(parents=True, exist_ok=True)
ds = netCDF4.Dataset(f"file://{out}#mode=nczarr,file", "w")
ds.title = "nczfs sample: sea surface temperature on a tiny grid"
ds.institution = "nczfs"
ds.createDimension("time", None)
ds.createDimension("lat", 3)
ds.createDimension("lon", 4)
t = ds.createVariable("time", "f8", ("time",))
t.units = "days since 2026-01-01"
t[:] = [0.0, 1.0]
lat = ds.createVariable("lat", "f4", ("lat",))
lat.units = "degrees_north"
lat[:] = [-10.0, 0.0, 10.0]
lon = ds.createVariable("lon", "f4", ("lon",))
lon.units = "degrees_east"
lon[:] = [0.0, 90.0, 180.0, 270.0]
sst = ds.createVariable("sst", "f4", ("time", "lat", "lon"), fill_value=-999.0)
sst.units = "degC"
sst.long_name = "sea surface temperature"
sst.valid_range = np.array([-5.0, 40.0], dtype="f4")
sst[:] = (np.arange(24, dtype="f4").reshape(2, 3, 4) / 2 + 10)
depth = ds.createVariable("depth", "i4")
depth.assignValue(5)
depth.units = "m"
g = ds.createGroup("stations")
g.createDimension("station", 2)
name = g.createVariable("id", "i2", ("station",))
name[:] = [101, 102]
g.note = "two buoys"
ds.close()
print("wrote", out)
