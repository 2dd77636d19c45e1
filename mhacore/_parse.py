"""Read a student's answer string as a SymPy expression without running it.

``sympy.sympify`` hands its string to Python's ``eval``, so an answer such as
``"__import__('os').system(...)"`` would run. Here the string is first parsed by Python's
``ast`` module (which only builds a syntax tree, it executes nothing) and every node of the
tree is checked against a whitelist: numbers, the names the exercise allows, a few
mathematical functions called with plain arguments, and the arithmetic operators. Only a
string that passes is given to ``sympy.parsing.sympy_parser.parse_expr``, with a namespace
that holds nothing but those names. Anything else (attribute access, subscripts, strings,
lambdas, comprehensions, keyword arguments, names starting with ``_``, unknown names, huge
powers) is rejected with :class:`UnsafeAnswer`, whose message says what was refused.

``^`` means a power, as SymPy reads it: it is rewritten to ``**`` before the tree is
built, so the whitelist sees the precedence and right-associativity SymPy will use
(``9^9^9`` is ``9**(9**9)``, refused as a power of a constant power, not ``(9**9)**9``).
The work SymPy may be asked for is bounded before it sees the answer: constant exponents
up to :data:`MAX_EXPONENT`, power towers of at most :data:`MAX_TOWER` levels, function
calls nested at most :data:`MAX_CALL_DEPTH` deep, and the tree at most :data:`MAX_DEPTH`
deep.
"""

from __future__ import annotations

import ast
import cmath
import math
import re
import unicodedata

MAX_LENGTH = 500  # characters; an answer is a formula, not a program
MAX_EXPONENT = 100  # |constant exponent|: keeps 9**9**9-style answers from hanging SymPy
MAX_MAGNITUDE = 1e300  # |value| of any constant part: exp(exp(exp(100))) would hang SymPy
MAX_TOWER = 2  # x**y**z has three levels: beyond two, evaluating at a point can hang
MAX_CALL_DEPTH = 3  # exp(exp(exp(exp(exp(p))))) hangs SymPy's evaluation
MAX_DEPTH = 100  # nodes from the root to any leaf (a 500-character answer stays far below)
FUNCTIONS = ("sqrt", "exp", "log", "ln", "sin", "cos", "tan", "Abs", "Rational", "pi", "E")
# how many arguments each callable function takes (pi and E are constants, not calls)
ARITY = {"sqrt": (1,), "exp": (1,), "log": (1, 2), "ln": (1,), "sin": (1,), "cos": (1,),
         "tan": (1,), "Abs": (1,), "Rational": (2,)}
# ^ never reaches the tree: parse_answer rewrites it to ** first
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.USub, ast.UAdd)
ALLOWED = "numbers, the operators + - * / ** ^ and parentheses"


class UnsafeAnswer(ValueError):
    """An answer string that is not a plain formula; nothing in it was run."""


def _constant_size(node: ast.AST) -> float:
    """The largest |number| in a subtree without names, or inf if it holds a name/power."""
    if isinstance(node, ast.Constant):
        return abs(node.value)
    if isinstance(node, ast.UnaryOp):
        return _constant_size(node.operand)
    if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.Pow):
        return max(_constant_size(node.left), _constant_size(node.right))
    return float("inf")


_CONSTANTS = {"pi": math.pi, "E": math.e}
_FLOAT_FUNCTIONS = {"sqrt": cmath.sqrt, "exp": cmath.exp, "log": cmath.log, "ln": cmath.log,
                    "sin": cmath.sin, "cos": cmath.cos, "tan": cmath.tan, "Abs": abs,
                    "Rational": lambda a, b: a / b}
_FLOAT_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
                    ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
                    ast.Pow: lambda a, b: a ** b}


def _approximate(node: ast.AST):
    """The value of a constant part of an (already whitelisted) answer in floating point,
    computed bottom-up in bounded time; None where the part holds a symbol or has no finite
    value. Raises UnsafeAnswer when a constant part is too large for SymPy to handle."""
    try:
        if isinstance(node, ast.Constant):
            value = complex(float(node.value))
        elif isinstance(node, ast.Name):
            value = _CONSTANTS.get(node.id)
        elif isinstance(node, ast.UnaryOp):
            inner = _approximate(node.operand)
            value = None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
        elif isinstance(node, ast.BinOp):
            left, right = _approximate(node.left), _approximate(node.right)
            value = (None if left is None or right is None
                     else _FLOAT_OPERATORS[type(node.op)](left, right))
        else:  # a call of a whitelisted function
            args = [_approximate(a) for a in node.args]
            value = (None if any(a is None for a in args)
                     else _FLOAT_FUNCTIONS[node.func.id](*args))
    except UnsafeAnswer:
        raise
    except OverflowError:
        raise UnsafeAnswer("a number in it is too large") from None
    except (ZeroDivisionError, ValueError, TypeError):
        return None  # no finite value (1/0, log(0)): SymPy handles these quickly
    if value is not None and abs(value) > MAX_MAGNITUDE:
        raise UnsafeAnswer("a number in it is too large")
    return value


