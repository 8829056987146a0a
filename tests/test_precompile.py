"""``python -m coresvm.precompile`` compiles what large default fits use, so that none compiles inside a fit."""

from coresvm import kernels
from coresvm.precompile import main
from coresvm.solvers import active_face, core_gram, core_steps


def test_precompile_compiles_the_loops_of_large_fits(capsys):
    assert main([]) == 0
    assert "compiled and cached" in capsys.readouterr().out
    # only large fits reach these: Newton steps in the core set's float32 Gram (faces above CHOLESKY_MAX_FACE by
    # conjugate gradients), float32 scoring of candidates with many features or against a sparse support, and the
    # sparse products of a CSR core set, and kernel rows computed per step past the stored Gram
    for loop in (active_face.rows_times_vector, active_face.gram_face_product, active_face.residual_of_ones,
                 kernels.widened_matvec, kernels.widened_matvec_transposed, kernels.csr_rows_times_dense,
                 kernels.csr_rows_exp_sums, kernels.csr_scaled_transposed, core_gram.computed_gradient):
        assert any("float32" in str(signature) for signature in loop.signatures), loop.__name__
    # ... and a float64 Gram's: tight tolerances, or large C once float32's rounding broke a face
    for loop in (active_face.rows_times_vector, active_face.gram_face_product, core_steps.inner_solve):
        assert any(str(signature).startswith("(Array(float64, 2") for signature in loop.signatures), loop.__name__
