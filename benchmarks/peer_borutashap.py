"""BorutaShap (``borutashap-modern``; SHAP importance, its defaults: 20 trials,
percentile 100, p-value 0.05, model fitted on 70 % and explained on 30 % of the
rows) on the rows of IN.npz: the accepted features (the tentative ones are
reported apart). See ``_peer_io.py``."""
import _peer_io


def select(X, y, spec):
    from BorutaShap import BorutaShap

    selector = BorutaShap(model=_peer_io.model(spec), importance_measure="shap",
                          classification=spec["task"] == "classification")
    selector.fit(X=_peer_io.frame(X), y=y, random_state=spec["seed"], verbose=False)
    return ({"borutashap": _peer_io.columns(selector.accepted)},
            {"tentative": _peer_io.columns(selector.tentative)})


if __name__ == "__main__":
    _peer_io.run(select, ["borutashap-modern", "shap", "lightgbm", "numpy"])