def _check_node(node: ast.AST, names: frozenset) -> None:
    if isinstance(node, ast.Expression):
        return _check_node(node.body, names)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise UnsafeAnswer(f"only numbers are allowed as literals; got {node.value!r}")
        return None
    if isinstance(node, ast.Name):
        if node.id.startswith("_") or node.id not in names:
            known = ", ".join(sorted(names - set(FUNCTIONS))) or "none"
            raise UnsafeAnswer(f"unknown name {node.id!r} (names allowed: {known}; "
                               f"functions: {', '.join(FUNCTIONS)})")
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, _OPERATORS):
        return _check_node(node.operand, names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _OPERATORS):
        if _is_power(node) and \
                MAX_EXPONENT < _constant_size(node.right) < float("inf"):
            raise UnsafeAnswer(f"a constant exponent must lie between -{MAX_EXPONENT} and "
                               f"{MAX_EXPONENT}")
        if _is_power(node) and any(_is_power(n) for n in ast.walk(node.right)) and \
                not any(isinstance(n, ast.Name) for n in ast.walk(node.right)):
            raise UnsafeAnswer("a power of a constant power is not allowed; simplify it")
        _check_node(node.left, names)
        return _check_node(node.right, names)
    if isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
            raise UnsafeAnswer(f"only the functions {', '.join(FUNCTIONS)} can be called")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise UnsafeAnswer("function calls take plain arguments only")
        wanted = ARITY.get(node.func.id, (0,))
        if len(node.args) not in wanted:
            counts = " or ".join(map(str, wanted))
            raise UnsafeAnswer(f"{node.func.id} takes {counts} argument(s); got "
                               f"{len(node.args)}")
        for arg in node.args:
            _check_node(arg, names)
        return None
    raise UnsafeAnswer(f"{type(node).__name__.lower()} expressions are not allowed; use "
                       f"{ALLOWED}")


def _is_power(node: ast.AST) -> bool:
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)


def _bound_work(node: ast.AST, depth: int = 0, calls: int = 0) -> int:
    """Refuse a tree deeper than :data:`MAX_DEPTH`, with function calls nested deeper than
    :data:`MAX_CALL_DEPTH`, or with a power tower above :data:`MAX_TOWER` levels; return the
    height of the power tower at ``node``."""
    if depth > MAX_DEPTH:
        raise UnsafeAnswer(f"it is nested more than {MAX_DEPTH} levels deep; simplify it")
    if isinstance(node, ast.Call):
        calls += 1
        if calls > MAX_CALL_DEPTH:
            raise UnsafeAnswer(f"functions are nested more than {MAX_CALL_DEPTH} deep "
                               "(as in exp(exp(exp(exp(x))))); simplify it")
    tower = 0
    for child in ast.iter_child_nodes(node):
        height = _bound_work(child, depth + 1, calls)
        if _is_power(node) and child is node.right:
            tower = height
    if _is_power(node):
        tower += 1
        if tower > MAX_TOWER:
            raise UnsafeAnswer(f"a tower of more than {MAX_TOWER} powers (as in x^y^z^w) "
                               "is not allowed; simplify it")
        return tower
    return 0


def _refuse_decimal_comma(text: str) -> None:
    """Explain ``1,04`` (a decimal comma), which Python reads as a pair or as bad syntax."""
    match = re.search(r"\d,\d", text)
    if match:
        raise UnsafeAnswer(f"it has a comma between digits ({match.group()}); write decimals "
                           "with a decimal point, e.g. 2.5, not 2,5")


def parse_answer(text: str, symbols: dict | None = None):
    """Parse ``text`` into a SymPy expression, refusing anything but a plain formula.

    Parameters
    ----------
    text : str
        The answer, e.g. ``"sigma**2/n"`` or ``"2.718"``; ``^`` means a power.
    symbols : dict of str to sympy.Symbol, optional
        The names the answer may use and the symbols they stand for.

    Returns
    -------
    sympy.Expr

    Raises
    ------
    UnsafeAnswer
        If ``text`` is not Python-like syntax, or uses anything outside the whitelist
        (the message says what); nothing of ``text`` has been executed.

    Examples
    --------
    >>> import sympy as sp
    >>> n = sp.Symbol("n")
    >>> parse_answer("2/n^2", {"n": n})
    2/n**2
    >>> parse_answer("__import__('os').getcwd()")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    mhacore._parse.UnsafeAnswer: only the functions sqrt, exp, ..., E can be called
    """
    import sympy as sp
    from sympy.parsing.sympy_parser import parse_expr, standard_transformations

    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__}")
    # one spelling of every character, as Python's own parser reads names (ｒ is r), so
    # the whitelist and SymPy see the same symbols
    text = unicodedata.normalize("NFKC", str.__getitem__(text, slice(None)))
    symbols = dict(symbols or {})
    if len(text) > MAX_LENGTH:
        raise UnsafeAnswer(f"the answer is longer than {MAX_LENGTH} characters")
    if not text.strip():
        raise UnsafeAnswer("the answer is empty")
    formula = text.strip().replace("^", "**")  # SymPy's reading of ^, precedence and all
    try:
        tree = ast.parse(formula, mode="eval")
    except SyntaxError as exc:
        _refuse_decimal_comma(text)
        raise UnsafeAnswer(f"it is not a formula ({exc.msg}); use {ALLOWED}") from None
    except (RecursionError, MemoryError):
        raise UnsafeAnswer(f"it is nested too deeply; use {ALLOWED}") from None
    if isinstance(tree.body, ast.Tuple):
        _refuse_decimal_comma(text)
    _bound_work(tree.body)
    _check_node(tree, frozenset(symbols) | frozenset(FUNCTIONS))
    _approximate(tree.body)
    namespace = {name: getattr(sp, name) for name in FUNCTIONS if name != "ln"}
    namespace.update(ln=sp.log, Integer=sp.Integer, Float=sp.Float, Symbol=sp.Symbol,
                     __builtins__={})
    namespace.update(symbols)
    try:
        return parse_expr(formula, local_dict={}, global_dict=namespace,
                          transformations=standard_transformations)
    except (TypeError, ValueError, AttributeError, ArithmeticError, sp.SympifyError) as exc:
        # a whitelisted function called wrongly, e.g. Rational(1) or sqrt()
        raise UnsafeAnswer(f"it cannot be read as a formula ({type(exc).__name__}); check "
                           "the arguments of its functions") from None
