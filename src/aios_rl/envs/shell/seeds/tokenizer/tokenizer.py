"""Tokenizer, shunting-yard parser and evaluator for arithmetic expressions."""

from dataclasses import dataclass

TWO_CHAR_OPERATORS = ("**", "==", "!=", "<=", ">=")
ONE_CHAR_OPERATORS = "+-*/%<>()"
PRECEDENCE = {"==": 1, "!=": 1, "<": 2, ">": 2, "<=": 2, ">=": 2, "+": 3, "-": 3,
              "*": 4, "/": 4, "%": 4, "**": 5}
RIGHT_ASSOCIATIVE = frozenset({"**"})


class TokenizeError(ValueError):
    """Raised for characters or literals that cannot be tokenized."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at position {position}")
        self.position = position


@dataclass(frozen=True)
class Token:
    """A lexical token: ``kind`` is one of number, name, string, op."""

    kind: str
    text: str
    position: int


def _read_string(source: str, start: int) -> tuple[str, int]:
    chars: list[str] = []
    i = start + 1
    while i < len(source):
        ch = source[i]
        if ch == "\\" and i + 1 < len(source):
            chars.append(source[i + 1])
            i += 2
            continue
        if ch == '"':
            return "".join(chars), i + 1
        chars.append(ch)
        i += 1
    raise TokenizeError("unterminated string", start)


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens, skipping whitespace.

    Raises:
        TokenizeError: on an unknown character or an unterminated string.
    """
    tokens: list[Token] = []
    i = 0
    while i < len(source):
        ch = source[i]
        if ch.isspace():
            i += 1
        elif ch.isdigit() or (ch == "." and source[i + 1 : i + 2].isdigit()):
            j = i
            seen_dot = False
            while j < len(source) and (source[j].isdigit() or (source[j] == "." and not seen_dot)):
                seen_dot = seen_dot or source[j] == "."
                j += 1
            tokens.append(Token("number", source[i:j], i))
            i = j
        elif ch.isalpha() or ch == "_":
            j = i + 1
            while j < len(source) and (source[j].isalnum() or source[j] == "_"):
                j += 1
            tokens.append(Token("name", source[i:j], i))
            i = j
        elif ch == '"':
            text, end = _read_string(source, i)
            tokens.append(Token("string", text, i))
            i = end
        elif source[i : i + 2] in TWO_CHAR_OPERATORS:
            tokens.append(Token("op", source[i : i + 2], i))
            i += 2
        elif ch in ONE_CHAR_OPERATORS:
            tokens.append(Token("op", ch, i))
            i += 1
        else:
            raise TokenizeError(f"unexpected character {ch!r}", i)
    return tokens


def to_rpn(tokens: list[Token]) -> list[Token]:
    """Reorder infix tokens into reverse Polish notation (shunting-yard).

    Raises:
        ValueError: on unbalanced parentheses.
    """
    output: list[Token] = []
    stack: list[Token] = []
    for token in tokens:
        if token.kind != "op":
            output.append(token)
        elif token.text == "(":
            stack.append(token)
        elif token.text == ")":
            while stack and stack[-1].text != "(":
                output.append(stack.pop())
            if not stack:
                raise ValueError(f"unmatched ')' at position {token.position}")
            stack.pop()
        else:
            prec = PRECEDENCE[token.text]
            while stack and stack[-1].text != "(":
                top = PRECEDENCE[stack[-1].text]
                if top > prec or (top == prec and token.text not in RIGHT_ASSOCIATIVE):
                    output.append(stack.pop())
                else:
                    break
            stack.append(token)
    while stack:
        token = stack.pop()
        if token.text == "(":
            raise ValueError(f"unmatched '(' at position {token.position}")
        output.append(token)
    return output


def apply_operator(op: str, left, right):
    """Apply a binary operator; comparisons return booleans."""
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    if op == "/":
        return left / right
    if op == "%":
        return left % right
    if op == "**":
        return left**right
    comparisons = {"<": left < right, ">": left > right, "<=": left <= right,
                   ">=": left >= right, "==": left == right, "!=": left != right}
    return comparisons[op]


def evaluate(source: str, variables: dict | None = None):
    """Evaluate an expression with optional named ``variables``.

    Example:
        >>> evaluate("2 * (x + 1)", {"x": 4})
        10
    """
    env = variables or {}
    stack = []
    for token in to_rpn(tokenize(source)):
        if token.kind == "number":
            stack.append(float(token.text) if "." in token.text else int(token.text))
        elif token.kind == "string":
            stack.append(token.text)
        elif token.kind == "name":
            if token.text not in env:
                raise NameError(f"unknown variable {token.text!r}")
            stack.append(env[token.text])
        else:
            if len(stack) < 2:
                raise ValueError(f"missing operand for {token.text!r}")
            right = stack.pop()
            left = stack.pop()
            stack.append(apply_operator(token.text, left, right))
    if len(stack) != 1:
        raise ValueError("malformed expression")
    return stack[0]
