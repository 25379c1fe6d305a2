"""Dense matrix helpers on plain lists of lists of numbers."""

Matrix = list[list[float]]


def shape(m: Matrix) -> tuple[int, int]:
    """Return ``(rows, cols)``.

    Raises:
        ValueError: if the rows have different lengths.
    """
    rows = len(m)
    cols = len(m[0]) if rows > 0 else 0
    for row in m:
        if len(row) != cols:
            raise ValueError("ragged matrix")
    return rows, cols


def identity(n: int) -> Matrix:
    """The ``n`` by ``n`` identity matrix."""
    return [[1 if i == j else 0 for j in range(n)] for i in range(n)]


def transpose(m: Matrix) -> Matrix:
    """Rows become columns."""
    rows, cols = shape(m)
    return [[m[i][j] for i in range(rows)] for j in range(cols)]


def add(a: Matrix, b: Matrix) -> Matrix:
    """Element-wise sum of two matrices of the same shape."""
    if shape(a) != shape(b):
        raise ValueError(f"shape mismatch: {shape(a)} vs {shape(b)}")
    rows, cols = shape(a)
    return [[a[i][j] + b[i][j] for j in range(cols)] for i in range(rows)]


def scale(m: Matrix, factor: float) -> Matrix:
    """Multiply every element by ``factor``."""
    return [[value * factor for value in row] for row in m]


def matmul(a: Matrix, b: Matrix) -> Matrix:
    """Matrix product ``a @ b``.

    Raises:
        ValueError: when the inner dimensions differ.
    """
    a_rows, a_cols = shape(a)
    b_rows, b_cols = shape(b)
    if a_cols != b_rows:
        raise ValueError(f"cannot multiply {a_rows}x{a_cols} by {b_rows}x{b_cols}")
    result = [[0] * b_cols for _ in range(a_rows)]
    for i in range(a_rows):
        for j in range(b_cols):
            total = 0
            for k in range(a_cols):
                total += a[i][k] * b[k][j]
            result[i][j] = total
    return result


def trace(m: Matrix) -> float:
    """Sum of the main diagonal of a square matrix."""
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError("trace needs a square matrix")
    return sum(m[i][i] for i in range(rows))


def minor(m: Matrix, row: int, col: int) -> Matrix:
    """The matrix without row ``row`` and column ``col``."""
    return [r[:col] + r[col + 1 :] for i, r in enumerate(m) if i != row]


def determinant(m: Matrix) -> float:
    """Determinant by cofactor expansion along the first row.

    Raises:
        ValueError: for a non-square matrix.
    """
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError("determinant needs a square matrix")
    if rows == 0:
        return 1
    if rows == 1:
        return m[0][0]
    if rows == 2:
        return m[0][0] * m[1][1] - m[0][1] * m[1][0]
    total = 0
    for j in range(cols):
        sign = 1 if j % 2 == 0 else -1
        total += sign * m[0][j] * determinant(minor(m, 0, j))
    return total


def power(m: Matrix, exponent: int) -> Matrix:
    """``m`` raised to a non-negative integer power by repeated squaring."""
    rows, cols = shape(m)
    if rows != cols:
        raise ValueError("power needs a square matrix")
    if exponent < 0:
        raise ValueError("negative exponents are not supported")
    result = identity(rows)
    base = m
    while exponent > 0:
        if exponent % 2 == 1:
            result = matmul(result, base)
        base = matmul(base, base)
        exponent //= 2
    return result
