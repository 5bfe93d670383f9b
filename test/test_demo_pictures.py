"""The vine demo's picture explains itself: legends name truth, estimate, the IMU dots and the snapshot times."""

from __future__ import annotations

import numpy as np

from shape_sensing.demos import vine_imu
from shape_sensing.estimators.hinge_arc import SCHEMA
from shape_sensing.pipelines.vine_imu import VineImuTracker
from shape_sensing.sim.vine import VineSimConfig, VineSimulator


def test_vine_picture_has_legends_and_a_readable_out_of_plane_panel() -> None:
    import matplotlib.pyplot as plt

    sim = VineSimulator(VineSimConfig(duration=4.0, rate=10.0))
    tracker = VineImuTracker(SCHEMA.defaults())
    snapshots = []
    for k in range(41):
        t = k / 10.0
        out = tracker.push_length(round(t * 1e9), sim.length(t))
        for i, s in enumerate(sim.imu_samples(t)):
            out += tracker.push_imu(i, s)
        if out and k % 10 == 0:
            snapshots.append((out[-1], sim.truth(t)))
    fig = vine_imu._figure(snapshots, np.linspace(0, 4, 5), np.full(5, 0.01), "passive")
    try:
        labels = [[tx.get_text() for tx in ax.get_legend().get_texts()] if ax.get_legend() else [] for ax in fig.axes]
        assert {"truth (simulator)", "estimate (hinge-arc)", "estimated IMU positions"} <= set(labels[0])
        assert any(label.startswith("t = ") for label in labels[0])
        assert {"truth (simulator)", "estimate (hinge-arc)"} <= set(labels[1])
        assert labels[2] and labels[2][1].startswith("mean ")
        # The out-of-plane panel is scaled to its data (mm), not drawn to the bend plane's scale.
        lo, hi = fig.axes[1].get_ylim()
        assert fig.axes[1].get_ylabel() == "x (mm, up)" and hi - lo < 50
    finally:
        plt.close(fig)
