import pytest

from tokenizer import Token, TokenizeError, apply_operator, evaluate, to_rpn, tokenize


def texts(tokens):
    return [t.text for t in tokens]


def test_tokenize_simple_expression():
    assert texts(tokenize("1 + 22")) == ["1", "+", "22"]


def test_tokenize_records_positions():
    assert [t.position for t in tokenize("ab + 3")] == [0, 3, 5]


def test_tokenize_kinds():
    assert [t.kind for t in tokenize('x * 2 + "s"')] == ["name", "op", "number", "op", "string"]


def test_tokenize_float_and_leading_dot():
    assert texts(tokenize("3.25 .5")) == ["3.25", ".5"]


def test_tokenize_second_dot_ends_number():
    assert texts(tokenize("1.2.3")) == ["1.2", ".3"]


def test_tokenize_leading_dot_before_operator():
    assert texts(tokenize(".5+1")) == [".5", "+", "1"]


def test_tokenize_names_around_operator():
    assert texts(tokenize("ab+cd")) == ["ab", "+", "cd"]


def test_tokenize_identifier_with_digits_and_underscore():
    assert tokenize("_tmp2")[0] == Token("name", "_tmp2", 0)


def test_tokenize_two_char_operators():
    assert texts(tokenize("a**b<=c!=d")) == ["a", "**", "b", "<=", "c", "!=", "d"]


def test_tokenize_string_escape():
    assert tokenize(r'"a\"b"')[0].text == 'a"b'


def test_tokenize_strings_without_spaces():
    assert texts(tokenize('"a"+"b"')) == ["a", "+", "b"]


def test_tokenize_escape_at_end_leaves_string_unterminated():
    with pytest.raises(TokenizeError):
        tokenize('"ab\\')
    with pytest.raises(TokenizeError):
        tokenize(r'"a\"')


def test_tokenize_unterminated_string():
    with pytest.raises(TokenizeError) as info:
        tokenize('1 + "abc')
    assert info.value.position == 4


def test_tokenize_unknown_character():
    with pytest.raises(TokenizeError) as info:
        tokenize("1 $ 2")
    assert info.value.position == 2


def test_tokenize_empty():
    assert tokenize("   ") == []


def test_to_rpn_precedence():
    assert texts(to_rpn(tokenize("1 + 2 * 3"))) == ["1", "2", "3", "*", "+"]


def test_to_rpn_left_associative():
    assert texts(to_rpn(tokenize("8 - 3 - 2"))) == ["8", "3", "-", "2", "-"]


def test_to_rpn_right_associative_power():
    assert texts(to_rpn(tokenize("2 ** 3 ** 2"))) == ["2", "3", "2", "**", "**"]


def test_to_rpn_comparisons_bind_looser_than_additive():
    for op in ("<", ">", "<=", ">="):
        assert texts(to_rpn(tokenize(f"a {op} b + c"))) == ["a", "b", "c", "+", op]


def test_to_rpn_equality_binds_looser_than_ordering():
    for op in ("==", "!="):
        assert texts(to_rpn(tokenize(f"a {op} b < c"))) == ["a", "b", "c", "<", op]


def test_to_rpn_minus_below_times():
    assert texts(to_rpn(tokenize("a - b * c"))) == ["a", "b", "c", "*", "-"]


def test_to_rpn_multiplicative_left_to_right():
    assert texts(to_rpn(tokenize("a / b * c"))) == ["a", "b", "/", "c", "*"]
    assert texts(to_rpn(tokenize("a * b % c"))) == ["a", "b", "*", "c", "%"]
    assert texts(to_rpn(tokenize("a * b / c"))) == ["a", "b", "*", "c", "/"]


def test_to_rpn_parentheses():
    assert texts(to_rpn(tokenize("(1 + 2) * 3"))) == ["1", "2", "+", "3", "*"]


def test_to_rpn_unmatched_close():
    with pytest.raises(ValueError):
        to_rpn(tokenize("1 + 2)"))


def test_to_rpn_unmatched_open():
    with pytest.raises(ValueError):
        to_rpn(tokenize("(1 + 2"))


def test_apply_operator_arithmetic():
    assert [apply_operator(op, 7, 2) for op in ("+", "-", "*", "%", "**")] == [9, 5, 14, 1, 49]


def test_apply_operator_division():
    assert apply_operator("/", 7, 2) == 3.5


def test_apply_operator_comparisons():
    results = [apply_operator(op, 2, 2) for op in ("<", ">", "<=", ">=", "==", "!=")]
    assert results == [False, False, True, True, True, False]


def test_apply_operator_strict_less():
    assert apply_operator("<", 1, 2) is True
    assert apply_operator(">", 1, 2) is False


def test_evaluate_precedence():
    assert evaluate("2 + 3 * 4") == 14


def test_evaluate_subtraction_order():
    assert evaluate("10 - 4 - 3") == 3


def test_evaluate_division_order():
    assert evaluate("20 / 4 / 5") == 1.0


def test_evaluate_power_right_assoc():
    assert evaluate("2 ** 3 ** 2") == 512


def test_evaluate_variables():
    assert evaluate("2 * (x + 1)", {"x": 4}) == 10


def test_evaluate_comparison():
    assert evaluate("1 + 1 == 2") is True


def test_evaluate_string_concat():
    assert evaluate('"ab" + "cd"') == "abcd"


def test_evaluate_float_literal():
    assert evaluate("1.5 * 2") == 3.0


def test_evaluate_unknown_variable():
    with pytest.raises(NameError):
        evaluate("y + 1")


def test_evaluate_missing_operand():
    with pytest.raises(ValueError):
        evaluate("1 +")


def test_evaluate_two_values_malformed():
    with pytest.raises(ValueError):
        evaluate("1 2")
