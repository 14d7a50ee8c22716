"""probatus ``ShapRFECV`` on the rows of IN.npz: step=0.2 (the float step its
docs recommend for speed; its default is 1), cv=5, scoring "r2" or "roc_auc",
n_jobs=1 (the threads go to the model, as for every method); with
``spec["check_additivity"] = False`` shap's additivity check is switched off
(its error message's advice, ``--probatus-no-additivity-check``). Rules "best" and
"best_parsimonious" (standard_error_threshold=1.0, its default) from the same
elimination. See ``_peer_io.py``."""
import _peer_io


def select(X, y, spec):
    from probatus.feature_elimination import ShapRFECV

    scoring = "roc_auc" if spec["task"] == "classification" else "r2"
    selector = ShapRFECV(_peer_io.model(spec), step=0.2, cv=5, scoring=scoring, n_jobs=1,
                         random_state=spec["seed"])
    shap_kwargs = {} if spec.get("check_additivity", True) else {"check_additivity": False}
    selector.fit_compute(_peer_io.frame(X), y, **shap_kwargs)
    return {rule: _peer_io.columns(selector.get_reduced_features_set(num_features=name))
            for rule, name in [("probatus_best", "best"),
                               ("probatus_parsimonious", "best_parsimonious")]}


if __name__ == "__main__":
    _peer_io.run(select, ["probatus", "shap", "lightgbm", "numpy"])
