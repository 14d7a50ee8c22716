"""What pytest collects, and the ``slow`` mark.

The documentation's pages (doc/*.rst) are collected as doctests; the Sphinx
configuration, its helpers and the files the build generates are not tests.

The ``slow`` mark is what the fast subset (``-m "not slow"``) leaves out.

CI runs the whole suite on one Python and the fast subset on the other
claimed Pythons, on the minimum dependencies and on a build without OpenMP
(``build_tools/check_release.sh``). The fast subset keeps every kernel's
enumeration tests, every adapter's comparison with its library, the dask and
early-stopping cases; it leaves out the tests measured at 10 s or more
(``python -m pytest -n 2 --durations=0`` on 2026-11-27, 2 cores under load:
these were 130 of 1,876 tests and three quarters of the time): statistical
calibration over many seeds, the examples and README blocks run in
subprocesses, bit-identity over thread counts on large data, and the slowest
of scikit-learn's estimator checks.
"""
import importlib.util

import pytest

collect_ignore = ["doc/conf.py", "doc/_gallery.py", "setup.py"]
collect_ignore_glob = ["doc/_build/*", "doc/auto_examples/*", "doc/generated/*",
                       "doc/sg_execution_times.rst"]

SLOW_TESTS = {
    "test_bench_selection_metrics.py::test_against_sklearn_on_every_pair_of_subsets",
    "test_d2_selector.py::test_cv_uses_stratified_folds",
    "test_d2_selector.py::test_pipeline_and_grid_search_multiclass",
    "test_d2_selector.py::test_string_labels_and_auto_method",
    "test_dask.py::test_dask_is_not_imported_for_in_memory_inputs",
    "test_dask.py::test_r2_sklearn_regressors_and_classifiers",
    "test_dask.py::test_sklearn_models_equal_in_memory",
    "test_dask.py::test_xgboost_equal_in_memory_and_xgboost_dask",
    "test_defaults.py::test_shapley_r2_importance_default_classifier",
    "test_defaults.py::test_shapley_r2_importance_default_classifier_cv_is_stratified",
    "test_defaults.py::test_shapley_r2_importance_default_regressor",
    "test_examples.py::test_d2_classifiers_quick",
    "test_examples.py::test_r2_interactions",
    "test_examples.py::test_dask_local_cluster",
    "test_examples.py::test_diabetes_r2",
    "test_examples.py::test_how_many_features_quick",
    "test_examples.py::test_interaction_values",
    "test_examples.py::test_piecewise_linear_lightgbm_quick",
    "test_examples.py::test_pipeline_explanations",
    "test_examples.py::test_qshap_simulation_quick",
    "test_examples.py::test_ranking_insertion_deletion_quick",
    "test_examples.py::test_shapflex_vs_qshap_quick",
    "test_groups.py::test_selector_groups_input_on_pipeline_selects_input_columns",
    "test_inputs.py::test_sparse_lightgbm_absent_is_zero",
    "test_inputs.py::test_sparse_sklearn_absent_is_zero",
    "test_inputs.py::test_sparse_xgboost_absent_is_missing",
    "test_interactions.py::test_more_than_64_features_on_a_path",
    "test_interrupt.py::test_sigint_stops_kernel",
    "test_interrupt.py::test_sigint_delay_exact_r2_as_a_user_calls_it",
    "test_layers.py::test_bit_identical_for_any_n_jobs",
    "test_layers.py::test_r2_decomposition_checks_X_once",
    "test_layers.py::test_small_blocks_are_several_blocks",
    "test_pipeline.py::test_selector_prefit_pipeline_uses_qshap_on_transformed_features",
    "test_r2_sampled.py::test_max_samples_estimates_the_full_data",
    "test_readme.py::test_readme_block_runs_on_its_own",
    "test_selection.py::test_classifier_pipeline_grid_search_and_plot",
    "test_selection.py::test_default_score_is_the_held_out_decomposition_score",
    "test_selection.py::test_elimination_scores_are_not_optimistic_on_null_data",
    "test_selection.py::test_error_rates_within_binomial_noise",
    "test_selection.py::test_null_pvalues_are_not_anticonservative",
    "test_selection.py::test_one_se_picks_no_more_features_than_best",
    "test_selection.py::test_same_features_as_sklearn_rfecv",
    "test_selectors.py::test_fit_sets_the_decomposition",
    "test_selectors.py::test_pipeline_grid_search_and_pandas_output",
    "test_shapflex.py::test_method_resolution",
    "test_user_facing.py::test_main_command_without_pandas_explains_and_ranks",
    "test_user_facing.py::test_readme_array_block_runs_without_pandas",
}

#: scikit-learn estimator checks that took 8 s or more for ShapleyR2Importance,
#: which cross-fits a model in each (its other checks, and every check of the
#: other estimators, stay in the fast subset)
SLOW_CHECKS = {
    "check_dict_unchanged", "check_dont_overwrite_parameters", "check_dtype_object",
    "check_estimator_sparse_array", "check_estimator_sparse_matrix", "check_estimators_dtypes",
    "check_estimators_fit_returns_self", "check_estimators_overwrite_params",
    "check_estimators_pickle", "check_f_contiguous_array_estimator", "check_fit_check_is_fitted",
    "check_fit_idempotent", "check_fit_score_takes_y", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance", "check_n_features_in", "check_pipeline_consistency",
    "check_positive_only_tag_during_fit", "check_readonly_memmap_input",
    "check_sample_weight_equivalence_on_dense_data",
    "check_sample_weight_equivalence_on_sparse_data", "check_sample_weights_list",
    "check_sample_weights_not_overwritten", "check_sample_weights_shape",
    "check_transformer_data_not_an_array", "check_transformer_general",
    "check_transformer_preserve_dtypes",
}


def _is_slow(item):
    if item.path.parent.name != "tests":
        return False
    name = f"{item.path.name}::{item.originalname}" if hasattr(item, "originalname") else ""
    if name in SLOW_TESTS:
        return True
    if item.name.startswith("test_sklearn_compatible") and "[ShapleyR2Importance(" in item.name:
        return any(f"-{check}" in item.name for check in SLOW_CHECKS)
    return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)


def pytest_ignore_collect(collection_path, config):
    """sklearn_r2shap/spark.py imports pyspark (an optional dependency): its
    doctests in the checkout are collected only where pyspark is installed
    (for an installed wheel, ``build_tools/check_release.sh`` passes
    ``--ignore``: a conftest's hooks see only the paths below it)."""
    if (collection_path.name == "spark.py" and collection_path.parent.name == "sklearn_r2shap"
            and importlib.util.find_spec("pyspark") is None):
        return True
    return None
