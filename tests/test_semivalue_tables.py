"""Pattern tables of path-dependent semivalues across row blocks
(``_games.semivalues.SemivalueGame``): tables kept for every block (resident)
or rebuilt per block beyond the memory budget, single leaves and leaf pairs,
against subset enumeration (tests/reference.py)."""

import importlib
import pickle

import numpy as np
import pytest

import reference
from sklearn_r2shap import beta_shapley_values, shap_values
from sklearn_r2shap._games import semivalues as semivalue_games
from sklearn_r2shap._numerics import beta_quadrature
from test_kernels import ENSEMBLES, random_ensemble


def many_rows(name, n_rows=40):
    ens, X = random_ensemble(**ENSEMBLES[name])
    rng = np.random.default_rng(7)
    return ens, X[rng.integers(0, len(X), n_rows)] + (rng.random((n_rows, X.shape[1])) < 0.3) * (
        rng.normal(size=(n_rows, X.shape[1])))


def blocks_of_three(monkeypatch):
    from sklearn_r2shap._execution import local
    attributions = importlib.import_module("sklearn_r2shap.attributions")
    monkeypatch.setattr(attributions, "semivalue_seconds",
                        lambda ensemble, n_points: local.BLOCK_SECONDS / 3)
    calls = []
    block_function = semivalue_games.uniform_semivalues

    def counted(game, X, **kwargs):
        calls.append(len(X))
        return block_function(game, X, **kwargs)

    monkeypatch.setattr(attributions._games, "uniform_semivalues", counted)
    return calls


@pytest.mark.parametrize("name", ENSEMBLES)
@pytest.mark.parametrize("budget", [1 << 25, 0, 40])
def test_tables_across_blocks_match_enumeration(name, budget, monkeypatch):
    """Rows in blocks of 3, every feasible tree tabulated: all tables
    resident (large budget), none (each block builds its own), or some."""
    ens, X = many_rows(name)
    monkeypatch.setattr(semivalue_games, "_FORCE_ROUTE", "tables")
    monkeypatch.setattr(semivalue_games, "_RESIDENT_TABLE_ENTRIES", budget)
    calls = blocks_of_three(monkeypatch)
    got = shap_values(ens, X, n_jobs=2)
    assert calls[:2] == [3, 3] and sum(calls) == len(X)
    if ens.n_outputs == 1:
        got = got[:, None, :]
    for i in range(0, len(X), 7):
        want = reference.semivalue(ens, X[i], reference.shapley_weight)
        assert np.max(np.abs(got[i, :, :-1] - want)) <= 1e-12 * max(np.max(np.abs(want)), 1.0)
    # bit for bit the same for any number of threads
    again = shap_values(ens, X, n_jobs=1)
    np.testing.assert_array_equal(again.reshape(got.shape), got)


@pytest.mark.parametrize("name", ["single-output", "repeated-features", "vector-leaves"])
def test_tables_equal_quadrature_for_beta_shapley(name, monkeypatch):
    ens, X = many_rows(name)
    blocks_of_three(monkeypatch)
    monkeypatch.setattr(semivalue_games, "_FORCE_ROUTE", "quadrature")
    quadrature = beta_shapley_values(ens, X, alpha=4, beta=1)
    monkeypatch.setattr(semivalue_games, "_FORCE_ROUTE", "tables")
    tables = beta_shapley_values(ens, X, alpha=4, beta=1)
    np.testing.assert_allclose(tables, quadrature, rtol=0, atol=1e-12)
    assert np.max(np.abs(quadrature[..., :-1])) > 0


def test_leaf_pairs_are_units_of_single_output_trees():
    ens, _ = random_ensemble(**ENSEMBLES["single-output"])
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    structure = semivalue_games.SemivalueGame(ens, points, weights).structure()
    units = structure["units"]
    paired = units["right"] >= 0
    assert paired.any()
    # every leaf is in exactly one unit
    covered = np.concatenate([units["leaf"], units["right"][paired]])
    np.testing.assert_array_equal(np.sort(covered), np.arange(len(structure["leaf_node"])))
    # a pair is two children of one node
    left, right = structure["leaf_node"][units["leaf"][paired]], structure[
        "leaf_node"][units["right"][paired]]
    np.testing.assert_array_equal(ens.parent[left], ens.parent[right])
    vector, _ = random_ensemble(**ENSEMBLES["vector-leaves"])
    points, weights = beta_quadrature(1, 1, vector.n_path_features - 1)
    assert np.all(semivalue_games.SemivalueGame(vector, points, weights).structure()[
        "units"]["right"] < 0)


def test_pickled_game_drops_its_tables():
    ens, X = many_rows("single-output")
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    game = semivalue_games.SemivalueGame(ens, points, weights, n_rows=len(X))
    before = semivalue_games.uniform_semivalues(game, X, n_threads=1)
    assert game._resident is not None
    copy = pickle.loads(pickle.dumps(game))
    assert copy._resident is None
    np.testing.assert_array_equal(semivalue_games.uniform_semivalues(copy, X, n_threads=1),
                                  before)
