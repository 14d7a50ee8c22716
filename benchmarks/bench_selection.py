"""Feature selection against the selectors people use, on data whose truth is known.

Every method selects on the same 70 % of the rows (the split is made before
selection, stratified for classifiers) with the same base model: LightGBM,
200 trees, 15 leaves, learning rate 0.05, ``n_jobs`` = ``--threads``,
``verbose=-1`` (``OMP_NUM_THREADS`` and ``OPENBLAS_NUM_THREADS`` set to the
same number). The base model is then refitted on the kept features and
scored on the other 30 % (R^2 or ROC AUC; no feature kept: the mean of the
training target, AUC 0.5).

Methods (none tuned per data set):

- ``r2shap_mean``: ``ShapleyR2Importance(model)``, the default rule (share >= mean share);
- ``r2shap_fdr``: ``ShapleyR2Importance(model, test="fdr", alpha=0.1, cv=5)`` (cross-fitted shares, BH);
- ``r2shap_rfecv_one_se`` / ``r2shap_rfecv_best``: ``ShapleyR2RFECV(model, selection_rule=...)``;
- ``r2shap_rfecv_cf_one_se`` / ``_best``: the same with the ranking cross-fitted inside each
  fold's training rows (``ranking_cv=--rfe-ranking-cv``, default 3);
- ``r2shap_rfecv_ho_one_se`` / ``_best``: the same with the ranking by held-out shares of one
  inner split of each fold's training rows (``ranking_test_size=--rfe-ranking-holdout``, default
  0.5: half the rows fit the ranking model, half are decomposed; ``random_state=seed``);
- ``r2shap_rfecv_ho_lcb_one_se`` / ``_best``: an experiment, not an option of the estimator: the
  held-out ranking with each step's shares replaced by share - 1 standard error (the pooled
  held-out terms' sd / sqrt(n)), for the order and for the batch rule alike: a feature leaves at
  once unless its held-out share is at least one standard error above 0;
- ``sfm_gain``: scikit-learn ``SelectFromModel`` on LightGBM's gain importance (>= mean);
- ``rfecv``: scikit-learn ``RFECV`` (gain importance, step=1, cv=5, scoring "r2" / "roc_auc");
- ``perm_mean`` / ``perm_2sd``: ``permutation_importance`` (10 repeats) of a model fitted
  on 70 % of the selection rows, on the other 30 %: importance >= the mean importance, or
  mean - 2 std (over the repeats) > 0; one computation, two rules;
- ``powershap``, ``borutashap``, ``probatus_best`` / ``probatus_parsimonious``: the peers, each
  run by ``benchmarks/peer_<name>.py`` with the python of its own virtual environment
  (``--peer-venvs``, one folder per peer: powershap, borutashap, probatus), so that
  nothing of theirs is a dependency.

Data sets (the relevant columns are the truth): ``friedman1`` (5 relevant, 45 noise);
``classification`` (make_classification: 6 informative + 4 redundant relevant, 40 noise);
``copies`` (Friedman1's 5 relevant, a noisy copy of each (noise sd 0.1, correlation
0.95) counted as *not* relevant since y does not depend on them given the originals,
40 noise); ``interaction`` (y = x0 * x1 + noise, standard normal X: neither feature
matters alone; 48 noise); ``diabetes`` (10 real, 40 row-permuted copies of them);
``breast_cancer`` (30 real, 30 row-permuted copies).

Per data set and method: true-positive rate, false discovery proportion, F1, features
kept, held-out score, selection time; means over seeds with standard errors. Also the
error-control check: on pure-noise targets (``--null-seeds``), the fraction of seeds in
which ``test="fdr"`` at alpha = 0.1 selects any feature.

Results: a markdown table on standard output (and ``--markdown``), raw records in
``--output`` (default ``benchmarks/results/selection.json``; ``--quick`` writes
``selection_quick.json``). ``--resume`` keeps the records of an earlier run of the same
output and runs only what is missing (each record keeps its own load average). Usage::

    python benchmarks/bench_selection.py [--threads 2] [--seeds 5] [--slow-seeds 5]
        [--null-seeds 50] [--methods ...] [--datasets ...] [--resume] [--quick]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

OURS = ["r2shap_mean", "r2shap_fdr", "r2shap_rfecv_one_se", "r2shap_rfecv_best",
        "r2shap_rfecv_cf_one_se", "r2shap_rfecv_cf_best",
        "r2shap_rfecv_ho_one_se", "r2shap_rfecv_ho_best",
        "r2shap_rfecv_ho_lcb_one_se", "r2shap_rfecv_ho_lcb_best"]
SKLEARN = ["sfm_gain", "rfecv", "perm_mean", "perm_2sd"]
PEERS = {  # runner -> the rules (methods) it reports
    "powershap": ["powershap"],
    "borutashap": ["borutashap"],
    "probatus": ["probatus_best", "probatus_parsimonious"],
}
METHODS = OURS + SKLEARN + [m for rules in PEERS.values() for m in rules]
# methods computed together (one selection time for all of them)
GROUPS = {"r2shap_mean": ["r2shap_mean"], "r2shap_fdr": ["r2shap_fdr"],
          "r2shap_rfecv": ["r2shap_rfecv_one_se", "r2shap_rfecv_best"],
          "r2shap_rfecv_cf": ["r2shap_rfecv_cf_one_se", "r2shap_rfecv_cf_best"],
          "r2shap_rfecv_ho": ["r2shap_rfecv_ho_one_se", "r2shap_rfecv_ho_best"],
          "r2shap_rfecv_ho_lcb": ["r2shap_rfecv_ho_lcb_one_se", "r2shap_rfecv_ho_lcb_best"],
          "sfm_gain": ["sfm_gain"], "rfecv": ["rfecv"], "perm": ["perm_mean", "perm_2sd"],
          **PEERS}
DATASETS = ["friedman1", "classification", "copies", "interaction", "diabetes", "breast_cancer"]
LGBM = dict(n_estimators=200, num_leaves=15, learning_rate=0.05, verbose=-1)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--slow-seeds", type=int, default=None,
                        help="seeds for the --slow methods (default: --seeds)")
    parser.add_argument("--slow", nargs="*", default=["borutashap", "probatus"],
                        help="method groups run on --slow-seeds seeds only")
    parser.add_argument("--null-seeds", type=int, default=50)
    parser.add_argument("--rows", type=int, default=1000, help="rows of the synthetic data sets")
    parser.add_argument("--include", nargs="*", default=[],
                        help="also take the records of these result files (other runs)")
    parser.add_argument("--methods", nargs="*", default=list(GROUPS),
                        help=f"method groups among {list(GROUPS)}")
    parser.add_argument("--datasets", nargs="*", default=DATASETS, choices=DATASETS)
    parser.add_argument("--rfe-step", type=float, default=1,
                        help="ShapleyR2RFECV's step (its default 1; a float in (0, 1) is a "
                             "fraction of the features, as in RFECV)")
    parser.add_argument("--rfe-ranking-cv", type=int, default=3,
                        help="ranking_cv of the r2shap_rfecv_cf methods (cross-fitted ranking)")
    parser.add_argument("--rfe-ranking-holdout", type=float, default=0.5,
                        help="ranking_test_size of the r2shap_rfecv_ho methods (held-out ranking: "
                             "the fraction of each fold's training rows held out)")
    parser.add_argument("--null-tasks", nargs="*", default=["regression", "classification"])
    parser.add_argument("--peer-venvs", default="/work/peer-venvs")
    parser.add_argument("--probatus-no-additivity-check", action="store_true",
                        help="run probatus with shap's check_additivity=False (it fails the "
                             "check on some data); recorded with the results")
    parser.add_argument("--peer-timeout", type=float, default=3600.0)
    parser.add_argument("--output", default=None)
    parser.add_argument("--markdown", default=None, help="also write the tables to this file")
    parser.add_argument("--resume", action="store_true",
                        help="keep the records already in --output, run only the missing ones")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 seed, 400 rows, 5 null seeds, no probatus")
    args = parser.parse_args(argv)
    unknown = set(args.methods) - set(GROUPS)
    if unknown:
        parser.error(f"unknown methods {sorted(unknown)}; choose among {list(GROUPS)}")
    if args.quick:
        args.seeds, args.rows, args.null_seeds = 1, 400, 5
        args.slow_seeds = 1
        if "probatus" in args.methods and args.methods == list(GROUPS):
            args.methods = [m for m in args.methods if m != "probatus"]
    if args.slow_seeds is None:
        args.slow_seeds = args.seeds
    if args.output is None:
        args.output = str(HERE / "results" / ("selection_quick.json" if args.quick
                                              else "selection.json"))
    return args


def load_average():
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except OSError:
        return float("nan")


# ---------------------------------------------------------------- data sets

def make_dataset(name, seed, rows):
    """X, y, task, relevant columns, noisy-copy columns (a subset of the irrelevant ones)."""
    import numpy as np
    from sklearn.datasets import (load_breast_cancer, load_diabetes, make_classification,
                                  make_friedman1)

    rng = np.random.default_rng(seed)
    copies = []
    if name == "friedman1":
        X, y = make_friedman1(n_samples=rows, n_features=50, noise=1.0, random_state=seed)
        task, relevant = "regression", list(range(5))
    elif name == "classification":
        X, y = make_classification(n_samples=rows, n_features=50, n_informative=6,
                                   n_redundant=4, n_repeated=0, shuffle=False,
                                   random_state=seed)
        task, relevant = "classification", list(range(10))
    elif name == "copies":
        X, y = make_friedman1(n_samples=rows, n_features=45, noise=1.0, random_state=seed)
        noisy = X[:, :5] + 0.1 * rng.normal(size=(rows, 5))
        X = np.hstack([X[:, :5], noisy, X[:, 5:]])
        task, relevant, copies = "regression", list(range(5)), list(range(5, 10))
    elif name == "interaction":
        X = rng.normal(size=(rows, 50))
        y = X[:, 0] * X[:, 1] + 0.5 * rng.normal(size=rows)
        task, relevant = "regression", [0, 1]
    elif name in ("diabetes", "breast_cancer"):
        loader, n_noise = ((load_diabetes, 40) if name == "diabetes"
                           else (load_breast_cancer, 30))
        X, y = loader(return_X_y=True)
        p = X.shape[1]
        noise = np.column_stack([X[rng.permutation(len(X)), j % p] for j in range(n_noise)])
        X = np.hstack([X, noise])
        task = "regression" if name == "diabetes" else "classification"
        relevant = list(range(p))
    else:
        raise ValueError(f"unknown data set {name!r}; choose among {DATASETS}")
    return X, y, task, relevant, copies


def split(X, y, task, seed):
    from sklearn.model_selection import train_test_split

    return train_test_split(X, y, test_size=0.3, random_state=seed,
                            stratify=y if task == "classification" else None)


def base_model(task, seed, threads, **extra):
    import lightgbm

    cls = lightgbm.LGBMClassifier if task == "classification" else lightgbm.LGBMRegressor
    return cls(**LGBM, n_jobs=threads, random_state=seed, **extra)


def held_out_score(kept, X_train, y_train, X_test, y_test, task, seed, threads):
    """The base model refitted on the kept columns, scored on the held-out rows."""
    import numpy as np
    from sklearn.metrics import r2_score, roc_auc_score

    kept = list(kept)
    if not kept:
        if task == "classification":
            return 0.5
        return float(r2_score(y_test, np.full(len(y_test), np.mean(y_train))))
    model = base_model(task, seed, threads).fit(X_train[:, kept], y_train)
    if task == "classification":
        return float(roc_auc_score(y_test, model.predict_proba(X_test[:, kept])[:, 1]))
    return float(r2_score(y_test, model.predict(X_test[:, kept])))


# ---------------------------------------------------------------- methods

def _lower_bound_rfecv():
    """ShapleyR2RFECV whose steps rank by share - 1 standard error (an experiment)."""
    import numpy as np

    from sklearn_r2shap import ShapleyR2RFECV
    from sklearn_r2shap._estimators.rfecv import _Scored

    class LowerBoundRFECV(ShapleyR2RFECV):
        def _fit_step(self, rows, features, scored_like=None, **kwargs):
            step = super()._fit_step(rows, features, scored_like, **kwargs)
            if not isinstance(step, _Scored):
                step.feature_importances_ = (np.asarray(step.feature_importances_)
                                             - np.asarray(step.std_errors_))
            return step

    return LowerBoundRFECV


def run_ours(group, X, y, task, seed, threads, step=1, ranking_cv=3, holdout=0.5):
    import numpy as np

    import sklearn_r2shap

    model = base_model(task, seed, threads)
    LowerBoundRFECV = _lower_bound_rfecv()
    if group == "r2shap_mean":
        selector = sklearn_r2shap.ShapleyR2Importance(model, n_jobs=threads)
    elif group == "r2shap_fdr":
        selector = sklearn_r2shap.ShapleyR2Importance(model, test="fdr", alpha=0.1, cv=5,
                                                      n_jobs=threads)
    else:
        step = int(step) if step >= 1 else step
        ranking = ({"ranking_cv": ranking_cv} if group == "r2shap_rfecv_cf" else
                   {"ranking_test_size": holdout} if group.startswith("r2shap_rfecv_ho")
                   else {})
        cls = LowerBoundRFECV if group == "r2shap_rfecv_ho_lcb" else sklearn_r2shap.ShapleyR2RFECV
        selector = cls(
            model, step=step, selection_rule="one_se", n_jobs=threads, random_state=seed,
            **ranking)
    start = time.perf_counter()
    selector.fit(X, y)
    elapsed = time.perf_counter() - start
    if not group.startswith("r2shap_rfecv"):
        return {group: np.flatnonzero(selector.get_support()).tolist()}, elapsed, {}
    # "best" from the same cross-validated curves (the costly part, deterministic:
    # unshuffled folds, seeded model), then the elimination on all rows down to its
    # count, as ShapleyR2RFECV(selection_rule="best").fit does; its time is taken as
    # the one_se fit's (the same folds, and a shorter elimination on all rows).
    from sklearn_r2shap._estimators._stats import choose_n_features
    from sklearn_r2shap._estimators.rfecv import _Rows

    results = selector.cv_results_
    folds = np.array([results[k] for k in results
                      if k.startswith("split") and k.endswith("_test_score")]).T
    counts = results["n_feature_groups"]  # the units eliminated (here the features)
    count = int(counts[choose_n_features(counts, folds, "best")])
    _, _, last = selector._eliminate(_Rows(X, y, None, {}, None, {}), count,
                                     ranking_cv=selector._final_ranking_cv)
    extra = {"n_features_curve": results["n_features"].tolist(),
             "mean_test_score": results["mean_test_score"].tolist(), "step": step,
             "ranking_cv": selector.ranking_cv,
             "ranking_test_size": selector.ranking_test_size}
    return ({f"{group}_one_se": np.flatnonzero(selector.support_).tolist(),
             f"{group}_best": sorted(int(j) for j in last)}, elapsed, extra)


def run_sklearn(group, X, y, task, seed, threads):
    import numpy as np
    from sklearn.feature_selection import RFECV, SelectFromModel
    from sklearn.inspection import permutation_importance
    from sklearn.model_selection import train_test_split

    scoring = "roc_auc" if task == "classification" else "r2"
    gain = base_model(task, seed, threads, importance_type="gain")
    start = time.perf_counter()
    if group == "sfm_gain":
        selected = {"sfm_gain": SelectFromModel(gain).fit(X, y).get_support()}
    elif group == "rfecv":
        selected = {"rfecv": RFECV(gain, step=1, cv=5, scoring=scoring).fit(X, y).get_support()}
    elif group == "perm":
        X_fit, X_val, y_fit, y_val = train_test_split(
            X, y, test_size=0.3, random_state=seed,
            stratify=y if task == "classification" else None)
        model = base_model(task, seed, threads).fit(X_fit, y_fit)
        result = permutation_importance(model, X_val, y_val, scoring=scoring, n_repeats=10,
                                        random_state=seed)
        mean, std = result.importances_mean, result.importances_std
        selected = {"perm_mean": mean >= mean.mean(), "perm_2sd": mean - 2 * std > 0}
    else:
        raise ValueError(group)
    elapsed = time.perf_counter() - start
    return {k: np.flatnonzero(v).tolist() for k, v in selected.items()}, elapsed, {}


def run_peer(group, X, y, task, seed, threads, args):
    import numpy as np

    python = Path(args.peer_venvs) / group / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"no virtual environment for {group}: {python} does not exist "
                           "(see /work/shared/PEERS.md for how to install it)")
    spec = {"task": task, "seed": seed, "threads": threads,
            "lgbm": dict(LGBM, n_jobs=threads, random_state=seed)}
    if group == "probatus" and args.probatus_no_additivity_check:
        spec["check_additivity"] = False
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "in.npz", Path(tmp) / "out.json"
        np.savez(inp, X=X, y=y, spec=json.dumps(spec))
        done = subprocess.run([str(python), str(HERE / f"peer_{group}.py"), str(inp), str(out)],
                              capture_output=True, text=True, timeout=args.peer_timeout,
                              env=thread_env(threads), cwd=str(HERE))
        if not out.exists():
            raise RuntimeError(f"{group} runner exited with {done.returncode}: "
                               f"{done.stderr[-3000:]}")
        answer = json.loads(out.read_text())
    if "error" in answer:
        raise RuntimeError(f"{group}: {answer['error']}")
    extra = dict(answer.get("extra", {}), versions=answer["versions"])
    if spec.get("check_additivity") is False:
        extra["check_additivity"] = False
    return answer["selected"], answer["time"], extra


def thread_env(threads):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def run_group(group, X, y, task, seed, threads, args):
    if group in GROUPS and group.startswith("r2shap"):
        return run_ours(group, X, y, task, seed, threads, args.rfe_step, args.rfe_ranking_cv,
                        args.rfe_ranking_holdout)
    if group in PEERS:
        return run_peer(group, X, y, task, seed, threads, args)
    return run_sklearn(group, X, y, task, seed, threads)


# ---------------------------------------------------------------- null targets

def null_check(seeds, threads, tasks, rows=300, features=10):
    """Fraction of pure-noise data sets (y independent of X) in which
    ``ShapleyR2Importance(test="fdr", alpha=0.1, cv=5)`` selects any feature."""
    import numpy as np

    import sklearn_r2shap

    out = {}
    for task in tasks:
        anys, pmins, errors, start = [], [], [], time.perf_counter()
        for seed in range(seeds):
            rng = np.random.default_rng(10_000 + seed)
            X = rng.normal(size=(rows, features))
            y = rng.normal(size=rows) if task == "regression" else rng.integers(0, 2, rows)
            try:
                selector = sklearn_r2shap.ShapleyR2Importance(
                    base_model(task, seed, threads), test="fdr", alpha=0.1, cv=5,
                    n_jobs=threads)
                selector.fit(X, y)
            except Exception:  # reported, e.g. before the threshold exists
                errors.append(traceback.format_exc(limit=3))
                break
            anys.append(bool(selector.get_support().any()))
            pmins.append(float(np.min(selector.pvalues_)))
        out[task] = {"rows": rows, "features": features, "seeds": len(anys),
                     "any_selected": anys, "min_pvalue": pmins,
                     "fraction_any": float(np.mean(anys)) if anys else None,
                     "seconds": time.perf_counter() - start,
                     "error": errors[0] if errors else None}
    return out


# ---------------------------------------------------------------- summary

def summarise(records):
    """{dataset: {method: means and standard errors over seeds}} of the good records."""
    from selection_metrics import mean_se

    table = {}
    for rec in records:
        table.setdefault(rec["dataset"], {}).setdefault(rec["method"], []).append(rec)
    summary = {}
    for dataset, methods in table.items():
        summary[dataset] = {}
        for method, recs in methods.items():
            good = [r for r in recs if "error" not in r]
            row = {"seeds": len(good), "errors": len(recs) - len(good)}
            for key in ("tpr", "fdp", "f1", "n_kept", "tp", "fp", "copies_kept", "score", "time",
                        "load"):
                mean, se = mean_se([r.get(key) for r in good])
                row[key], row[key + "_se"] = mean, se
            if len(good) < len(recs):
                row["error"] = next(r["error"] for r in recs if "error" in r)
            summary[dataset][method] = row
    return summary


def fmt(mean, se=None, digits=3):
    if mean is None or mean != mean:
        return "-"
    text = f"{mean:.{digits}f}"
    if se is not None and se == se:
        text += f" ± {se:.{digits}f}"
    return text


def markdown(summary, all_scores, data_info):
    from selection_metrics import mean_se

    lines = []
    for dataset in DATASETS:
        if dataset not in summary:
            continue
        info = data_info[dataset]
        metric = "AUC" if info["task"] == "classification" else "R^2"
        score_all = mean_se(all_scores.get(dataset, []))
        lines += [f"### {dataset}: {info['relevant']} relevant / {info['irrelevant']} not "
                  f"({info['rows']} rows; held-out {metric}; all features "
                  f"{fmt(*score_all)})", "",
                  "| method | seeds | TPR | FDP | F1 | kept (relevant / not) | held-out "
                  f"{metric} | time s |", "|---|---|---|---|---|---|---|---|"]
        for method in METHODS:
            row = summary[dataset].get(method)
            if row is None:
                continue
            if not row["seeds"]:
                first = row["error"].strip().splitlines()[-1][:120]
                lines.append(f"| {method} | 0 | error: {first} | | | | | |")
                continue
            kept = f"{row['tp']:.1f} / {row['fp']:.1f}"
            if info.get("copies"):
                kept += f" ({row['copies_kept']:.1f} copies)"
            lines.append(
                f"| {method} | {row['seeds']} | {fmt(row['tpr'], digits=2)} | "
                f"{fmt(row['fdp'], row['fdp_se'], 2)} | {fmt(row['f1'], row['f1_se'], 2)} | "
                f"{kept} | {fmt(row['score'], row['score_se'])} | "
                f"{fmt(row['time'], digits=1)} |")
        lines.append("")
    return "\n".join(lines)


def goals(summary, null, records):
    """The issue's goals, each measured on this run's records."""
    import numpy as np

    lines = ["### Goals", "", "(best = the best mean among the methods run on >= 3 seeds)", ""]
    # error control
    for task, res in (null or {}).items():
        if res.get("fraction_any") is None:
            lines.append(f"- error control, pure noise ({task}): not measured ({res.get('error')})")
            continue
        n, frac = res["seeds"], res["fraction_any"]
        bound = 0.1 + 2 * np.sqrt(0.1 * 0.9 / n)
        lines.append(f"- error control, pure noise ({task}, {res['rows']} x {res['features']}): "
                     f"fdr at alpha=0.1 selects a feature in {sum(res['any_selected'])}/{n} seeds "
                     f"= {frac:.2f} (goal <= about 0.10; 0.10 + 2 binomial SE = {bound:.2f}): "
                     f"{'met' if frac <= bound else 'NOT met'}")
    for dataset, methods in summary.items():
        row = methods.get("r2shap_fdr")
        if row and row["seeds"]:
            se = row["fdp_se"] if row["fdp_se"] == row["fdp_se"] else 0.0
            lines.append(f"- error control, {dataset}: mean FDP of r2shap_fdr "
                         f"{row['fdp']:.3f} ± {se:.3f} (goal <= 0.1 + noise): "
                         f"{'met' if row['fdp'] - 2 * se <= 0.1 else 'NOT met'}")
    # power and quality, speed
    for dataset, methods in summary.items():
        ok = {m: r for m, r in methods.items() if r["seeds"]}
        if not ok:
            continue
        # the best method among those with >= 3 seeds (a one-seed mean is not comparable)
        ref = {m: r for m, r in ok.items() if r["seeds"] >= 3} or ok
        best_f1 = max(ref, key=lambda m: ref[m]["f1"])
        best_score = max(ref, key=lambda m: ref[m]["score"])
        score_se = ok[best_score]["score_se"]
        score_se = 0.0 if score_se != score_se else score_se
        for ours in OURS:
            if ours not in ok:
                continue
            r = ok[ours]
            f1_met = r["f1"] >= ok[best_f1]["f1"] - 0.05
            score_met = r["score"] >= ok[best_score]["score"] - score_se
            speed = []
            for peer, factor in (("borutashap", 5), ("powershap", 5),
                                 ("probatus_best", 1)):
                # paired: the seeds both ran on
                times = {m: {r["seed"]: r["time"] for r in records
                             if r["dataset"] == dataset and r["method"] == m and "error" not in r}
                         for m in (peer, ours)}
                seeds = sorted(set(times[peer]) & set(times[ours]))
                if seeds:
                    ratio = (np.mean([times[peer][s] for s in seeds])
                             / np.mean([times[ours][s] for s in seeds]))
                    speed.append(f"{peer.split('_')[0]} {ratio:.1f}x on {len(seeds)} seed(s) "
                                 f"({'met' if ratio >= factor else 'NOT met'}, goal {factor}x)")
            lines.append(
                f"- {dataset}, {ours}: F1 {r['f1']:.2f} vs best {ok[best_f1]['f1']:.2f} "
                f"({best_f1}): {'met' if f1_met else 'NOT met'}; score {r['score']:.3f} vs best "
                f"{ok[best_score]['score']:.3f} ± {score_se:.3f} ({best_score}): "
                f"{'met' if score_met else 'NOT met'}; speed: {', '.join(speed) or '-'}")
    return "\n".join(lines)


# ---------------------------------------------------------------- main

def main(argv=None):
    args = parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    import numpy as np

    from selection_metrics import selection_scores

    output = Path(args.output)
    old = json.loads(output.read_text()) if args.resume and output.exists() else {}
    records = [r for r in old.get("records", []) if "error" not in r]
    all_scores = {k: v for k, v in old.get("all_features_score", {}).items()}
    data_info = old.get("datasets", {})
    versions = old.get("versions", {})
    previous_runs = old.get("runs", [])
    for path in args.include:  # records of another run, where this one has none
        other = json.loads(Path(path).read_text())
        have = {(r["dataset"], r["seed"], r["method"]) for r in records}
        records += [r for r in other["records"]
                    if (r["dataset"], r["seed"], r["method"]) not in have]
        for key, value in other.get("all_features_score", {}).items():
            if len(value) > len(all_scores.get(key, [])):
                all_scores[key] = value
        data_info = {**other.get("datasets", {}), **data_info}
        if other.get("null"):
            old["null"] = {**other["null"], **(old.get("null") or {})}
        versions = {**other.get("versions", {}), **versions}
        previous_runs += other.get("runs", [])
    done = {(r["dataset"], r["seed"], r["method"]) for r in records}
    command = " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:]))
    runs = previous_runs + [{
        "command": f"python benchmarks/{command}",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.platform()}, {platform.processor() or platform.machine()}, "
                   f"{os.cpu_count()} cores, python {platform.python_version()}",
        "load_at_start": load_average(), "threads": args.threads}]

    import lightgbm
    import sklearn

    import sklearn_r2shap

    versions.update({"sklearn_r2shap": sklearn_r2shap.__file__, "scikit-learn": sklearn.__version__,
                     "lightgbm": lightgbm.__version__, "numpy": np.__version__})

    def save(null=None):
        payload = {"runs": runs, "versions": versions, "datasets": data_info,
                   "all_features_score": all_scores, "records": records,
                   "summary": summarise(records), "null": null or old.get("null"),
                   "lgbm": LGBM, "threads": args.threads}
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(payload, indent=1))

    # seed-major: every data set gets seed 0 first
    for seed in range(max(args.seeds, args.slow_seeds)):
        for dataset in args.datasets:
            X, y, task, relevant, copies = make_dataset(dataset, seed, args.rows)
            data_info[dataset] = {"task": task, "rows": len(X), "relevant": len(relevant),
                                  "irrelevant": X.shape[1] - len(relevant),
                                  "copies": len(copies)}
            X_train, X_test, y_train, y_test = split(X, y, task, seed)
            key = f"{dataset}"
            scores = all_scores.setdefault(key, [])
            if seed == len(scores):
                scores.append(held_out_score(range(X.shape[1]), X_train, y_train, X_test, y_test,
                                             task, seed, args.threads))
            for group in args.methods:
                limit = args.slow_seeds if group in args.slow else args.seeds
                if seed >= limit or all((dataset, seed, m) in done for m in GROUPS[group]):
                    continue
                load = load_average()
                try:
                    selected, elapsed, extra = run_group(group, X_train, y_train, task, seed,
                                                         args.threads, args)
                except Exception:
                    error = traceback.format_exc(limit=4)
                    print(f"{dataset} seed {seed} {group}: ERROR {error.strip().splitlines()[-1]}",
                          flush=True)
                    for method in GROUPS[group]:
                        records.append({"dataset": dataset, "seed": seed, "method": method,
                                        "error": error, "load": load})
                    save()
                    continue
                if "versions" in extra:
                    versions[group] = extra.pop("versions")
                for method in GROUPS[group]:
                    kept = selected[method]
                    rec = {"dataset": dataset, "seed": seed, "method": method,
                           "selected": kept, "time": elapsed, "load": load, **extra,
                           **selection_scores(kept, relevant),
                           "copies_kept": len(set(kept) & set(copies)),
                           "score": held_out_score(kept, X_train, y_train, X_test, y_test,
                                                   task, seed, args.threads)}
                    records.append(rec)
                    print(f"{dataset} seed {seed} {method}: kept {rec['tp']} relevant / "
                          f"{rec['fp']} not, F1 {rec['f1']:.2f}, score {rec['score']:.3f}, "
                          f"{elapsed:.1f} s (load {load:.1f})", flush=True)
                save()

    null = old.get("null")
    if args.null_seeds and any(g.startswith("r2shap_fdr") for g in args.methods):
        if not (args.resume and null and all(v.get("fraction_any") is not None
                                             and v["seeds"] >= args.null_seeds
                                             for v in null.values())):
            null = null_check(args.null_seeds, args.threads, args.null_tasks)
    save(null)
    summary = summarise(records)
    text = markdown(summary, all_scores, data_info) + "\n" + goals(summary, null, records) + "\n"
    print()
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)


if __name__ == "__main__":
    main()
