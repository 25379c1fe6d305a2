import pytest

from matrix import add, determinant, identity, matmul, minor, power, scale, shape, trace, transpose

A = [[1, 2, 3], [4, 5, 6]]


def test_shape_rectangular():
    assert shape(A) == (2, 3)


def test_shape_empty():
    assert shape([]) == (0, 0)


def test_shape_ragged_raises():
    with pytest.raises(ValueError):
        shape([[1, 2], [3]])


def test_identity_three():
    assert identity(3) == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]


def test_identity_one():
    assert identity(1) == [[1]]


def test_transpose_rectangular():
    assert transpose(A) == [[1, 4], [2, 5], [3, 6]]


def test_transpose_twice_is_original():
    assert transpose(transpose(A)) == A


def test_add_elementwise():
    assert add(A, [[10, 20, 30], [40, 50, 60]]) == [[11, 22, 33], [44, 55, 66]]


def test_add_shape_mismatch():
    with pytest.raises(ValueError):
        add(A, [[1, 2], [3, 4]])


def test_scale_by_two():
    assert scale(A, 2) == [[2, 4, 6], [8, 10, 12]]


def test_scale_by_zero():
    assert scale([[5, -3]], 0) == [[0, 0]]


def test_matmul_rectangular():
    assert matmul(A, [[1, 0], [0, 1], [1, 1]]) == [[4, 5], [10, 11]]


def test_matmul_non_commutative():
    a = [[1, 2], [3, 4]]
    b = [[0, 1], [1, 0]]
    assert matmul(a, b) == [[2, 1], [4, 3]]
    assert matmul(b, a) == [[3, 4], [1, 2]]


def test_matmul_identity():
    assert matmul(identity(2), [[7, 8], [9, 10]]) == [[7, 8], [9, 10]]


def test_matmul_dimension_mismatch():
    with pytest.raises(ValueError):
        matmul(A, A)


def test_trace_square():
    assert trace([[1, 2], [3, 4]]) == 5


def test_trace_non_square_raises():
    with pytest.raises(ValueError):
        trace(A)


def test_minor_middle():
    m = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert minor(m, 1, 1) == [[1, 3], [7, 9]]


def test_minor_last_column():
    m = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert minor(m, 0, 2) == [[4, 5], [7, 8]]


def test_determinant_two_by_two():
    assert determinant([[3, 8], [4, 6]]) == -14


def test_determinant_three_by_three():
    assert determinant([[6, 1, 1], [4, -2, 5], [2, 8, 7]]) == -306


def test_determinant_four_by_four():
    m = [[1, 0, 2, -1], [3, 0, 0, 5], [2, 1, 4, -3], [1, 0, 5, 0]]
    assert determinant(m) == 30


def test_determinant_singular():
    assert determinant([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) == 0


def test_determinant_one_by_one():
    assert determinant([[7]]) == 7


def test_determinant_empty_is_one():
    assert determinant([]) == 1


def test_determinant_non_square_raises():
    with pytest.raises(ValueError):
        determinant(A)


def test_power_zero_is_identity():
    assert power([[2, 3], [4, 5]], 0) == identity(2)


def test_power_fibonacci():
    assert power([[1, 1], [1, 0]], 10) == [[89, 55], [55, 34]]


def test_power_three():
    assert power([[2, 0], [0, 3]], 3) == [[8, 0], [0, 27]]


def test_power_negative_raises():
    with pytest.raises(ValueError):
        power([[1]], -1)
