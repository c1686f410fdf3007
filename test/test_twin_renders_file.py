"""The twin renders file (``twin_renders.npz``, the report's overlay video) is written at a low
deflate level: the same arrays come back from ``np.load``, and the file is still compressed."""

from __future__ import annotations

import zipfile

import numpy as np

from vid2sid_ros.calibration.trial_curves import _savez_fast


def test_renders_file_round_trips_through_np_load_and_is_deflated(tmp_path):
    rng = np.random.default_rng(0)
    frames = np.zeros((12, 30, 40, 3), np.uint8)
    frames[:, 10:20, 15:25] = rng.integers(0, 255, (12, 10, 10, 3), dtype=np.uint8)  # a marker on a black field
    arrays = {"0_initial": frames, "0_steps": np.arange(12, dtype=np.int64), "0_size": np.array([320, 240])}
    path = tmp_path / "r.npz"
    _savez_fast(path, arrays)
    with np.load(path, allow_pickle=False) as z:
        assert sorted(z.files) == sorted(arrays)
        for k, a in arrays.items():
            assert z[k].dtype == a.dtype and np.array_equal(z[k], a)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("0_initial.npy")
        assert info.compress_type == zipfile.ZIP_DEFLATED and info.compress_size < frames.nbytes / 4
