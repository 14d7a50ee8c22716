"""powershap (``PowerShap``, automatic mode, its defaults) on the rows of IN.npz:
features with p-value < power_alpha (0.01). See ``_peer_io.py``."""
import numpy as np

import _peer_io


def select(X, y, spec):
    from powershap import PowerShap

    selector = PowerShap(model=_peer_io.model(spec), show_progress=False)
    np.random.seed(spec["seed"])
    selector.fit(_peer_io.frame(X), y)
    return {"powershap": np.flatnonzero(selector.get_support()).tolist()}


if __name__ == "__main__":
    _peer_io.run(select, ["powershap", "shap", "lightgbm", "numpy"])
