"""Kernels of models whose call is microseconds of work: a row times a matrix whose row is computed (a streaming
model's features, relu(conv + bias), times a projection) runs its few output vectors as one group of lanes (uop.lanes
over the whole output loop), each step's row value computed once; results against numpy."""
import re
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.host import VEC_WIDTH

@pytest.mark.parametrize("n", [VEC_WIDTH, 4 * VEC_WIDTH, 5 * VEC_WIDTH + 3])
def test_row_times_matrix_of_a_computed_row(n):
  """relu(x + b) @ W for one row of 496 and n outputs: equal to numpy's (float32 sums, reassociated); a few whole vectors
  of outputs take one group of lanes (the row's values computed once a step, not once per vector)."""
  r = np.random.default_rng(n)
  x, b, w = r.standard_normal((1, 496), dtype=np.float32), r.standard_normal(496, dtype=np.float32), r.standard_normal((496, n), dtype=np.float32)
  y = (Tensor(x) + Tensor(b)).relu() @ Tensor(w)
  if n % VEC_WIDTH == 0 and n <= 4 * VEC_WIDTH: assert re.search(rf"uop.lanes = {n} ", y.mlir("uop-optimize"))
  np.testing.assert_allclose(y.numpy(), np.maximum(x + b, 0) @ w, rtol=1e-4, atol=1e-4)
